// Tokens per second of one training step of TorchTitan's debugmodel (forward, backward,
// clip_grad_norm 1.0, AdamW) and the fraction of the machine's measured sgemm FLOP/s it
// reaches (FLOPs per token as TorchTitan counts them). Threads: TESSERA_NUM_THREADS.
//   bench_train_step [--batch=8] [--seq-len=256] plus Google Benchmark flags
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/model/llama.hpp>
#include <tessera/train/sgemm_peak.hpp>
#include <tessera/train/trainer.hpp>

namespace {
std::int64_t g_batch = 8, g_seq = 256;

void BM_sgemm_1024(benchmark::State& st) {
  const std::int64_t n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  for (auto _ : st) {
    tessera::cpu::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["threads"] = tessera::cpu::num_threads();
}

void BM_train_step_debugmodel(benchmark::State& st) {
  using namespace tessera;
  const std::int64_t B = g_batch, T = g_seq;
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(64 * B * T + 1));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::int32_t((i * 2654435761u) % 2048);
  llama<debugmodel> m;
  m.init_weights(0);
  train::batch_loader dl(tokens, B, T, 0);
  train::optimizer_options opt;
  const std::int64_t steps = 1 << 20;
  train::trainer t(m, dl, steps, 1, opt, /*peak_flops: measured per step below*/ 0);
  t.train_step();  // warm-up: allocates the activations
  // The machine is shared, so its load changes from second to second: the sgemm rate each
  // step is compared with is measured right after that step (best of 3, outside the timing).
  std::vector<double> frac;
  const double fpt = flops_per_token(m.config(), T);
  double last_peak = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    t.train_step();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.PauseTiming();
    last_peak = train::measure_sgemm_flops(1024, 3);
    frac.push_back(double(B * T) * fpt / secs / last_peak);
    st.ResumeTiming();
  }
  std::sort(frac.begin(), frac.end());
  st.counters["tokens/s"] = benchmark::Counter(double(B * T), benchmark::Counter::kIsIterationInvariantRate);
  st.counters["model_GFLOP/s"] =
      benchmark::Counter(double(B * T) * fpt * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["sgemm_peak_GFLOP/s"] = last_peak * 1e-9;
  st.counters["frac_of_sgemm_peak"] = frac.empty() ? 0.0 : frac[frac.size() / 2];
  st.counters["threads"] = cpu::num_threads();
  st.SetLabel("debugmodel B=" + std::to_string(B) + " T=" + std::to_string(T) + " blas " + cpu::blas_core());
}
}  // namespace

BENCHMARK(BM_sgemm_1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_train_step_debugmodel)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(5.0);

int main(int argc, char** argv) {
  tessera::cpu::use_native_blas_core(argv);  // OpenBLAS's own kernels for this CPU
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--batch=", 8) == 0) g_batch = std::stoll(argv[i] + 8);
    else if (std::strncmp(argv[i], "--seq-len=", 10) == 0) g_seq = std::stoll(argv[i] + 10);
    else rest.push_back(argv[i]);
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
