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

#include "transition_table.hpp"

namespace comm = tessera::comm;
using namespace tessera;

namespace {

using M = ::bench::table::M;
using Repl = replicated_t<M, 2>;
using Rows = layout_t<M, 2, dim<0, "a", "b">>;
using Part = layout_t<M, 2, partial_on<reduce::sum, "a", "b">>;

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

}  // namespace

BENCHMARK(bm_local_plan<Repl, Rows>)->Name("redistribute/local_slice/R->S0(a,b)")->Arg(16)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_local_plan<Repl, Part>)->Name("redistribute/local_partial/R->P(a,b)")->Arg(16)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_local_plan<Rows, Rows>)->Name("redistribute/empty_plan/S0->S0")->Arg(16)->Arg(1024)->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  if (!tessera::bench::detail::under_mpirun()) {
    using namespace ::bench::table;
    std::printf("plan of %s -> %s:\n%s", AB::str().c_str(), BA::str().c_str(), plan_t<AB, BA>::str().c_str());
    std::printf("plan of %s -> %s:\n%s", AB24::str().c_str(), BA24::str().c_str(), plan_t<AB24, BA24>::str().c_str());
  }
  ::bench::table::register_all(
      []<class From, class To>(const std::string& name, const shape_t& g, const tessera::bench::transition_options& o) {
        tessera::bench::transition<From, To>(name, g, o);
      },
      !tessera::bench::detail::under_mpirun());
  return tessera::bench::main(argc, argv);
}
