// Async TP (tensor_parallel's async_tp) against TP + SP without it, docs/performance.md
// "Async TP": the median training-step time of each, in rounds that alternate the two (the
// machine is shared and noisy), on thread ranks, and the step's communication from the
// traffic estimator (collective calls and bytes sent point to point on tp).
//
//   bench_async_tp [global batch] [seq_len] [steps] [rounds]
//
// Two pairs: debug_tp's mesh and policies (tp = 2) with and without async_tp, and debug_2d
// (dp = 2 x tp = 2) against debug_2d_async. In-process ranks copy a message when it is
// posted, so the ring's transfers cannot run beside the GEMMs here: this measures what the
// decomposition costs (more, smaller GEMMs and the ring's copies), not what it hides.
// Prints a Markdown table. Run with TESSERA_NUM_THREADS=1 (one core per rank thread).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/trainer.hpp>
#include <tessera/train/traffic_estimator.hpp>

using namespace tessera;

namespace {
struct debug_tp_async {
  static constexpr std::string_view name = "debug_tp_async";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel, async_tp>>;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Appends the times of `steps` training steps of R (after one warm-up) to `times`.
template <class R>
void time_steps(int world, std::int64_t B, std::int64_t T, int steps, std::vector<double>& times) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(B * T * (steps + 2) + 1));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<std::int32_t>((i * 7) % static_cast<std::size_t>(recipe_traits<R>::config.vocab_size));
  std::vector<double> mine;
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    device_mesh<typename R::mesh> dm(typename R::mesh(), c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(0);
    train::batch_loader loader(tokens, B, T, 0);
    train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, steps + 1, 1, {}, 0);
    for (int s = 0; s <= steps; ++s) {
      c.barrier().wait();
      const auto t0 = std::chrono::steady_clock::now();
      tr.train_step();
      if (s > 0 && c.rank() == 0) mine.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  });
  times.insert(times.end(), mine.begin(), mine.end());
}

template <class Sync, class Async>
void pair(const char* what, int world, std::int64_t B, std::int64_t T, int steps, int rounds) {
  std::vector<double> s, a;
  for (int r = 0; r < rounds; ++r) {
    time_steps<Sync>(world, B, T, steps, s);
    time_steps<Async>(world, B, T, steps, a);
  }
  const mesh_shape shape = typename Sync::mesh().shape();
  const traffic_estimate ts = estimate_traffic<Sync>(shape, B, T), ta = estimate_traffic<Async>(shape, B, T);
  const unsigned tp = 1u << recipe_traits<Sync>::spec.tp;
  std::printf("| %s | %d | %.1f | %.1f | %.3f | %lld / %lld | %.3f / %.3f |\n", what, world, 1e3 * median(s),
              1e3 * median(a), median(a) / median(s), static_cast<long long>(ts.by_axes.at(tp).calls),
              static_cast<long long>(ta.by_axes.at(tp).calls), static_cast<double>(ts.by_axes.at(tp).sent) / (1 << 20),
              static_cast<double>(ta.by_axes.at(tp).sent) / (1 << 20));
}
}  // namespace

int main(int argc, char** argv) {
  const std::int64_t B = argc > 1 ? std::atoll(argv[1]) : 4, T = argc > 2 ? std::atoll(argv[2]) : 256;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 5, rounds = argc > 4 ? std::atoi(argv[4]) : 3;
  if (B < 2 || B % 2 != 0 || T < 2 || T % 2 != 0 || steps < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: bench_async_tp [global batch, even] [seq_len, even] [steps >= 1] [rounds >= 1]\n");
    return 2;
  }
  std::printf("global batch %lld x seq %lld, median step of %d rounds x %d steps (after a warm-up "
              "each), the two recipes alternating\n\n",
              static_cast<long long>(B), static_cast<long long>(T), rounds, steps);
  std::printf("| recipes | ranks | TP + SP step ms | async TP step ms | async / sync | tp calls (sync / async) | "
              "MiB sent point to point on tp (sync / async) |\n|---|---|---|---|---|---|---|\n");
  pair<recipes::debug_tp, debug_tp_async>("debug_tp / + async_tp", 2, B, T, steps, rounds);
  pair<recipes::debug_2d, recipes::debug_2d_async>("debug_2d / debug_2d_async", 4, B, T, steps, rounds);
}
