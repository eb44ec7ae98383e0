// tessera/kernels/cuda/cross_entropy.cuh: softmax cross-entropy over the vocabulary on the
// GPU, forward and backward in one pass, as cpu::cross_entropy_forward_backward.
// tessera-requires: cuda (compiled by nvcc: include from a .cu translation unit)
//
// One block per token row, two passes over it: the row's max and sum of e^(x - max) in one
// (each thread's running max and sum, its sum rescaled when its max grows -- the online
// softmax --, then two block reductions in a fixed tree: deterministic), lse = max +
// log(sum), the token's loss lse - x[target] (0 for an ignored target < 0); then dlogits =
// scale (softmax(x) - onehot(target)) written over the row (dlogits may alias logits: each
// group of elements is read before it is written). Rows 16-byte aligned with V a multiple of
// 4 (Llama 3's 128,256) move 4 floats a thread a load. Until 2026-11-30 the max and the sum
// were two passes: at 8B's 8,192 x 128,256 logits, 5.6 ms on an H200 for three reads and a
// write of the 4.2 GB (docs/performance.md). The exponentials
// are pointwise::fast_exp, the CPU kernel's. Targets are checked on the host, where the batch
// is (cpu::count_targets gives the count and refuses an id >= V), before they are copied.
//
// The vocabulary-parallel finish (loss parallel: logits [N, Vl] hold columns [v0, v0 + Vl) of
// the V-column vocabulary) is cpu/vocab_parallel.hpp's three phases with the caller's
// reductions between them: ce_shard_row_max, ce_shard_row_stats, ce_shard_finish -- one block
// per row each, the same block reductions.
// The device code is cross_entropy_kernels.cuh, which the host tests also run through a CUDA
// emulation (tests/kernels/test_pointwise_emulated.cpp); this file launches it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include <tessera/kernels/cuda/cross_entropy_kernels.cuh>
#include <tessera/kernels/cuda/launch.cuh>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/pointwise.hpp>
#include <tessera/tensor/cuda_memory.hpp>

namespace tessera::cuda {


/// Loss parallel, phase 1: rowmax [N] = each row's maximum over this shard's Vl columns.
inline void ce_shard_row_max(float* rowmax, const float* logits, std::int64_t N, std::int64_t Vl,
                             cudaStream_t s = nullptr) {
  if (N == 0) return;
  TESSERA_LAUNCH(static_cast<unsigned>(N), detail::threads, 0, s, detail::ce_shard_row_max_k)(rowmax, logits, Vl);
  detail::launched("cuda::ce_shard_row_max");
}
/// Phase 2 (rowmax reduced over the split): stats [N, 2] = (sum of e^(x - rowmax), the
/// target's logit when it is in this shard, else 0).
inline void ce_shard_row_stats(float* stats, const float* logits, const float* rowmax, const std::int32_t* targets,
                               std::int64_t N, std::int64_t v0, std::int64_t Vl, cudaStream_t s = nullptr) {
  if (N == 0) return;
  TESSERA_LAUNCH(static_cast<unsigned>(N), detail::threads, 0, s, detail::ce_shard_row_stats_k)(
      stats, logits, rowmax, targets, v0, Vl);
  detail::launched("cuda::ce_shard_row_stats");
}
/// Phase 3 (stats reduced over the split): per-token losses [N] (0 for ignored rows) and,
/// when dlogits is not null, scale * (softmax - onehot) on the local columns (may alias logits).
inline void ce_shard_finish(float* dlogits, float* losses, const float* logits, const float* rowmax,
                            const float* stats, const std::int32_t* targets, std::int64_t N, std::int64_t v0,
                            std::int64_t Vl, float scale, cudaStream_t s = nullptr) {
  if (N == 0) return;
  TESSERA_LAUNCH(static_cast<unsigned>(N), detail::threads, 0, s, detail::ce_shard_finish_k)(
      dlogits, losses, logits, rowmax, stats, targets, v0, Vl, scale);
  detail::launched("cuda::ce_shard_finish");
}

/// Per-token losses [N] (0 for ignored rows) and dlogits [N, V] (may alias logits), given
/// `count` = cpu::count_targets(the host's targets); grad_scale < 0 means 1 / count.
inline void cross_entropy_forward_backward(float* dlogits, float* losses, const float* logits,
                                           const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                           std::int64_t count, float grad_scale = -1.0f, cudaStream_t s = nullptr) {
  if (N == 0) return;
  const float scale = grad_scale >= 0.0f ? grad_scale : (count ? 1.0f / static_cast<float>(count) : 0.0f);
  TESSERA_LAUNCH(static_cast<unsigned>(N), detail::threads, 0, s, detail::cross_entropy_k)(
      dlogits, losses, logits, targets, V, scale);
  detail::launched("cuda::cross_entropy_forward_backward");
}

/// The mean of the per-token losses [N] over `count` tokens: copied to the host and summed
/// in double (0 when nothing counts).
inline float mean_loss(const float* losses, std::int64_t N, std::int64_t count) {
  std::vector<float> h(static_cast<std::size_t>(N));
  copy_to_host(h.data(), losses, h.size() * sizeof(float));
  double total = 0;
  for (float l : h) total += l;
  return count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
}

}  // namespace tessera::cuda
