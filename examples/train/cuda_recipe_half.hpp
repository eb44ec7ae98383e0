// The shipped recipes on GPUs, in two halves: run_recipe_half<H> runs recipe `name` with
// cuda_kernels when it is in half H (train_llama_cuda.cu instantiates half 0,
// train_llama_cuda_recipes.cu half 1 -- the recipes with a pipeline or context parallel --, so nvcc
// compiles the two side by side). Included by those .cu files only.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#ifdef TESSERA_HAS_NCCL
#include <tessera/comm/nccl.hpp>
#endif
#include <tessera/comm/threads.hpp>
#include <tessera/kernels/cuda/backend.cuh>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/train/recipes.hpp>

#include "cuda_run.hpp"
#include "parallel_run.hpp"

namespace train_llama_cli {

/// Half 1: the recipes with a pipeline or context parallel (the heaviest to compile).
template <class R>
constexpr int recipe_half() {
  constexpr tessera::parallel_spec ps = tessera::recipe_traits<R>::spec;
  return ps.pp >= 0 || ps.cp >= 0 ? 1 : 0;
}

#ifdef TESSERA_HAS_NCCL
/// Runs recipe `name` if it is in half H (one GPU per rank, over NCCL bootstrapped through
/// `mpi`, or `ranks` threads on GPUs 0..ranks-1); false when it is not in this half.
template <int H>
bool run_recipe_half(const std::string& name, tessera::comm::any_communicator* mpi, std::int64_t ranks,
                     const run_inputs& in) {
  using namespace tessera;
  bool ran = false;
  recipes::detail::for_each_runnable([&]<class R>() {
    if constexpr (recipe_half<R>() == H) {
      if (ran || R::name != name) return;
      if (mpi) {
        const auto mesh = bind_mesh<R>(mpi->size(), true);
        auto nc = comm::nccl_communicator::bootstrap(*mpi, local_device(mpi->rank()));
        run_rank<R, cuda_kernels>(nc, *mpi, mesh, in);
      } else {
        const auto mesh = bind_mesh<R>(ranks);
        const int devices = cuda_device_count();
        if (ranks > devices)
          throw error("--device cuda --ranks " + std::to_string(ranks) + ": one GPU per rank, and " +
                      std::to_string(devices) + " GPU(s) are visible; lower --ranks or run under mpirun on more GPUs");
        run_inputs mine = in;
        mine.local_ranks = static_cast<int>(ranks);
        comm::run_threads(static_cast<int>(ranks), [&](comm::threads_communicator& c) {
          auto nc = comm::nccl_communicator::bootstrap(c);  // rank r on GPU r
          run_rank<R, cuda_kernels>(nc, c, mesh, mine);
        });
      }
      ran = true;
    }
  });
  return ran;
}
extern template bool run_recipe_half<0>(const std::string&, tessera::comm::any_communicator*, std::int64_t,
                                        const run_inputs&);
extern template bool run_recipe_half<1>(const std::string&, tessera::comm::any_communicator*, std::int64_t,
                                        const run_inputs&);
#endif

}  // namespace train_llama_cli
