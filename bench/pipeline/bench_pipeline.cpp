// Run time of generating, verifying, lowering and simulating a large schedule:
// p = 64 ranks, 4 stages per rank, m = 256 microbatches (65,536 stage-microbatch pairs).
#include <benchmark/benchmark.h>

#include <tessera/pipeline/pipeline.hpp>

namespace tp = tessera::pipeline;

namespace {
constexpr int P = 64, V = 4, M = 256;

tp::schedule_kind kind_of(const benchmark::State& st) { return tp::all_schedule_kinds[st.range(0)]; }
int v_of(tp::schedule_kind k) {
  return k == tp::schedule_kind::zbv_zero_bubble || k == tp::schedule_kind::dualpipe_v ? 2 : V;
}

void BM_generate(benchmark::State& st) {
  const auto k = kind_of(st);
  for (auto _ : st) benchmark::DoNotOptimize(tp::generate(k, P, v_of(k), M));
  st.SetLabel(std::string(tp::schedule_name(k)));
}

void BM_generate_and_verify(benchmark::State& st) {
  const auto k = kind_of(st);
  for (auto _ : st) {
    const tp::schedule s = tp::generate(k, P, v_of(k), M);
    const bool ok = tp::verify(s).ok;
    if (!ok) st.SkipWithError("schedule did not verify");
    benchmark::DoNotOptimize(ok);
  }
  st.SetLabel(std::string(tp::schedule_name(k)));
}

void BM_verify(benchmark::State& st) {
  const auto k = kind_of(st);
  const tp::schedule s = tp::generate(k, P, v_of(k), M);
  for (auto _ : st) benchmark::DoNotOptimize(tp::verify(s).ok);
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * s.size()));
  st.SetLabel(std::string(tp::schedule_name(k)));
}

void BM_lower_and_verify(benchmark::State& st) {
  const auto k = kind_of(st);
  const tp::schedule s = tp::generate(k, P, v_of(k), M);
  for (auto _ : st) benchmark::DoNotOptimize(tp::verify(tp::lower(s)).ok);
  st.SetLabel(std::string(tp::schedule_name(k)));
}

void BM_simulate(benchmark::State& st) {
  const auto k = kind_of(st);
  const tp::schedule s = tp::generate(k, P, v_of(k), M);
  for (auto _ : st) benchmark::DoNotOptimize(tp::simulate(s).makespan);
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * s.size()));
  st.SetLabel(std::string(tp::schedule_name(k)));
}
}  // namespace

BENCHMARK(BM_generate)->DenseRange(0, 6)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_generate_and_verify)->DenseRange(0, 6)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_verify)->DenseRange(0, 6)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lower_and_verify)->DenseRange(0, 6)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_simulate)->DenseRange(0, 6)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
