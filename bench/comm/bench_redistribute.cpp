// dist_tensor::redistribute, as users time it (tessera/bench/transition.hpp):
//  * overhead of a call whose plan is all local (no collective): the price of issuing a
//    redistribute, to compare with DTensor's ~90 us per dispatch (REFERENCE.md, section 1);
//  * the five transitions of issue 21's DTensor table on 4 ranks (f32; bytes = the global
//    tensor): the nested 2-D swap [S(0),S(1)] -> [S(1),S(0)] on a 2 x 2 mesh, and on a
//    1-D mesh of 4: S(0) -> R (all_gather), P -> R (all_reduce), P -> S(0)
//    (reduce_scatter), S(0) -> S(1) (all_to_all), each into a reused result
//    (redistribute(out)) and, for P -> R, into a fresh one (redistribute<L>(), buffers from
//    tessera::result_pool);
//  * the nested swap on a 2 x 4 mesh next to one all_to_all of the same bytes on 8 ranks.
//   ./bench_comm_redistribute                       (TESSERA_BENCH_FULL=1: 4 KiB .. 256 MiB)
//   mpirun -np 4 ./bench_comm_redistribute --benchmark_filter='/mpi:4'   (the 4-rank ones on MPI)
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <tessera/bench/transition.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/tensor/dist_tensor.hpp>

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
using M4 = mesh<axis<"x", 4>>;
using S0 = layout_t<M4, 2, shard<0>>;
using S1 = layout_t<M4, 2, shard<1>>;
using R4 = layout_t<M4, 2, replicate>;
using P4 = layout_t<M4, 2, partial<>>;
using M8 = mesh<axis<"x", 8>>;
using S0_8 = layout_t<M8, 2, shard<0>>;
using S1_8 = layout_t<M8, 2, shard<1>>;

static_assert(plan_t<Repl, Rows>::is_local && plan_t<Repl, Part>::is_local);

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

/// A square f32 tensor of about `bytes` bytes whose side is a multiple of `ranks`.
shape_t square(std::size_t bytes, std::int64_t ranks) {
  auto side = static_cast<std::int64_t>(std::sqrt(static_cast<double>(bytes / 4)));
  side = std::max(ranks, side / ranks * ranks);
  return {side, side};
}

tessera::bench::transition_options fixed(std::size_t bytes, bool fresh = false) {
  tessera::bench::transition_options o;
  o.iterations = ::bench::iterations(bytes);  // the same count on every rank and run
  o.fresh_result = fresh;
  return o;
}

}  // namespace

BENCHMARK(bm_local_plan<Repl, Rows>)->Name("redistribute/local_slice/R->S0(a,b)")->Arg(16)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_local_plan<Repl, Part>)->Name("redistribute/local_partial/R->P(a,b)")->Arg(16)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_local_plan<Rows, Rows>)->Name("redistribute/empty_plan/S0->S0")->Arg(16)->Arg(1024)->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  if (!tessera::bench::detail::under_mpirun()) {
    std::printf("plan of %s -> %s:\n%s", AB::str().c_str(), BA::str().c_str(), plan_t<AB, BA>::str().c_str());
    std::printf("plan of %s -> %s:\n%s", AB24::str().c_str(), BA24::str().c_str(), plan_t<AB24, BA24>::str().c_str());
  }
  for (std::size_t b : ::bench::sizes()) {
    const std::string s = "/" + std::to_string(b);
    const shape_t g = square(b, 4);
    tessera::bench::transition<AB, BA>("nested_2d/S0(a)S1(b)->S0(b)S1(a)" + s, g, fixed(b));
    tessera::bench::transition<S0, R4>("all_gather/S(0)->R" + s, g, fixed(b));
    tessera::bench::transition<P4, R4>("all_reduce/P->R" + s, g, fixed(b));
    tessera::bench::transition<P4, R4>("all_reduce_fresh_result/P->R" + s, g, fixed(b, true));
    tessera::bench::transition<P4, S0>("reduce_scatter/P->S(0)" + s, g, fixed(b));
    tessera::bench::transition<S0, S1>("all_to_all/S(0)->S(1)" + s, g, fixed(b));
  }
  if (!tessera::bench::detail::under_mpirun())
    for (std::size_t b : ::bench::sizes()) {
      const std::string s = "/" + std::to_string(b);
      tessera::bench::transition<AB24, BA24>("nested_2d_2x4/S0(a)S1(b)->S0(b)S1(a)" + s, square(b, 8), fixed(b));
      tessera::bench::transition<S0_8, S1_8>("all_to_all_same_bytes/S(0)->S(1)" + s, square(b, 8), fixed(b));
    }
  return tessera::bench::main(argc, argv);
}
