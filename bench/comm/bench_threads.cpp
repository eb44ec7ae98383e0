// Collectives of tessera's threads backend next to raw memcpy, over message sizes and
// rank counts; algbw and busbw (nccl-tests definitions) as counters, in GB/s.
//   ./bench_comm_threads                       # short default run
//   TESSERA_BENCH_FULL=1 ./bench_comm_threads  # 4 KiB .. 256 MiB on 2, 4, 8 ranks
// bench/comm/compare.py runs this and bench_comm_mpi (OpenMPI) and prints the table.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <tessera/comm/threads.hpp>
#include <thread>
#include <vector>

#include "bench_common.hpp"

namespace comm = tessera::comm;

namespace {

comm::threads_request issue(bench::coll c, comm::threads_communicator& k, const float* in, float* out,
                            std::size_t count) {
  switch (c) {
    case bench::coll::all_gather: return k.all_gather(in, out, count, comm::dtype::f32);
    case bench::coll::reduce_scatter: return k.reduce_scatter(in, out, count, comm::dtype::f32, comm::reduce_op::sum);
    case bench::coll::all_reduce: return k.all_reduce(in, out, count, comm::dtype::f32, comm::reduce_op::sum);
    case bench::coll::all_to_all: return k.all_to_all(in, out, count, comm::dtype::f32);
  }
  return {};
}

void set_counters(benchmark::State& st, bench::coll c, std::size_t bytes, int n) {
  const double moved = static_cast<double>(bytes) * static_cast<double>(st.iterations()) / 1e9;
  st.counters["algbw_GBps"] = benchmark::Counter(moved, benchmark::Counter::kIsRate);
  st.counters["busbw_GBps"] = benchmark::Counter(moved * bench::bus_factor(c, n), benchmark::Counter::kIsRate);
  st.counters["bytes"] = static_cast<double>(bytes);
  st.counters["ranks"] = n;
}

/// Rank 0 is the benchmark's thread; ranks 1..n-1 run the same fixed number of calls.
void bm_collective(benchmark::State& st, bench::coll c, int n, std::size_t bytes) {
  const auto sh = bench::shape_of(c, bytes, n);
  const long iters = st.max_iterations;
  auto world = std::make_shared<comm::threads_world>(n);
  std::vector<std::vector<float>> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    in[static_cast<std::size_t>(r)].assign(sh.send, 1.0f);
    out[static_cast<std::size_t>(r)].assign(sh.recv, 0.0f);
  }
  auto body = [&](int r, auto&& loop) {
    comm::threads_communicator k(world, r);
    const auto i = static_cast<std::size_t>(r);
    issue(c, k, in[i].data(), out[i].data(), sh.count).wait();  // warm up
    k.barrier().wait();
    loop([&] { issue(c, k, in[i].data(), out[i].data(), sh.count).wait(); });
  };
  std::vector<std::thread> helpers;
  for (int r = 1; r < n; ++r)
    helpers.emplace_back([&, r] { body(r, [&](auto op) { for (long it = 0; it < iters; ++it) op(); }); });
  body(0, [&](auto op) {
    for (auto _ : st) op();
  });
  for (auto& t : helpers) t.join();
  set_counters(st, c, bytes, n);
}

void bm_memcpy(benchmark::State& st, std::size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  for (auto _ : st) {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  const double moved = static_cast<double>(bytes) * static_cast<double>(st.iterations()) / 1e9;
  st.counters["algbw_GBps"] = benchmark::Counter(moved, benchmark::Counter::kIsRate);
  st.counters["busbw_GBps"] = benchmark::Counter(moved, benchmark::Counter::kIsRate);
  st.counters["bytes"] = static_cast<double>(bytes);
}

}  // namespace

int main(int argc, char** argv) {
  for (std::size_t b : bench::sizes()) {
    benchmark::RegisterBenchmark(("memcpy/" + std::to_string(b)).c_str(), bm_memcpy, b)
        ->Iterations(bench::iterations(b))->UseRealTime()->Unit(benchmark::kMicrosecond);
    for (int n : bench::rank_counts())
      for (auto c : {bench::coll::all_gather, bench::coll::reduce_scatter, bench::coll::all_reduce,
                     bench::coll::all_to_all})
        benchmark::RegisterBenchmark(
            ("threads/" + std::string(bench::name(c)) + "/ranks:" + std::to_string(n) + "/" + std::to_string(b)).c_str(),
            bm_collective, c, n, b)
            ->Iterations(bench::iterations(b))->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
