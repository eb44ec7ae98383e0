// tessera/kernels/pointwise.hpp: the per-element math the CPU kernels (kernels/cpu/) and the
// CUDA kernels (kernels/cuda/) share, as TESSERA_HOST_DEVICE functions (`__host__
// __device__` under nvcc, plain inline functions otherwise).
//
// One formula, one place: the CPU kernels' loops call these functions (the compiler inlines
// and vectorizes them as before: same operations in the same order, so the same bits), and
// the CUDA kernels call the same functions per thread. The formulas are checked on the host
// (tests/kernels/test_pointwise.cpp) against double precision, so most of the GPU path's
// numerics are verified without a GPU; what a GPU adds is its own rounding of the same
// operations (nvcc contracts a * b + c into FMAs by default), which the GPU tests bound.
//
//   fast_exp(x)                  e^x, branch-free, relative error < 2e-7 on [-87, 88]
//   sigmoid(x)                   1 / (1 + e^-x)
//   swiglu(h1, h3)               silu(h1) * h3, silu(x) = x sigmoid(x)
//   swiglu_grad(g, h1, h3)       {d h1, d h3} of swiglu given its output gradient g
//   rope_rotate(a, b, c, s)      the pair (a, b) rotated by the angle whose cos, sin are c, s
//   adamw(p, m, v, g, k)         one torch.optim.AdamW step of an element (adamw_scalars k)
//   rmsnorm_scale(x, r, w)       x * rstd * weight
//   rmsnorm_grad(x, g, w, r, k)  d x of RMSNorm: r g w - k x, k = r^3 mean(g w x)
//   abs_max_step(m, v)           max(m, |v|), NaN sticking: Float8's amax
#pragma once

#include <cmath>
#include <cstdint>

#include <tessera/core/config.hpp>

namespace tessera::pointwise {

/// e^x for float, relative error below ~2e-7 on [-87, 88]; inputs below -87.3 give a value
/// under 1e-37 (not 0), above 88.3 are clamped. No branches, so CPU loops vectorize; the
/// same bits on a GPU (no libm call: the device's expf differs in the last bits).
TESSERA_HOST_DEVICE inline float fast_exp(float x) noexcept {
  x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);  // NaN passes through (both comparisons false)
  const float xe = x == x ? x : 0.0f;  // the exponent from a finite value: NaN reaches the result through r
  const float big = 12582912.0f;       // 1.5 * 2^23: adding and subtracting rounds to integer
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
  return p * __builtin_bit_cast(float, static_cast<std::uint32_t>(e) << 23);
}

/// 1 / (1 + e^-x).
TESSERA_HOST_DEVICE inline float sigmoid(float x) noexcept { return 1.0f / (1.0f + fast_exp(-x)); }

/// SwiGLU's pointwise part: silu(h1) * h3.
TESSERA_HOST_DEVICE inline float swiglu(float h1, float h3) noexcept { return h1 * sigmoid(h1) * h3; }

/// Two results of one element.
struct pair {
  float first, second;
};

/// The gradients {d h1, d h3} of swiglu(h1, h3) given its output's gradient g:
/// d h1 = g h3 silu'(h1) with silu'(x) = s (1 + x (1 - s)), d h3 = g silu(h1).
TESSERA_HOST_DEVICE inline pair swiglu_grad(float g, float h1, float h3) noexcept {
  const float s = sigmoid(h1);
  return {g * h3 * s * (1.0f + h1 * (1.0f - s)), g * h1 * s};
}

/// The pair (a, b) rotated by an angle with cosine c and sine s (RoPE; the inverse rotation
/// for backward is the same with -s): {a c - b s, a s + b c}.
TESSERA_HOST_DEVICE inline pair rope_rotate(float a, float b, float c, float s) noexcept {
  return {a * c - b * s, a * s + b * c};
}

/// AdamW's per-step scalars (kernels/cpu/adamw.hpp computes them once per step):
/// step_size = lr / (1 - b1^t), bc2_sqrt = sqrt(1 - b2^t), decay = 1 - lr wd.
struct adamw_scalars {
  float step_size, bc2_sqrt, decay, beta1, beta2, eps;
};

/// One AdamW step of an element, as torch.optim.AdamW: p <- p (1 - lr wd);
/// m <- m + (1 - b1)(g - m); v <- b2 v + (1 - b2) g^2; p <- p - step_size m / (sqrt(v) / bc2_sqrt + eps).
TESSERA_HOST_DEVICE inline void adamw(float& p, float& m, float& v, float g, const adamw_scalars& k) noexcept {
  const float mi = m + (1.0f - k.beta1) * (g - m);
  const float vi = k.beta2 * v + (1.0f - k.beta2) * g * g;
  m = mi;
  v = vi;
  p = p * k.decay;  // two statements, as PyTorch's two updates (no contraction across them)
  p -= k.step_size * mi / (std::sqrt(vi) / k.bc2_sqrt + k.eps);
}

/// RMSNorm's output element: x * rstd * weight.
TESSERA_HOST_DEVICE inline float rmsnorm_scale(float x, float rstd, float w) noexcept { return x * rstd * w; }

/// RMSNorm's input gradient element given the row's k = rstd^3 mean_c(g w x):
/// rstd g w - k x.
TESSERA_HOST_DEVICE inline float rmsnorm_grad(float x, float g, float w, float rstd, float k) noexcept {
  return rstd * g * w - k * x;
}

/// max(m, |v|) with NaN sticking (as torch.max): once m is NaN it stays NaN -- the step of
/// Float8's amax reductions (kernels/cpu/float8.hpp, kernels/cuda/float8.cuh).
TESSERA_HOST_DEVICE inline float abs_max_step(float m, float v) noexcept {
  const float a = std::fabs(v);
  return (a > m || a != a) && m == m ? a : m;
}

}  // namespace tessera::pointwise
