// Bytes each rank moves per training step, measured by a flight recorder on every rank,
// against the plans' cost model (tessera::estimate_traffic), for every shipped recipe on the
// threads backend; with the time the step spent inside collectives. Prints a markdown table
// (docs/performance.md, "Recipes"). Usage:
//   bench_traffic [steps=3] [global batch=8] [seq len=128]
// The last step is measured (the first ones fault in buffers).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <tessera/comm/flight_recorder.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/trainer.hpp>
#include <tessera/train/traffic_estimator.hpp>

using namespace tessera;

namespace {

struct rank_row {
  std::int64_t measured = 0, estimated = 0, calls = 0, est_calls = 0;
  bool same = false;
  double comm_ms = 0, step_ms = 0, model_us = 0;
  traffic_estimate est;
};

std::vector<std::int32_t> token_stream() {
  std::vector<std::int32_t> t;
  for (int i = 0; i < 200000; ++i) t.push_back(static_cast<std::int32_t>((i * 7 + i / 13) % 2048));
  return t;
}

template <class R>
void run(int ranks, std::int64_t steps, std::int64_t batch, std::int64_t seq, const std::vector<std::int32_t>& toks) {
  const typename R::mesh mesh(ranks);
  std::vector<rank_row> rows(static_cast<std::size_t>(ranks));
  comm::run_threads(ranks, [&](comm::threads_communicator& c) {
    comm::flight_recorder rec(c, {.capacity = 1 << 16, .dump_on_error = false});
    device_mesh<typename R::mesh> dm(mesh, rec);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(1);
    train::batch_loader loader(toks, batch, seq, 3);
    train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, steps, 1, {}, /*peak_flops: no MFU*/ 0);
    for (std::int64_t s = 0; s + 1 < steps; ++s) tr.train_step();
    const std::uint64_t since = rec.recorded();
    const auto t0 = std::chrono::steady_clock::now();
    tr.train_step();
    const double step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const auto entries = rec.entries();
    rank_row& r = rows[static_cast<std::size_t>(c.rank())];
    const traffic_by_axes got = measured_traffic(entries, dm.shape(), since);
    r.est = estimate_traffic<R>(dm.shape(), batch, seq, 1, dm.coords());
    r.measured = got.bytes(), r.calls = got.calls();
    r.estimated = r.est.total(), r.est_calls = r.est.by_axes.calls();
    r.same = got.same_as(r.est.by_axes);
    for (const auto& e : entries)
      if (e.id >= since && e.start_us >= 0 && e.end_us >= 0) r.comm_ms += static_cast<double>(e.end_us - e.start_us) / 1e3;
    r.step_ms = step_ms;
    r.model_us = r.est.time_us;
  });
  const rank_row& r0 = rows.front();
  std::int64_t lo = r0.measured, hi = r0.measured;
  double comm = 0, step = 0;
  bool same = true;
  for (const rank_row& r : rows) {
    lo = std::min(lo, r.measured), hi = std::max(hi, r.measured);
    comm += r.comm_ms / ranks, step += r.step_ms / ranks;
    same = same && r.same;
  }
  auto mib = [](std::int64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::printf("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f .. %.3f | %lld / %lld | %s | %.0f | %.0f | %.0f |\n",
              std::string(R::name).c_str(), ranks, mib(r0.est.parameters), mib(r0.est.gradients),
              mib(r0.est.activations), mib(r0.est.total()), mib(lo), mib(hi), static_cast<long long>(r0.calls),
              static_cast<long long>(r0.est_calls), same ? "yes" : "NO", comm, step, r0.model_us);
}

}  // namespace

int main(int argc, char** argv) {
  cpu::use_native_blas_core(argv);
  const std::int64_t steps = argc > 1 ? std::atoll(argv[1]) : 3, batch = argc > 2 ? std::atoll(argv[2]) : 8,
                     seq = argc > 3 ? std::atoll(argv[3]) : 128;
  if (steps < 2 || batch < 1 || seq < 1) {
    std::fprintf(stderr, "usage: bench_traffic [steps >= 2] [global batch >= 1] [seq len >= 1]\n");
    return 2;
  }
  const auto toks = token_stream();
  std::printf("debugmodel, global batch %lld x seq %lld, threads backend; step %lld measured on every rank\n\n",
              static_cast<long long>(batch), static_cast<long long>(seq), static_cast<long long>(steps));
  std::printf("| recipe | ranks | model: params MiB | grads MiB | activations MiB | total MiB | measured MiB (min .. max "
              "over ranks) | calls measured / model | equal on every rank | ms waiting on collectives | step ms | model us |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  run<recipes::debug_fsdp>(2, steps, batch, seq, toks);
  run<recipes::debug_fsdp>(3, steps, batch, seq, toks);
  run<recipes::debug_hsdp>(4, steps, batch, seq, toks);
  run<recipes::debug_tp>(2, steps, batch, seq, toks);
  run<recipes::debug_2d>(4, steps, batch, seq, toks);
  // FP8 all-gather against bf16 gathers (issue 15), and rowwise Float8
  run<recipes::debug_fsdp_bf16>(2, steps, batch, seq, toks);
  run<recipes::debug_fsdp_float8_tw>(2, steps, batch, seq, toks);
  run<recipes::debug_fsdp_float8>(2, steps, batch, seq, toks);
  return 0;
}
