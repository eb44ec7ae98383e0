// tessera/kernels/cpu/detail/vec_math.hpp: branch-free float math that compilers vectorize
// (no libm calls inside hot loops).
#pragma once

#include <cstdint>

#include <tessera/kernels/pointwise.hpp>

namespace tessera::cpu::detail {

/// e^x, branch-free (kernels/pointwise.hpp: the one the CUDA kernels share).
inline float fast_exp(float x) noexcept { return pointwise::fast_exp(x); }

// Reductions with 16 independent accumulators: without -ffast-math a compiler may not
// reorder a float sum, so a plain `s += x[i]` loop runs one add at a time; 16 lanes let it
// use full vectors (and change the rounding only at the level of f32 summation error).
inline constexpr int lanes = 16;

inline float reduce_max(const float* x, std::int64_t n) noexcept {
  float acc[lanes];
  for (int k = 0; k < lanes; ++k) acc[k] = -3.402823466e38f;
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (int k = 0; k < lanes; ++k) acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
  float m = -3.402823466e38f;
  for (int k = 0; k < lanes; ++k) m = acc[k] > m ? acc[k] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

inline float dot(const float* a, const float* b, std::int64_t n) noexcept {
  float acc[lanes] = {};
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (int k = 0; k < lanes; ++k) acc[k] += a[i + k] * b[i + k];
  float s = 0.0f;
  for (int k = 0; k < lanes; ++k) s += acc[k];
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// 1 / (1 + e^-x).
inline float sigmoid(float x) noexcept { return pointwise::sigmoid(x); }

/// x[i] = e^(x[i] - m); returns the sum of the new values.
inline float exp_sub_inplace(float* x, std::int64_t n, float m) noexcept {
  float acc[lanes] = {};
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (int k = 0; k < lanes; ++k) {
      const float e = fast_exp(x[i + k] - m);
      x[i + k] = e;
      acc[k] += e;
    }
  float s = 0.0f;
  for (int k = 0; k < lanes; ++k) s += acc[k];
  for (; i < n; ++i) {
    x[i] = fast_exp(x[i] - m);
    s += x[i];
  }
  return s;
}

/// The sum of e^(x[i] - m).
inline float sum_exp_sub(const float* x, std::int64_t n, float m) noexcept {
  float acc[lanes] = {};
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (int k = 0; k < lanes; ++k) acc[k] += fast_exp(x[i + k] - m);
  float s = 0.0f;
  for (int k = 0; k < lanes; ++k) s += acc[k];
  for (; i < n; ++i) s += fast_exp(x[i] - m);
  return s;
}

}  // namespace tessera::cpu::detail
