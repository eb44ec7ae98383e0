// tessera/train/memory_check.hpp: refuses, before anything large is allocated, a training
// run whose step needs more host memory than this host has available.
//
//   train::check_host_memory<my_recipe>(dm.shape(), global_batch, seq_len, ranks_here);
//
// throws tessera::error with one message, e.g.
//   "seq_len 100000 x global batch 8: one training step of recipe debug_fsdp needs about
//    95.8 GiB on this host (2 ranks here, 47.9 GiB each, of which activations 47.9 GiB), but
//    22.9 GiB is available; give a smaller seq_len or global batch, more hosts, or a recipe
//    with activation checkpointing"
// The parts of the estimate that make 5% or more of it are named, largest first, and the
// fix follows the largest. The need is the memory estimator's peak
// (train/memory_estimator.hpp) of the largest rank (rank 0's coordinates, and under PP the
// first rank of every stage) times the ranks that run on this host; the available bytes are
// host_memory_budget() (core/host_memory.hpp: TESSERA_HOST_MEMORY when set, else what Linux
// says is available) unless given. Unknown available memory (0) checks nothing.
// basic_trainer calls it for a parallel_llama on host memory (train/trainer.hpp); train_llama
// calls it before building the model. device_memory_problem is the same for one rank per
// GPU, against the free memory the caller read from its GPU (cudaMemGetInfo): this header
// needs no CUDA.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include <tessera/core/error.hpp>
#include <tessera/comm/launcher.hpp>
#include <tessera/core/host_memory.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/model/cuda_workspace.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/parallel/policies.hpp>
#include <tessera/train/memory_estimator.hpp>
#include <tessera/train/recipe.hpp>

namespace tessera::train {

/// Ranks of a job that share this host, for a job whose communicator is of `backend`
/// (any_communicator::backend()): all `world_size` ranks on the threads backend (they are
/// threads of this process); otherwise the launcher's count of processes on this node
/// (comm::node_local_size: mpirun's, torchrun's, MPICH's or Slurm's), else 1.
inline std::int64_t ranks_on_this_host(std::string_view backend, std::int64_t world_size) {
  if (backend == "threads") return world_size;
  return std::min<std::int64_t>(comm::node_local_size(1), world_size);
}

namespace detail {

/// Bytes for a message: TiB, GiB to a tenth, MiB below a tenth of a GiB (a small
/// TESSERA_HOST_MEMORY, a tiny model's rank)
inline std::string size_text(std::int64_t b) {
  char buf[32];
  const double g = static_cast<double>(b) / (std::int64_t{1} << 30);
  if (g >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f TiB", g / 1024);
  else if (g >= 0.1)
    std::snprintf(buf, sizeof buf, "%.1f GiB", g);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", g * 1024);
  return buf;
}

/// The estimate of the rank that needs most: rank 0's coordinates (it holds the largest
/// block of every uneven split) and, under PP, the first rank of every stage.
inline memory_estimate largest_rank_estimate(const llama_config& cfg, const parallel_spec& p, const mesh_shape& m,
                                             std::int64_t global_batch, std::int64_t seq_len) {
  memory_estimate best = estimate_memory(cfg, p, m, global_batch, seq_len);
  if (p.pp >= 0)
    for (std::int64_t s = 1; s < m[p.pp]; ++s) {
      coords_t c{};
      c[static_cast<std::size_t>(p.pp)] = s;
      const memory_estimate e = estimate_memory(cfg, p, m, global_batch, seq_len, c);
      if (e.peak() > best.peak()) best = e;
    }
  return best;
}

/// " (TESSERA_HOST_MEMORY)" when `available` is what that variable sets, so that a refusal
/// names a budget the user set rather than the host's memory
inline std::string budget_source(std::int64_t available) {
  if (!host_memory_budget_given()) return {};
  try {
    return host_memory_budget() == available ? " (TESSERA_HOST_MEMORY)" : "";
  } catch (const error&) {
    return {};
  }
}

}  // namespace detail

namespace detail {
/// The estimate's parts of 5% or more, largest first ("activations 47.9 GiB, ..."), and
/// whether the largest shrinks with the sequence (activations, K/V blocks) rather than with
/// more sharding
inline std::pair<std::string, bool> largest_parts(const memory_estimate& e) {
  std::array<std::pair<std::int64_t, const char*>, 8> parts{{{e.activations, "activations"},
                                                             {e.parameters, "parameters"},
                                                             {e.gradients, "gradients"},
                                                             {e.optimizer, "optimizer states"},
                                                             {e.gathered, "gathered parameters"},
                                                             {e.grad_buffers, "gradient buffers"},
                                                             {e.context, "context parallel's K/V blocks"},
                                                             {e.staging, "communication staging"}}};
  std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string text;
  for (std::size_t i = 0; i < 3 && (i == 0 || parts[i].first * 20 >= e.peak()); ++i)
    text += std::string(i ? ", " : "") + parts[i].second + " " + size_text(parts[i].first);
  const std::string_view largest = parts[0].second;
  return {text, largest == "activations" || largest == "context parallel's K/V blocks"};
}

inline std::string step_text(std::int64_t seq_len, std::int64_t global_batch, std::string_view what) {
  return "seq_len " + std::to_string(seq_len) + " x global batch " + std::to_string(global_batch) +
         ": one training step of " + std::string(what) + " needs about ";
}
}  // namespace detail

/// The problem, in one message naming the fix, when one training step of `recipe` (config
/// `cfg`, policies `p`) on a mesh of `shape` with `global_batch` sequences of `seq_len`
/// tokens needs more than `available` bytes for the `ranks_here` ranks on this host; ""
/// when it fits or when `available` is 0 (unknown).
inline std::string host_memory_problem(const llama_config& cfg, const parallel_spec& p, std::string_view recipe,
                                       const mesh_shape& shape, std::int64_t global_batch, std::int64_t seq_len,
                                       std::int64_t ranks_here, std::int64_t available) {
  if (available <= 0) return {};
  const memory_estimate e = detail::largest_rank_estimate(cfg, p, shape, global_batch, seq_len);
  const std::int64_t here = std::max<std::int64_t>(ranks_here, 1), each = e.peak();
  if (each <= available / here) return {};
  const auto [parts, activations] = detail::largest_parts(e);
  std::string msg = detail::step_text(seq_len, global_batch, "recipe " + std::string(recipe)) +
                    detail::size_text(each * here) + " on this host (" + std::to_string(here) +
                    (here == 1 ? " rank here" : " ranks here") + ", " + detail::size_text(each) + " each, of which " +
                    parts + "), but " + detail::size_text(available) + " is available" +
                    detail::budget_source(available) + "; ";
  if (activations)
    msg += std::string("give a smaller seq_len or global batch, more hosts") +
           (p.ac.any() ? "" : ", or a recipe with activation checkpointing");
  else
    msg += "shard the model over more ranks (FSDP, TP or PP axes) on more hosts, or run fewer ranks on this host";
  return msg;
}

/// cuDNN's workspace, in bytes, for the attention of a rank of dims d, where cuDNN's attention
/// runs instead of tessera's tensor-core kernels (TESSERA_ATTENTION=cudnn: cuda_bf16_kernels'
/// cudnn_attention_workspace, which asks cuDNN on the GPU); empty where tessera's kernels run.
using cudnn_workspace_query = std::function<std::int64_t(const llama_dims&)>;

/// The problem when one training step of `what` ("recipe debug_fsdp", "model llama3_8b") --
/// config `cfg`, policies `p`, a mesh of `shape`, `global_batch` x `seq_len` tokens -- needs
/// more memory on a GPU than the `free_bytes` that `device` (its name, for the message) has,
/// for the rank that needs most; "" when it fits or `free_bytes` is 0 (unknown). The
/// estimate counts tessera's arenas and activations and the CUDA kernel backend's workspace
/// (model/cuda_workspace.hpp: `bf16_operands` for cuda_bf16_kernels -- train_llama's
/// --compute-dtype bf16 --, the tensor-core attention's staging where the head dim takes it;
/// the bf16 copies of the weights the model keeps, memory_estimate::kept_weights -- device_llama,
/// which trains one GPU without a recipe, keeps all, a recipe's runtime those no FSDP gather
/// moves --, and the FSDP units' bf16 gathers of the linears' weights held as those codes, not
/// in f32, memory_estimate::gathered_operands; `cudnn_workspace`: cuDNN's attention in place of the
/// tensor-core kernels', its buffers and the workspace it answers for the rank's dims), not the
/// CUDA context: a step it passes may still not fit, one it refuses does not. `ranks_here`
/// ranks share the GPU (comm::cuda_staged): each needs the rank's memory.
inline std::string device_memory_problem(const llama_config& cfg, const parallel_spec& p, std::string_view what,
                                         const mesh_shape& shape, std::int64_t global_batch, std::int64_t seq_len,
                                         std::int64_t free_bytes, std::string_view device, bool bf16_operands = false,
                                         const cudnn_workspace_query& cudnn_workspace = {},
                                         std::int64_t ranks_here = 1) {
  if (free_bytes <= 0) return {};
  const memory_estimate e = detail::largest_rank_estimate(cfg, p, shape, global_batch, seq_len);
  const std::int64_t workspace =
                         cuda::llama_workspace(e.dims, bf16_operands, true,
                                               e.kept_weights,
                                               bf16_operands && cudnn_workspace ? cudnn_workspace(e.dims) : -1)
                             .total(),
                     need = ranks_here * (e.peak() - (bf16_operands ? 2 * e.gathered_operands : 0) + workspace);
  if (need <= free_bytes) return {};
  const auto [parts, activations] = detail::largest_parts(e);
  const bool one = world_size(shape) == 1, shared = ranks_here > 1;
  std::string msg = detail::step_text(seq_len, global_batch, what) + detail::size_text(need) +
                    (one      ? " on its GPU"
                     : shared ? " on a GPU its " + std::to_string(ranks_here) + " ranks share"
                              : " on each GPU") +
                    " (of which " + parts + "; the CUDA kernels' workspace " + detail::size_text(workspace) +
                    (shared ? "; each rank's" : "") + "), but " + std::string(device) + " has " +
                    detail::size_text(free_bytes) + " free; ";
  if (activations)
    msg += std::string("give a smaller seq_len or global batch") + (one ? "" : ", more GPUs") +
           (p.ac.any() || one ? "" : ", or a recipe with activation checkpointing");
  else
    msg += one ? "a smaller model, or a recipe that shards it over several GPUs"
               : "shard the model over more GPUs (FSDP, TP or PP axes)";
  return msg;
}

/// The same for recipe R.
template <class Recipe>
std::string host_memory_problem(const mesh_shape& shape, std::int64_t global_batch, std::int64_t seq_len,
                                std::int64_t ranks_here, std::int64_t available) {
  using R = recipe_traits<Recipe>;
  return host_memory_problem(R::config, R::spec, R::name(), shape, global_batch, seq_len, ranks_here, available);
}

/// The same for recipe R, on one GPU per rank.
template <class Recipe>
std::string device_memory_problem(const mesh_shape& shape, std::int64_t global_batch, std::int64_t seq_len,
                                  std::int64_t free_bytes, std::string_view device, bool bf16_operands = false,
                                  const cudnn_workspace_query& cudnn_workspace = {}, std::int64_t ranks_here = 1) {
  using R = recipe_traits<Recipe>;
  return device_memory_problem(R::config, R::spec, "recipe " + std::string(R::name()), shape, global_batch, seq_len,
                               free_bytes, device, bf16_operands, cudnn_workspace, ranks_here);
}

/// Throws tessera::error with host_memory_problem's message when one training step of
/// recipe R does not fit in the host memory available (host_memory_budget() by default)
/// to the `ranks_here` ranks of the job on this host (ranks_on_this_host). Checks nothing
/// when the available memory is unknown (0).
template <class Recipe>
void check_host_memory(const mesh_shape& shape, std::int64_t global_batch, std::int64_t seq_len,
                       std::int64_t ranks_here, std::int64_t available = host_memory_budget()) {
  if (const std::string problem = host_memory_problem<Recipe>(shape, global_batch, seq_len, ranks_here, available);
      !problem.empty())
    throw error(problem);
}

}  // namespace tessera::train
