// dist_tensor::redistribute on the threads backend:
//  * overhead of a call whose plan is all local (no collective): the price of issuing a
//    redistribute, to compare with DTensor's ~90 us per dispatch (REFERENCE.md, section 1);
//  * a nested 2-D transition, [S0(a), S1(b)] -> [S0(b), S1(a)] on a 2 x 2 mesh and on a
//    2 x 4 mesh, over tensor sizes (bytes = the global tensor), next to the same bytes
//    moved by one all_to_all of the threads backend on as many ranks.
//   ./bench_comm_redistribute                        (TESSERA_BENCH_FULL=1: 4 KiB .. 256 MiB)
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <tessera/comm/threads.hpp>
#include <tessera/tensor/dist_tensor.hpp>
#include <thread>
#include <vector>

#include "bench_common.hpp"

namespace comm = tessera::comm;
using namespace tessera;

namespace {

using M = mesh<axis<"a", 2>, axis<"b", 2>>;
using Repl = replicated_t<M, 2>;
using Rows = layout_t<M, 2, dim<0, "a", "b">>;
using Part = layout_t<M, 2, partial_on<reduce::sum, "a", "b">>;
using AB = layout_t<M, 2, dim<0, "a">, dim<1, "b">>;
using BA = layout_t<M, 2, dim<0, "b">, dim<1, "a">>;
using M24 = mesh<axis<"a", 2>, axis<"b", 4>>;
using AB24 = layout_t<M24, 2, dim<0, "a">, dim<1, "b">>;
using BA24 = layout_t<M24, 2, dim<0, "b">, dim<1, "a">>;

static_assert(plan_t<Repl, Rows>::is_local && plan_t<Repl, Part>::is_local);

/// Rank 0 runs the measured loop; ranks 1..3 run the same fixed number of iterations.
template <class Body>
void on_ranks(benchmark::State& st, int n, Body body) {
  auto world = std::make_shared<comm::threads_world>(n);
  const long iters = st.max_iterations;
  std::vector<std::thread> helpers;
  for (int r = 1; r < n; ++r)
    helpers.emplace_back([&, r] {
      comm::threads_communicator c(world, r);
      body(c, [&](auto op) { for (long i = 0; i < iters; ++i) op(); });
    });
  comm::threads_communicator c(world, 0);
  body(c, [&](auto op) {
    for (auto _ : st) op();
  });
  for (auto& t : helpers) t.join();
}

template <class Src, class Dst>
void bm_local_plan(benchmark::State& st) {
  const std::int64_t side = st.range(0);
  // a local plan never communicates: rank 0 alone runs it (the others only build the mesh)
  auto world = std::make_shared<comm::threads_world>(4);
  comm::threads_communicator c(world, 0);
  device_mesh<M> dm(M{}, c);
  auto x = dist_tensor<float, Src>::distribute(dm, {side, side}, [](const index_t& i) { return float(i[0] + i[1]); });
  for (auto _ : st) {
    auto y = x.template redistribute<Dst>();
    benchmark::DoNotOptimize(y.local().data());
  }
  st.counters["local_elems"] = static_cast<double>(x.local().size());
}

template <class Mesh, class Src, class Dst>
void bm_nested(benchmark::State& st, std::size_t bytes) {
  const auto side = static_cast<std::int64_t>(std::sqrt(static_cast<double>(bytes / 4)));
  on_ranks(st, static_cast<int>(Mesh{}.world_size()), [&](comm::threads_communicator& c, auto loop) {
    device_mesh<Mesh> dm(Mesh{}, c);
    auto x = dist_tensor<float, Src>::distribute(dm, {side, side}, [](const index_t& i) { return float(i[0]); });
    (void)x.template redistribute<Dst>();  // warm up: creates the groups
    c.barrier().wait();
    loop([&] { benchmark::DoNotOptimize(x.template redistribute<Dst>().local().data()); });
  });
  const double moved = static_cast<double>(side * side * 4) * static_cast<double>(st.iterations()) / 1e9;
  st.counters["algbw_GBps"] = benchmark::Counter(moved, benchmark::Counter::kIsRate);
  st.counters["bytes"] = static_cast<double>(side * side * 4);
}

void bm_all_to_all(benchmark::State& st, std::size_t bytes, int n) {
  const auto side = static_cast<std::size_t>(std::sqrt(static_cast<double>(bytes / 4)));
  const auto un = static_cast<std::size_t>(n);
  const std::size_t local = side * side / un / un * un;  // each rank's part, a multiple of n
  on_ranks(st, n, [&](comm::threads_communicator& c, auto loop) {
    std::vector<float> in(local, 1.0f), out(local);
    c.barrier().wait();
    loop([&] { c.all_to_all(in.data(), out.data(), local / un, comm::dtype::f32).wait(); });
  });
  const double moved = static_cast<double>(side * side * 4) * static_cast<double>(st.iterations()) / 1e9;
  st.counters["algbw_GBps"] = benchmark::Counter(moved, benchmark::Counter::kIsRate);
  st.counters["bytes"] = static_cast<double>(side * side * 4);
}

}  // namespace

BENCHMARK(bm_local_plan<Repl, Rows>)->Name("redistribute/local_slice/R->S0(a,b)")->Arg(16)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_local_plan<Repl, Part>)->Name("redistribute/local_partial/R->P(a,b)")->Arg(16)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_local_plan<Rows, Rows>)->Name("redistribute/empty_plan/S0->S0")->Arg(16)->Arg(1024)->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  std::printf("plan of %s -> %s:\n%s", AB::str().c_str(), BA::str().c_str(), plan_t<AB, BA>::str().c_str());
  std::printf("plan of %s -> %s:\n%s", AB24::str().c_str(), BA24::str().c_str(), plan_t<AB24, BA24>::str().c_str());
  for (std::size_t b : bench::sizes()) {
    benchmark::RegisterBenchmark(("nested_2d/S0(a)S1(b)->S0(b)S1(a)/ranks:4/" + std::to_string(b)).c_str(),
                                 bm_nested<M, AB, BA>, b)
        ->Iterations(bench::iterations(b))->UseRealTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("threads/all_to_all_same_bytes/ranks:4/" + std::to_string(b)).c_str(), bm_all_to_all, b, 4)
        ->Iterations(bench::iterations(b))->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
  for (std::size_t b : bench::sizes()) {
    benchmark::RegisterBenchmark(("nested_2d_2x4/S0(a)S1(b)->S0(b)S1(a)/ranks:8/" + std::to_string(b)).c_str(),
                                 bm_nested<M24, AB24, BA24>, b)
        ->Iterations(bench::iterations(b))->UseRealTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("threads/all_to_all_same_bytes/ranks:8/" + std::to_string(b)).c_str(), bm_all_to_all, b, 8)
        ->Iterations(bench::iterations(b))->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
