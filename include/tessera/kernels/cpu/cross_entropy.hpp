// tessera/kernels/cpu/cross_entropy.hpp: softmax cross-entropy over the vocabulary, fused.
//
//   loss[n] = logsumexp(logits[n,:]) - logits[n, targets[n]]
//   mean loss = sum of loss[n] over tokens with targets[n] >= 0, divided by their count
//   (negative targets are ignored, as torch's ignore_index = -100).
//   dlogits[n,v] = grad_scale * (softmax(logits[n,:])[v] - [v == targets[n]]), 0 for ignored
//   rows; grad_scale defaults to 1 / (number of counted tokens), i.e. d(mean loss).
// Backward WRITES dlogits, which may alias logits (saves the largest activation, as llm.c).
// Pass grad_scale = 1 / (tokens of the whole step) for gradient accumulation.
#pragma once

#include <cmath>
#include <cstdint>
#include <atomic>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/detail/vec_math.hpp>
#include <tessera/kernels/cpu/parallel.hpp>

namespace tessera::cpu {

/// Tokens that count (target >= 0); throws tessera::error for a target >= V.
inline std::int64_t count_targets(const std::int32_t* targets, std::int64_t N, std::int64_t V) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    if (targets[i] >= V)
      throw error("cross_entropy: target " + std::to_string(targets[i]) + " at position " +
                  std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
    n += targets[i] >= 0;
  }
  return n;
}

namespace detail {
/// Max and log-sum-exp of one row.
inline float row_logsumexp(const float* x, std::int64_t V) {
  const float m = reduce_max(x, V);
  return m + std::log(sum_exp_sub(x, V, m));
}
}  // namespace detail

/// Per-token losses (0 for ignored tokens; `losses` may be nullptr); returns the mean.
inline float cross_entropy_forward(float* losses, const float* logits,
                                   const std::int32_t* targets, std::int64_t N, std::int64_t V) {
  const std::int64_t count = count_targets(targets, N, V);
  std::vector<double> part(static_cast<std::size_t>(num_threads()), 0.0);
  std::atomic<int> slot{0};
  parallel_for(N, [&](std::int64_t b, std::int64_t e) {
    double acc = 0.0;
    for (std::int64_t i = b; i < e; ++i) {
      float l = 0.0f;
      if (targets[i] >= 0) l = detail::row_logsumexp(logits + i * V, V) - logits[i * V + targets[i]];
      if (losses) losses[i] = l;
      acc += l;
    }
    part[static_cast<std::size_t>(slot.fetch_add(1))] = acc;
  }, 4);
  double total = 0.0;
  for (double p : part) total += p;
  return count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
}

/// dlogits (may alias logits) from logits and targets; grad_scale < 0 means 1 / count.
inline void cross_entropy_backward(float* dlogits, const float* logits,
                                   const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                   float grad_scale = -1.0f) {
  const std::int64_t count = count_targets(targets, N, V);
  const float scale = grad_scale >= 0.0f ? grad_scale : (count ? 1.0f / static_cast<float>(count) : 0.0f);
  parallel_for(N, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const float* x = logits + i * V;
      float* d = dlogits + i * V;
      if (targets[i] < 0) {
        for (std::int64_t v = 0; v < V; ++v) d[v] = 0.0f;
        continue;
      }
      const float lse = detail::row_logsumexp(x, V);
      for (std::int64_t v = 0; v < V; ++v) d[v] = scale * detail::fast_exp(x[v] - lse);
      d[targets[i]] -= scale;
    }
  }, 4);
}

/// Forward and backward in one pass over the logits: per-token losses (may be nullptr),
/// dlogits (may alias logits); returns the mean loss.
inline float cross_entropy_forward_backward(float* dlogits, float* losses, const float* logits,
                                            const std::int32_t* targets, std::int64_t N,
                                            std::int64_t V, float grad_scale = -1.0f) {
  const std::int64_t count = count_targets(targets, N, V);
  const float scale = grad_scale >= 0.0f ? grad_scale : (count ? 1.0f / static_cast<float>(count) : 0.0f);
  std::vector<double> part(static_cast<std::size_t>(num_threads()), 0.0);
  std::atomic<int> slot{0};
  parallel_for(N, [&](std::int64_t b, std::int64_t e) {
    double acc = 0.0;
    for (std::int64_t i = b; i < e; ++i) {
      const float* x = logits + i * V;
      float* d = dlogits + i * V;
      const std::int32_t t = targets[i];
      float l = 0.0f;
      if (t < 0) {
        for (std::int64_t v = 0; v < V; ++v) d[v] = 0.0f;
      } else {
        const float lse = detail::row_logsumexp(x, V);
        l = lse - x[t];
        for (std::int64_t v = 0; v < V; ++v) d[v] = scale * detail::fast_exp(x[v] - lse);
        d[t] -= scale;
      }
      if (losses) losses[i] = l;
      acc += l;
    }
    part[static_cast<std::size_t>(slot.fetch_add(1))] = acc;
  }, 4);
  double total = 0.0;
  for (double p : part) total += p;
  return count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
}

}  // namespace tessera::cpu
