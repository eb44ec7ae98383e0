// train_llama on GPUs (--device cuda, TOML job.device = "cuda"): one rank on one GPU
// (run_on_cuda) or a recipe's ranks on one GPU each (run_recipe_on_cuda), defined in
// train_llama_cuda.cu -- compiled by nvcc and linked into train_llama when the CUDA toolkit
// is found (TESSERA_HAS_CUDA_TRAINER). docs/cuda.md.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <tessera/comm/any_communicator.hpp>
#include <tessera/comm/launcher.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/train/checkpoint.hpp>
#include <tessera/train/trainer.hpp>

namespace train_llama_cli {

struct cuda_inputs {
  const tessera::llama_config* cfg = nullptr;
  std::span<const std::int32_t> tokens;  // a mapped token file, or the ids of a tokenized corpus
  std::int64_t steps = 0, batch = 0, seq_len = 0, accum = 1;
  std::uint64_t seed = 0;
  bool shuffle = true;
  tessera::train::optimizer_options opt;
  std::string init_from, save_weights, save_dtype, metrics, trace_file;
  bool bf16 = false;  // training.compute_dtype = bf16: cuda_bf16_kernels
  tessera::train::checkpoint_options checkpoint;  // --checkpoint.* (step_loop.hpp)
};

/// Why --device cuda cannot run here ("" when a CUDA device is visible).
std::string cuda_unavailable();

/// A GPU's free memory (cudaMemGetInfo) and its name for messages ("GPU 1 (NVIDIA H200)");
/// free_bytes 0 when `device` is not visible.
struct gpu_memory {
  std::int64_t free_bytes = 0;
  std::string name;
};
gpu_memory cuda_memory_of(int device);

/// The CUDA devices this process sees (0: none, or no driver).
int visible_gpus();

/// Bytes of cuDNN's workspace for the causal attention of a rank of dims d, asked of cuDNN on
/// `device` (cuda_bf16_kernels' cudnn_attention_workspace: builds the rank's graphs there, as its
/// first step would): for the memory check where cuDNN's attention runs.
std::int64_t cudnn_workspace_on(int device, const tessera::llama_dims& d);

/// This process's GPU under mpirun or srun: its node-local rank (comm::node_local_rank: Open
/// MPI's, torchrun's LOCAL_RANK, MPICH's, Slurm's SLURM_LOCALID), else its world rank.
inline int local_device(int world_rank) { return tessera::comm::node_local_rank(world_rank); }

/// GPU `device`'s UUID (cudaDeviceProp::uuid), all zero when it cannot be read.
tessera::comm::device_uuid uuid_of_gpu(int device);

/// This process's GPU under mpirun: its node-local rank modulo the visible GPUs, and how many
/// of the job's processes drive it. NCCL takes one GPU a process; where some GPU has more, the
/// job's processes share them over comm::cuda_staged (every process of the job, since the job's
/// collectives are one backend's: cuda_recipe_half.hpp agrees on it over MPI).
struct process_gpu {
  int device = 0;
  int node_ranks = 1;   ///< this node's processes (train::ranks_on_this_host)
  int ranks_here = 1;   ///< of the job's processes, those on `device` (this one included)
  int most = 1;         ///< the most processes on one GPU of the job
  bool shares = false;  ///< some GPU has more than one process
};

/// The sharing from every process's GPU UUID (comm::device_sharing_over: one all_gather over
/// `world`, collective), so that processes that each see one GPU of their own -- srun
/// --gpus-per-task=1, or CUDA_VISIBLE_DEVICES set a process -- do not count as sharing it;
/// where some process cannot read its GPU's UUID, the node's processes over its `gpus` (the
/// processes on GPU r: the node-local ranks r, r + gpus, ...).
template <class C>
process_gpu gpu_of_process(C& world, int gpus) {
  const int n = gpus > 0 ? gpus : 1;
  process_gpu p;
  p.node_ranks = static_cast<int>(tessera::train::ranks_on_this_host("mpi", world.size()));
  p.device = local_device(world.rank()) % n;
  const tessera::comm::device_uuid mine = gpus > 0 ? uuid_of_gpu(p.device) : tessera::comm::device_uuid{};
  const auto s = tessera::comm::device_sharing_over(world, mine);
  if (s.known) {
    p.ranks_here = s.on_mine;
    p.most = s.most;
    p.shares = s.most > 1;
  } else {
    p.shares = p.node_ranks > n;
    p.ranks_here = p.device < p.node_ranks ? (p.node_ranks - p.device + n - 1) / n : 1;
    p.most = (p.node_ranks + n - 1) / n;
  }
  return p;
}

/// Trains cfg on CUDA device 0 (device_llama<cuda_kernels>, or <cuda_bf16_kernels> with
/// in.bf16, under train::basic_trainer):
/// progress lines on stdout as the CPU run prints them; 0 on success. Throws tessera::error
/// when there is no device (train_llama.cpp checks that the step fits the GPU first).
int run_on_cuda(const cuda_inputs& in);

struct run_inputs;  // parallel_run.hpp

/// Trains shipped recipe `name` with cuda_kernels, one GPU per rank, over NCCL bootstrapped
/// through `mpi` (this process's rank of the MPI world, its GPU its node-local rank's) or, when
/// `mpi` is null, `ranks` threads of this process on GPUs 0..ranks-1 -- on GPU r modulo the
/// visible ones where there are fewer, the ranks sharing them over comm::cuda_staged (every
/// shipped recipe).
/// 0 on success (2: no such recipe); throws tessera::error on bad input.
int run_recipe_on_cuda(const std::string& name, tessera::comm::any_communicator* mpi, std::int64_t ranks,
                       const run_inputs& in);

}  // namespace train_llama_cli
