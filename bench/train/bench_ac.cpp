// Activation checkpointing per mode (issue 15): the measured peak of tessera's tracked host
// memory next to estimate_memory's, and the median step time next to no checkpointing, on
// one rank (FSDP over a mesh of 1, so the estimate's every item is in play) for the debug
// model and a larger config. docs/performance.md, "Activation checkpointing".
//
//   bench_ac [debug|large|both] [batch] [seq_len] [steps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/parallel/activation_checkpoint.hpp>
#include <tessera/tensor/memory.hpp>
#include <tessera/train/memory_estimator.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/trainer.hpp>

using namespace tessera;

namespace {
/// bench_checkpoint's larger model: ~6x the debug model's parameters, ~14x with the vocabulary.
struct large_model {
  static constexpr llama_config config{.name = "bench_large", .dim = 512, .n_layers = 8, .n_heads = 8,
                                       .n_kv_heads = 8, .vocab_size = 8192, .multiple_of = 256};
};
template <class Model, class... AC>
struct one_rank {
  static constexpr std::string_view name = "one_rank";
  using model = Model;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">, AC...>;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class R>
void bench(const char* model, const char* mode, std::int64_t B, std::int64_t T, int steps, double& base_s) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(B * T * (steps + 2) + 1));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<std::int32_t>((i * 7) % static_cast<std::size_t>(recipe_traits<R>::config.vocab_size));
  std::int64_t measured = 0, estimated = 0;
  std::vector<double> times;
  memory_tracker<host_space>::reset_peak();
  const std::int64_t before = memory_tracker<host_space>::current_bytes();
  comm::run_threads(1, [&](comm::threads_communicator& c) {
    device_mesh<typename R::mesh> dm(typename R::mesh(1), c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(0);
    train::batch_loader loader(tokens, B, T, 0);
    train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, steps + 1, 1, {}, 0);
    for (int s = 0; s <= steps; ++s) {
      const auto t0 = std::chrono::steady_clock::now();
      tr.train_step();
      if (s > 0) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    measured = memory_tracker<host_space>::peak_bytes() - before;
    estimated = estimate_memory<R>(dm.shape(), B, T, dm.coords()).tracked_peak();
  });
  const double t = median(times);
  if (base_s == 0) base_s = t;
  std::printf("| %s | %s | %.1f | %.1f | %.4f | %.1f | %.2fx |\n", model, mode, measured / 1048576.0,
              estimated / 1048576.0, static_cast<double>(estimated) / static_cast<double>(measured), 1e3 * t, t / base_s);
}

template <class M>
void bench_model(const char* name, std::int64_t B, std::int64_t T, int steps) {
  double base = 0;
  bench<one_rank<M>>(name, "none", B, T, steps, base);
  bench<one_rank<M, activation_checkpointing<ac::full>>>(name, "full", B, T, steps, base);
  bench<one_rank<M, activation_checkpointing<ac::selective_layer<2>>>>(name, "selective_layer 2", B, T, steps, base);
  bench<one_rank<M, activation_checkpointing<ac::selective_op<>>>>(name, "selective_op", B, T, steps, base);
}
}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "both";
  const std::int64_t B = argc > 2 ? std::atoll(argv[2]) : 4, T = argc > 3 ? std::atoll(argv[3]) : 256;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 5;
  if ((which != "debug" && which != "large" && which != "both") || B < 1 || T < 2 || steps < 1) {
    std::fprintf(stderr, "usage: bench_ac [debug|large|both] [batch >= 1] [seq_len >= 2] [steps >= 1]\n");
    return 2;
  }
  std::printf("one rank, batch %lld x seq %lld, median of %d steps after one warm-up\n\n", static_cast<long long>(B),
              static_cast<long long>(T), steps);
  std::printf("| model | mode | measured peak MiB | estimated MiB | estimated / measured | step ms | step / none |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  if (which != "large") bench_model<debugmodel>("debugmodel", B, T, steps);
  if (which != "debug") bench_model<large_model>("bench_large", B, T, steps);
}
