// train_llama's start-up checks that need no options struct: an output file's folder, the
// MPI launcher this process was started by, and whether a step fits the GPUs. Included by
// train_llama.cpp only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <tessera/comm/launcher.hpp>
#include <tessera/comm/types.hpp>
#include <tessera/core/error.hpp>
#include <tessera/kernels/cuda/attention_library.hpp>
#include <tessera/train/memory_check.hpp>
#include <tessera/train/recipe.hpp>

#include "cuda_run.hpp"

namespace train_llama_cli {
namespace fs = std::filesystem;
using namespace tessera;

/// Where an output file named on the command line stands before any work: writable at the
/// end (its folder exists, created first when `create_folder`), a folder instead of a file,
/// or without a folder (and, when creating it failed, why).
struct output_file_state {
  enum { ok, is_folder, no_folder } state = ok;
  std::string folder, why;
};
inline output_file_state prepare_output_file(const std::string& path, bool create_folder) {
  std::error_code ec;
  if (path.empty()) return {};
  if (fs::is_directory(path, ec)) return {output_file_state::is_folder, {}, {}};
  const fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) return {};
  std::error_code made;
  if (create_folder) fs::create_directories(dir, made);
  if (fs::is_directory(dir, ec)) return {};
  return {output_file_state::no_folder, dir.string(), made ? made.message() : std::string()};
}

/// Whether a launcher started this process as one of several that would each train the whole
/// job alone and write the same files: mpirun's (or srun's) with --backend threads -- said by
/// rank 0 (a tessera::error), the others returning true to stop quietly with exit 2 -- or
/// torchrun's, which give no MPI world under either backend -- said by every process (torchrun
/// stops the others when one fails, perhaps before rank 0 could).
inline bool stopped_by_launcher(const std::string& backend) {
  using tessera::error;
  if (const auto l = tessera::comm::mpi_launched(); l.size > 1 && backend == "threads") {
    if (l.rank != 0) return true;
    throw error("started as one of " + std::to_string(l.size) + " processes by an MPI launcher (" + l.variable +
                "=" + std::to_string(l.size) + ") with --backend threads, so each would train the whole job alone "
                "and write the same files; add --backend mpi (with --recipe) to train one job on the " +
                std::to_string(l.size) + " processes, or start train_llama without mpirun");
  }
  if (const auto t = tessera::comm::torchrun_launched(); t.size > 1)
    throw error("started by torchrun as one of " + std::to_string(t.size) + " processes (WORLD_SIZE=" +
                std::to_string(t.size) + ", RANK=" + std::to_string(t.rank) + "), which give train_llama no "
                "MPI world, so each process would train the whole job alone and write the same files; start "
                "its processes with mpirun -np " + std::to_string(t.size) + " (or srun) and --backend mpi, or "
                "one process with --ranks " + std::to_string(t.size) + " (torchrun's variables bootstrap NCCL "
                "in a trainer of your own: comm::nccl_communicator::from_env)");
  return false;
}

/// Refuses an MPI world of another size than the launcher's count: every process a world of
/// its own, each training alone -- the MPI library did not join the launcher's processes.
inline void check_mpi_world(int world_size) {
  if (const auto l = tessera::comm::mpi_launched(); l.size > 1 && l.size != world_size)
    throw tessera::error("started as one of " + std::to_string(l.size) + " processes (" + l.variable + "=" +
                         std::to_string(l.size) + "), but MPI sees a world of " + std::to_string(world_size) +
                         ", so each would train alone: this train_llama's MPI did not join the launcher's "
                         "processes (srun with an MPI built without Slurm's PMI, or another MPI's mpirun); start "
                         "it with the mpirun of the MPI it was built with, mpirun -np " + std::to_string(l.size));
}

/// Checks before any work that the trace can be written at the end: its folder exists
/// (the default profiling.save_traces_folder is created, as TorchTitan does).
inline void check_trace_path(const std::string& trace, bool create_folder) {
  const output_file_state f = prepare_output_file(trace, create_folder);
  if (f.state == output_file_state::is_folder)
    throw error("profiling: the trace file '" + trace + "' is a folder; name a file, e.g. " +
                (fs::path(trace) / "trace.json").string());
  if (f.state == output_file_state::no_folder)
    throw error("profiling: the folder of the trace file '" + trace + "' does not exist; create it or change "
                "--profiling.trace_file");
}

/// Checks before any work that the trained weights can be written at the end: the folder of
/// checkpoint.save_weights is created when missing (as the metrics file's is), and a path that
/// is a folder or whose folder cannot be created is refused before anything is trained.
inline void check_save_weights_path(const std::string& save_weights) {
  const output_file_state f = prepare_output_file(save_weights, true);
  if (f.state == output_file_state::is_folder)
    throw error("checkpoint.save_weights: '" + save_weights + "' is a folder; name a file, e.g. " +
                (fs::path(save_weights) / "model.safetensors").string());
  if (f.state == output_file_state::no_folder)
    throw error("checkpoint.save_weights: cannot create the folder '" + f.folder + "' of '" + save_weights + "'" +
                (f.why.empty() ? std::string() : " (" + f.why + ")") + "; change --save-weights");
}

/// --device cuda: refuses, before the tokens are loaded or anything is allocated, a step
/// (config cfg, policies p) that needs more memory than one of `devices` has free
/// (train::device_memory_problem: the memory estimate of the rank that needs most, with the
/// workspace of cuda_bf16_kernels when `bf16_operands`, else cuda_kernels' -- with cuDNN's
/// attention where it runs, its workspace asked of cuDNN on each device, and the rounded
/// weights the model keeps from the forward for the backward). `devices`: each rank's GPU; a GPU
/// listed k times holds k ranks (comm::cuda_staged), each with its memory.
[[maybe_unused]] inline void check_gpu_memory(const llama_config& cfg, const parallel_spec& p, const std::string& what,
                                       const mesh_shape& shape, std::int64_t global_batch, std::int64_t seq_len,
                                       const std::vector<int>& devices, bool bf16_operands) {
#ifdef TESSERA_HAS_CUDA_TRAINER
  const bool cudnn = bf16_operands && cuda::default_attention_library() == cuda::attention_library::cudnn;
  std::map<int, std::int64_t> ranks_on;  // each GPU, and the ranks it holds
  for (const int d : devices) ++ranks_on[d];
  for (const auto& gpu_ranks : ranks_on) {
    const int d = gpu_ranks.first;  // (a variable, not a structured binding: the lambda below captures it)
    const auto gpu = cuda_memory_of(d);
    train::cudnn_workspace_query cudnn_workspace;
    if (cudnn && gpu.free_bytes > 0)
      cudnn_workspace = [d](const llama_dims& dims) { return cudnn_workspace_on(d, dims); };
    if (const std::string problem =
            train::device_memory_problem(cfg, p, what, shape, global_batch, seq_len, gpu.free_bytes, gpu.name,
                                         bf16_operands, cudnn_workspace, gpu_ranks.second);
        !problem.empty())
      throw error(problem);
  }
#else
  (void)cfg, (void)p, (void)what, (void)shape, (void)global_batch, (void)seq_len, (void)devices, (void)bf16_operands;
#endif
}

/// Each of `ranks` thread ranks' GPU: rank r on GPU r, or, with fewer GPUs than ranks, on GPU r
/// modulo them (the ranks share them over comm::cuda_staged; cuda_recipe_half.hpp).
inline std::vector<int> rank_gpus(std::int64_t ranks) {
#ifdef TESSERA_HAS_CUDA_TRAINER
  const int n = std::max(1, visible_gpus());
#else
  const int n = static_cast<int>(ranks);
#endif
  std::vector<int> gpus(static_cast<std::size_t>(ranks));
  for (std::size_t r = 0; r < gpus.size(); ++r) gpus[r] = static_cast<int>(r) % n;
  return gpus;
}

/// This MPI process's GPU, once for each of the job's processes on it (gpu_of_process: an
/// all_gather over `world`, so every process of it calls this): what check_gpu_memory counts
/// against the GPU's free memory.
template <class C>
std::vector<int> process_gpus(C& world) {
#ifdef TESSERA_HAS_CUDA_TRAINER
  const process_gpu g = gpu_of_process(world, visible_gpus());
  return std::vector<int>(static_cast<std::size_t>(g.ranks_here), g.device);
#else
  return {local_device(world.rank())};
#endif
}

/// Runs start-up check `check` (it throws tessera::error on a problem) on every process of
/// `world` (collective): true when no process has a problem; else the lowest rank with one
/// says it (on stderr, as main does), every process waits for that (a barrier: mpirun would
/// kill the job at the first process that exits 1, perhaps before the message), and all
/// return false, to stop with exit 1. So a problem is said once under mpirun, though each
/// process checks its own node and GPU.
template <class C, class F>
bool passes_on_every_process(C& world, F&& check) {
  std::string problem;
  try {
    check();
  } catch (const error& e) {
    problem = e.what();
  }
  const int mine = problem.empty() ? world.size() : world.rank();
  int says = 0;
  world.all_reduce(&mine, &says, 1, comm::dtype::i32, comm::reduce_op::min).wait();
  if (says == world.size()) return true;
  if (world.rank() == says) std::cerr << "train_llama: error: " << problem << std::endl;
  world.barrier().wait();
  return false;
}

/// The same for recipe R's ranks on `devices`.
template <class R>
void check_gpu_memory(const mesh_shape& shape, std::int64_t global_batch, std::int64_t seq_len,
                      const std::vector<int>& devices, bool bf16_operands) {
  using T = recipe_traits<R>;
  check_gpu_memory(T::config, T::spec, "recipe " + std::string(T::name()), shape, global_batch, seq_len, devices,
                   bf16_operands);
}

}  // namespace train_llama_cli
