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

/// The sum of row_loss(i) over rows [0, N) (in double, per thread, then over threads)
/// divided by `count`; 0 when nothing counts. row_loss may also write the row's gradient.
template <class F>
float mean_row_loss(std::int64_t N, std::int64_t count, F&& row_loss) {
  std::vector<double> part(static_cast<std::size_t>(num_threads()), 0.0);
  std::atomic<int> slot{0};
  parallel_for(N, [&](std::int64_t b, std::int64_t e) {
    double acc = 0.0;
    for (std::int64_t i = b; i < e; ++i) acc += row_loss(i);
    part[static_cast<std::size_t>(slot.fetch_add(1))] = acc;
  }, 4);
  double total = 0.0;
  for (double p : part) total += p;
  return count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
}

/// grad_scale when given (>= 0), else 1 / count: the gradient of the mean loss.
inline float loss_grad_scale(float grad_scale, std::int64_t count) {
  return grad_scale >= 0.0f ? grad_scale : (count ? 1.0f / static_cast<float>(count) : 0.0f);
}

/// One row's gradient d = scale * (softmax(x) - onehot(t)) over n columns given the row's
/// log-sum-exp; t outside [0, n) (another shard's target) adds no one-hot term, and
/// `ignored` rows get zeros.
inline void softmax_grad_row(float* d, const float* x, std::int64_t n, float lse, std::int64_t t, float scale,
                             bool ignored) {
  if (ignored) {
    for (std::int64_t v = 0; v < n; ++v) d[v] = 0.0f;
    return;
  }
  for (std::int64_t v = 0; v < n; ++v) d[v] = scale * fast_exp(x[v] - lse);
  if (t >= 0 && t < n) d[t] -= scale;
}
}  // namespace detail

/// Per-token losses (0 for ignored tokens; `losses` may be nullptr); returns the mean.
inline float cross_entropy_forward(float* losses, const float* logits,
                                   const std::int32_t* targets, std::int64_t N, std::int64_t V) {
  return detail::mean_row_loss(N, count_targets(targets, N, V), [&](std::int64_t i) {
    float l = 0.0f;
    if (targets[i] >= 0) l = detail::row_logsumexp(logits + i * V, V) - logits[i * V + targets[i]];
    if (losses) losses[i] = l;
    return l;
  });
}

/// dlogits (may alias logits) from logits and targets; grad_scale < 0 means 1 / count.
inline void cross_entropy_backward(float* dlogits, const float* logits,
                                   const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                   float grad_scale = -1.0f) {
  const float scale = detail::loss_grad_scale(grad_scale, count_targets(targets, N, V));
  parallel_for(N, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const float* x = logits + i * V;
      const bool ignored = targets[i] < 0;
      detail::softmax_grad_row(dlogits + i * V, x, V, ignored ? 0.0f : detail::row_logsumexp(x, V), targets[i], scale,
                               ignored);
    }
  }, 4);
}

/// Forward and backward in one pass over the logits: per-token losses (may be nullptr),
/// dlogits (may alias logits); returns the mean loss.
inline float cross_entropy_forward_backward(float* dlogits, float* losses, const float* logits,
                                            const std::int32_t* targets, std::int64_t N,
                                            std::int64_t V, float grad_scale = -1.0f) {
  const std::int64_t count = count_targets(targets, N, V);
  const float scale = detail::loss_grad_scale(grad_scale, count);
  return detail::mean_row_loss(N, count, [&](std::int64_t i) {
    const float* x = logits + i * V;
    const std::int32_t t = targets[i];
    float l = 0.0f;
    if (t < 0) {
      detail::softmax_grad_row(dlogits + i * V, x, V, 0.0f, t, scale, true);
    } else {
      const float lse = detail::row_logsumexp(x, V);
      l = lse - x[t];  // read before the gradient overwrites the row (dlogits may alias logits)
      detail::softmax_grad_row(dlogits + i * V, x, V, lse, t, scale, false);
    }
    if (losses) losses[i] = l;
    return l;
  });
}

}  // namespace tessera::cpu
