// tessera/kernels/cpu/detail/vec_math.hpp: branch-free float math that compilers vectorize
// (no libm calls inside hot loops).
#pragma once

#include <bit>
#include <cstdint>

namespace tessera::cpu::detail {

/// e^x for float, relative error below ~2e-7 on [-87, 88]; inputs below -87.3 give a
/// value under 1e-37 (not 0), above 88.3 are clamped. No branches, so loops vectorize.
inline float fast_exp(float x) noexcept {
  x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);  // NaN passes through (both comparisons false)
  const float xe = x == x ? x : 0.0f;  // the exponent from a finite value: NaN reaches the result through r
  const float big = 12582912.0f;  // 1.5 * 2^23: adding and subtracting rounds to integer
  const float n = (xe * 1.44269504088896341f + big) - big;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t e = static_cast<std::int32_t>(n) + 127;
  return p * std::bit_cast<float>(static_cast<std::uint32_t>(e) << 23);
}

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
inline float sigmoid(float x) noexcept { return 1.0f / (1.0f + fast_exp(-x)); }

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
