// train_llama's shipped recipes on CPU ranks, in two halves (as cuda_recipe_half.hpp's on
// GPUs): run_cpu_recipe_half<H> runs recipe `name` when it is in half H (recipe_half in
// parallel_run.hpp: the pipelines and context parallel in half 1). train_llama.cpp compiles
// half 0 and train_llama_recipes.cpp half 1, side by side: each recipe's training loop is
// instantiated twice (thread ranks, MPI processes), most of train_llama's compile time.
#pragma once

#include <cstdint>
#include <string>

#include <tessera/train/recipes.hpp>
#ifdef TESSERA_HAS_MPI
#include <tessera/comm/mpi.hpp>
#endif

#include "parallel_run.hpp"

namespace train_llama_cli {

#ifdef TESSERA_HAS_MPI
using cpu_processes = tessera::comm::mpi_communicator;
#else
struct cpu_processes;  // a build without MPI: thread ranks only
#endif

/// Runs recipe `name` on the CPU kernels if it is in half H: one rank a process of `processes`
/// (mpirun's) when given, else `ranks` threads of this process. False when it is not in this half.
template <int H>
bool run_cpu_recipe_half(const std::string& name, [[maybe_unused]] cpu_processes* processes, std::int64_t ranks,
                         const run_inputs& in) {
  bool ran = false;
  tessera::recipes::detail::for_each_runnable([&]<class R>() {
    if constexpr (recipe_half<R>() == H) {
      if (ran || R::name != name) return;
#ifdef TESSERA_HAS_MPI
      if (processes) {
        run_rank<R>(*processes, *processes, bind_mesh<R>(processes->size(), true), in);
        ran = true;
        return;
      }
#endif
      run_threads<R>(ranks, in);
      ran = true;
    }
  });
  return ran;
}
#define TESSERA_CPU_RECIPE_HALF(H) \
  template bool run_cpu_recipe_half<H>(const std::string&, cpu_processes*, std::int64_t, const run_inputs&)
extern TESSERA_CPU_RECIPE_HALF(0);
extern TESSERA_CPU_RECIPE_HALF(1);

/// Runs the shipped recipe `name` on the CPU kernels (either half); false when there is none.
inline bool run_cpu_recipe(const std::string& name, cpu_processes* processes, std::int64_t ranks,
                           const run_inputs& in) {
  return run_cpu_recipe_half<0>(name, processes, ranks, in) || run_cpu_recipe_half<1>(name, processes, ranks, in);
}

}  // namespace train_llama_cli
