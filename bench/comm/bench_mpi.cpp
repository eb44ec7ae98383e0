// OpenMPI's own collectives (MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce,
// MPI_Alltoall) at the sizes of bench_comm_threads, with the same counters. Run under
// mpirun; rank 0 reports. The rank count is mpirun's -np.
//   mpirun -np 2 --oversubscribe ./bench_comm_mpi
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

int g_ranks = 1;

void call(bench::coll c, const float* in, float* out, std::size_t count) {
  const int n = static_cast<int>(count);
  switch (c) {
    case bench::coll::all_gather: MPI_Allgather(in, n, MPI_FLOAT, out, n, MPI_FLOAT, MPI_COMM_WORLD); break;
    case bench::coll::reduce_scatter: MPI_Reduce_scatter_block(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case bench::coll::all_reduce: MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case bench::coll::all_to_all: MPI_Alltoall(in, n, MPI_FLOAT, out, n, MPI_FLOAT, MPI_COMM_WORLD); break;
  }
}

void bm_mpi(benchmark::State& st, bench::coll c, std::size_t bytes) {
  const int n = g_ranks;
  const auto sh = bench::shape_of(c, bytes, n);
  std::vector<float> in(sh.send, 1.0f), out(sh.recv, 0.0f);
  call(c, in.data(), out.data(), sh.count);  // warm up
  MPI_Barrier(MPI_COMM_WORLD);
  for (auto _ : st) call(c, in.data(), out.data(), sh.count);
  const double moved = static_cast<double>(bytes) * static_cast<double>(st.iterations()) / 1e9;
  st.counters["algbw_GBps"] = benchmark::Counter(moved, benchmark::Counter::kIsRate);
  st.counters["busbw_GBps"] = benchmark::Counter(moved * bench::bus_factor(c, n), benchmark::Counter::kIsRate);
  st.counters["bytes"] = static_cast<double>(bytes);
  st.counters["ranks"] = n;
}

class quiet : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
  for (std::size_t b : bench::sizes())
    for (auto c : {bench::coll::all_gather, bench::coll::reduce_scatter, bench::coll::all_reduce,
                   bench::coll::all_to_all})
      benchmark::RegisterBenchmark(
          ("openmpi/" + std::string(bench::name(c)) + "/ranks:" + std::to_string(g_ranks) + "/" + std::to_string(b)).c_str(),
          bm_mpi, c, b)
          ->Iterations(bench::iterations(b))->UseRealTime()->Unit(benchmark::kMicrosecond);
  if (rank != 0) {  // only rank 0 writes --benchmark_out; the others report nothing
    int kept = 1;
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]).rfind("--benchmark_out", 0) != 0) argv[kept++] = argv[i];
    argc = kept;
  }
  benchmark::Initialize(&argc, argv);
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    quiet q;
    benchmark::RunSpecifiedBenchmarks(&q);
  }
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
