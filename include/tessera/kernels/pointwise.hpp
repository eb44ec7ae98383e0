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
//   pow2_floor_as_log2f(s)       2^floor(log2f(s)) from s's bits, no libm: Float8's
//                                power-of-two scale rounding (torchao's, on the float)
//   f8_scale(amax, max_finite, pow2)  Float8's scale of a group from its amax
#pragma once

#include <cmath>
#include <cstdint>

#include <tessera/core/config.hpp>
#include <tessera/core/float8.hpp>

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

namespace detail {
/// 1 - 2^-h for the tiny h of pow2_floor_as_log2f (h <= 2^-17): the series of -expm1(-h ln 2)
/// to its third term, whose next one is below double's rounding.
TESSERA_HOST_DEVICE inline double one_minus_exp2_neg(double h) noexcept {
  const double x = h * 0.69314718055994530942;
  return x - x * x / 2 + x * x * x / 6;
}
/// The index of x's highest set bit (x > 0).
TESSERA_HOST_DEVICE inline int top_bit(std::uint32_t x) noexcept {
  int t = 0;
  while (x >>= 1) ++t;
  return t;
}
}  // namespace detail

/// exp2(floor(log2(s))) for float s, as the float functions compute it with a correctly
/// rounded log2f -- torchao's _round_scale_down_to_power_of_2 on the float -- from s's bits
/// alone, so the host and the GPU give the same bits (no libm: the device's log2f is not
/// correctly rounded). It is the largest power of two not above s, except where log2(s)
/// lies so close below an integer v that log2f rounds to v: s within about 2^-21 (relative)
/// below a power of two 2^v with |v| >= 2 keeps 2^v (nextafter(1024, 0) gives 1024).
/// 0 gives 0, infinity infinity, NaN and negative values NaN. tests/kernels/test_pointwise.cpp
/// checks it against std::exp2(std::floor(std::log2(s))) on every float near a power of two.
TESSERA_HOST_DEVICE inline float pow2_floor_as_log2f(float s) noexcept {
  if (s != s) return s;
  if (s < 0.0f) return tessera::detail::bit_cast<float>(0x7fc00000u);  // log2 of a negative: NaN
  if (s == 0.0f) return 0.0f;
  const std::uint32_t bits = tessera::detail::bit_cast<std::uint32_t>(s);
  const int biased = static_cast<int>(bits >> 23);
  if (biased == 255) return s;  // infinity
  // s = M 2^(E - t), M's top bit t: 2^E <= s < 2^(E + 1)
  std::uint32_t M = bits & 0x7fffffu;
  int t = 23, E = biased - 127;
  if (biased == 0) {  // subnormal
    t = detail::top_bit(M);
    E = t - 149;
  } else {
    M |= 0x800000u;
  }
  // v = E + 1; log2(s) = v - eps, eps = -log2(1 - gap), gap = (2^(t+1) - M) / 2^(t+1).
  // log2f rounds v - eps to v when eps is under h, half the spacing of floats beside v on
  // eps's side: eps < h <=> 1 - gap > 2^-h <=> gap < 1 - 2^-h.
  const int v = E + 1;
  bool up = false;
  if (v != 0) {
    const int u = v > 0 ? v : -v;
    const int j = detail::top_bit(static_cast<std::uint32_t>(u));  // 2^j <= u < 2^(j + 1)
    // floats just below v > 0: spacing 2^(j - 24) when v = 2^j, else 2^(j - 23); just
    // beyond -u (v < 0): 2^(j - 23). h is half of it.
    const int spacing_exp = (v > 0 && u == (1 << j)) ? j - 24 : j - 23;
    const double h = tessera::detail::bit_cast<double>(static_cast<std::uint64_t>(1023 + spacing_exp - 1) << 52);
    const double gap_numerator = static_cast<double>((std::uint64_t{1} << (t + 1)) - M);
    const double bound = detail::one_minus_exp2_neg(h) * static_cast<double>(std::uint64_t{1} << (t + 1));
    up = gap_numerator < bound;
  }
  const int k = up ? v : E;  // the result 2^k
  if (k >= 128) return tessera::detail::bit_cast<float>(0x7f800000u);  // 2^128: infinity, as exp2f
  if (k >= -126) return tessera::detail::bit_cast<float>(static_cast<std::uint32_t>(k + 127) << 23);
  return tessera::detail::bit_cast<float>(std::uint32_t{1} << (k + 149));  // subnormal power of two
}

/// Float8's scale of a group from its amax (torchao's amax_to_scale): max_finite /
/// max(amax, 1e-12) in double, rounded to float; with `pow2`, pow2_floor_as_log2f of that. A
/// NaN amax gives a NaN scale. `max_finite` is the target's (448 for e4m3fn, 57344 for e5m2).
TESSERA_HOST_DEVICE inline float f8_scale(float amax, float max_finite, bool pow2) noexcept {
  const double a = static_cast<double>(amax);
  constexpr double floor = 1e-12;  // torchao's EPS: an all-zero group keeps a finite scale
  const double floored = a != a ? a : (a > floor ? a : floor);
  const float s = static_cast<float>(static_cast<double>(max_finite) / floored);
  return pow2 ? pow2_floor_as_log2f(s) : s;
}

}  // namespace tessera::pointwise
