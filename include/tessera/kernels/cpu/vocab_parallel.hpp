// tessera/kernels/cpu/vocab_parallel.hpp: cross-entropy over a vocabulary shard.
//
// Tensor parallel splits the embedding and output tables over the vocabulary: a rank holds
// rows [v0, v0 + Vl) of the V-row table (Megatron's VocabParallelEmbedding and
// vocab-parallel cross-entropy; TorchTitan's loss_parallel).
// (embedding_shard_forward/backward live in embedding.hpp.) Cross-entropy over logits
// [N, Vl] split over the vocabulary runs in three phases, with reductions over the split
// between them (the caller's collectives, from plans):
//   1. ce_shard_row_max:   m_i = max_v x[i, v]            (then reduce max)
//   2. ce_shard_row_stats: s_i = sum_v exp(x[i, v] - m_i), t_i = x[i, target_i] or 0
//                                                          (then reduce sum)
//   3. ce_shard_finish:    loss_i = log s_i + m_i - t_i, mean over counted tokens, and
//                          dlogits = scale * (softmax - onehot) on the local columns.
// With one rank (v0 = 0, Vl = V) the phases compute exactly cross_entropy_forward_backward.
#pragma once

#include <cmath>
#include <cstdint>

#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/detail/vec_math.hpp>
#include <tessera/kernels/cpu/parallel.hpp>

namespace tessera::cpu {

/// Phase 1: the local row maxima.
inline void ce_shard_row_max(float* rowmax, const float* logits, std::int64_t N, std::int64_t Vl) {
  parallel_for(N, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) rowmax[i] = detail::reduce_max(logits + i * Vl, Vl);
  }, 4);
}

/// Phase 2: stats[2i] = sum of exp(x - rowmax), stats[2i + 1] = the target's logit when it
/// is in this shard (else 0). `rowmax` is the maximum over the whole vocabulary.
inline void ce_shard_row_stats(float* stats, const float* logits, const float* rowmax, const std::int32_t* targets,
                               std::int64_t N, std::int64_t v0, std::int64_t Vl) {
  parallel_for(N, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const float* x = logits + i * Vl;
      stats[2 * i] = detail::sum_exp_sub(x, Vl, rowmax[i]);
      const std::int64_t t = static_cast<std::int64_t>(targets[i]) - v0;
      stats[2 * i + 1] = (targets[i] >= 0 && t >= 0 && t < Vl) ? x[t] : 0.0f;
    }
  }, 4);
}

/// Phase 3: the mean loss over counted tokens (target >= 0) from the reduced statistics,
/// and, when `dlogits` is not null, scale * (softmax - onehot) on the local columns (may
/// alias logits). `V` is the whole vocabulary (targets are checked against it).
inline float ce_shard_finish(float* dlogits, const float* logits, const float* rowmax, const float* stats,
                             const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t v0,
                             std::int64_t Vl, float scale) {
  return detail::mean_row_loss(N, count_targets(targets, N, V), [&](std::int64_t i) {
    const std::int32_t t = targets[i];
    const float lse = rowmax[i] + std::log(stats[2 * i]);
    if (dlogits)
      detail::softmax_grad_row(dlogits + i * Vl, logits + i * Vl, Vl, lse, static_cast<std::int64_t>(t) - v0, scale,
                               t < 0);
    return t >= 0 ? lse - stats[2 * i + 1] : 0.0f;
  });
}

}  // namespace tessera::cpu
