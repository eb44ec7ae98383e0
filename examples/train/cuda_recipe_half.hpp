// The shipped recipes on GPUs, in two halves: run_recipe_half<H, K> runs recipe `name` on kernel
// backend K (cuda_kernels, or cuda_bf16_kernels for bf16 operands) when it is in half H
// (train_llama_cuda.cu instantiates half 0 with cuda_kernels, train_llama_cuda_recipes.cu half 1
// -- the recipes with a pipeline or context parallel --, train_llama_cuda_bf16.cu and
// train_llama_cuda_bf16_recipes.cu the same with cuda_bf16_kernels, so nvcc compiles the four
// side by side; recipe_half in parallel_run.hpp). Included by those .cu files only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#ifdef TESSERA_HAS_NCCL
#include <tessera/comm/cuda_staged.hpp>
#include <tessera/comm/nccl.hpp>
#endif
#include <tessera/comm/threads.hpp>
#include <tessera/kernels/cuda/backend.cuh>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/train/recipes.hpp>

#include "cuda_run.hpp"
#include "parallel_run.hpp"

namespace train_llama_cli {

#ifdef TESSERA_HAS_NCCL
/// Says (once) that the ranks share GPUs: `who`, then what that means.
inline void say_shared(const std::string& who) {
  std::printf("%s: they share them, every collective staged through host memory (comm::cuda_staged) -- for "
              "checking a recipe, not for its speed\n",
              who.c_str());
}

/// Runs recipe `name` on backend K if it is in half H (one GPU per rank, over NCCL bootstrapped
/// through `mpi`, or `ranks` threads on GPUs 0..ranks-1 -- with fewer GPUs than ranks, rank r on
/// GPU r modulo them, over comm::cuda_staged; the same under mpirun where a node has more
/// processes than GPUs); false when it is not in this half. The device
/// communicator is type-erased, so each recipe's rank is compiled once for both.
template <int H, class K>
bool run_recipe_half(const std::string& name, tessera::comm::any_communicator* mpi, std::int64_t ranks,
                     const run_inputs& in) {
  using namespace tessera;
  bool ran = false;
  recipes::detail::for_each_runnable([&]<class R>() {
    if constexpr (recipe_half<R>() == H) {
      if (ran || R::name != name) return;
      if (mpi) {
        const auto mesh = bind_mesh<R>(mpi->size(), true);
        const process_gpu g = gpu_of_process(*mpi, cuda_device_count());
        // one backend for the job's collectives: staged if some GPU has more than one process
        const int mine = g.shares ? 1 : 0;
        int shared = 0;
        mpi->all_reduce(&mine, &shared, 1, comm::dtype::i32, comm::reduce_op::max).wait();
        if (shared && mpi->rank() == 0)
          say_shared(std::to_string(mpi->size()) + " processes, up to " + std::to_string(g.most) +
                     " on one GPU (" + std::to_string(g.node_ranks) + " on this node's " +
                     std::to_string(cuda_device_count()) + " visible)");
        comm::any_communicator dc =
            shared ? comm::any_communicator(comm::cuda_staged<comm::any_communicator>(*mpi, g.device))
                   : comm::any_communicator(comm::nccl_communicator::bootstrap(*mpi, g.device));
        run_rank<R, K>(dc, *mpi, mesh, in);
      } else {
        const auto mesh = bind_mesh<R>(ranks);
        const int devices = cuda_device_count();
        const bool shared = ranks > devices;  // NCCL takes one GPU per rank
        if (shared) say_shared(std::to_string(ranks) + " ranks on " + std::to_string(devices) + " GPU(s)");
        run_inputs mine = in;
        mine.local_ranks = static_cast<int>(ranks);
        comm::run_threads(static_cast<int>(ranks), [&](comm::threads_communicator& c) {
          comm::any_communicator dc = shared ? comm::any_communicator(comm::cuda_staged<comm::threads_communicator>(c))
                                             : comm::any_communicator(comm::nccl_communicator::bootstrap(c));
          run_rank<R, K>(dc, c, mesh, mine);  // rank r on GPU r (modulo the GPUs when shared)
        });
      }
      ran = true;
    }
  });
  return ran;
}
#define TESSERA_RECIPE_HALF(H, K) \
  template bool run_recipe_half<H, K>(const std::string&, tessera::comm::any_communicator*, std::int64_t, \
                                      const run_inputs&)
extern TESSERA_RECIPE_HALF(0, tessera::cuda_kernels);
extern TESSERA_RECIPE_HALF(1, tessera::cuda_kernels);
extern TESSERA_RECIPE_HALF(0, tessera::cuda_bf16_kernels);
extern TESSERA_RECIPE_HALF(1, tessera::cuda_bf16_kernels);
#endif

}  // namespace train_llama_cli
