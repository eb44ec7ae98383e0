// A user's benchmark file: the transitions of an FSDP + TP model's weight, one line each.
//
//   cmake --build build --target my_transitions
//   build/examples/plan/my_transitions                                  (4 in-process ranks)
//   mpirun -np 4 build/examples/plan/my_transitions                     (4 MPI processes)
//   build/examples/plan/my_transitions --benchmark_repetitions=5 --benchmark_format=json
#include <tessera/bench/transition.hpp>

using namespace tessera;

using Mesh = mesh<axis<"dp", 2>, axis<"tp", 2>>;
using FSDP = layout_t<Mesh, 2, dim<0, "dp", "tp">>;                           // the weight as FSDP stores it
using TP = layout_t<Mesh, 2, dim<1, "tp">>;                                   // as a column-parallel linear uses it
using Grad = layout_t<Mesh, 2, dim<1, "tp">, partial_on<reduce::sum, "dp">>;  // its gradient

int main(int argc, char** argv) {
  bench::transition<FSDP, TP, float>("fsdp->tp", {1024, 1024});
  bench::transition<Grad, FSDP, float>("grad->fsdp", {1024, 1024});
  bench::transition<FSDP, TP, bf16>("fsdp->tp/bf16", {1024, 1024}, {.iterations = 50});
  return bench::main(argc, argv);
}
