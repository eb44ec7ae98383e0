// tessera/kernels/cpu/grad_norm.hpp: global gradient norm and clipping (as
// torch.nn.utils.clip_grad_norm_ with the L2 norm):
//   norm = sqrt(sum of g^2 over all gradients)
//   coef = max_norm / (norm + 1e-6); if coef < 1 every gradient is multiplied by coef.
// sum_of_squares is the piece a distributed run all-reduces before the sqrt.
// Accumulation in double, in fixed chunks, so the result does not depend on the threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <tessera/kernels/cpu/parallel.hpp>

namespace tessera::cpu {

inline double sum_of_squares(const float* g, std::size_t n) {
  constexpr std::int64_t chunk = 1 << 16;
  const std::int64_t nc = (static_cast<std::int64_t>(n) + chunk - 1) / chunk;
  std::vector<double> part(static_cast<std::size_t>(nc), 0.0);
  parallel_for(nc, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t s = c * chunk, e = std::min<std::int64_t>(static_cast<std::int64_t>(n), s + chunk);
      double acc[8] = {};
      std::int64_t i = s;
      for (; i + 8 <= e; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(g[i + k]) * g[i + k];
      double d = 0.0;
      for (int k = 0; k < 8; ++k) d += acc[k];
      for (; i < e; ++i) d += static_cast<double>(g[i]) * g[i];
      part[static_cast<std::size_t>(c)] = d;
    }
  });
  double total = 0.0;
  for (double p : part) total += p;
  return total;
}

inline float global_norm(const float* g, std::size_t n) {
  return static_cast<float>(std::sqrt(sum_of_squares(g, n)));
}

/// Multiplies g by s.
inline void scale_inplace(float* g, std::size_t n, float s) {
  parallel_for(static_cast<std::int64_t>(n), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) g[i] *= s;
  }, 1 << 14);
}

/// Clips to max_norm given the global norm (computed, possibly across ranks, by the
/// caller). Returns the coefficient applied (1 when no clipping happened).
inline float clip_by_norm(float* g, std::size_t n, float norm, float max_norm) {
  const float coef = max_norm / (norm + 1e-6f);
  if (coef >= 1.0f) return 1.0f;
  scale_inplace(g, n, coef);
  return coef;
}

/// Global norm of g, then clipping to max_norm (max_norm <= 0: no clipping). Returns the
/// norm before clipping, as torch.
inline float clip_grad_norm(float* g, std::size_t n, float max_norm) {
  const float norm = global_norm(g, n);
  if (max_norm > 0.0f) clip_by_norm(g, n, norm, max_norm);
  return norm;
}

}  // namespace tessera::cpu
