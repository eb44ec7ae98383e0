// tessera/kernels/cpu/float8.hpp: Float8 training's scales and casts of row-major
// [rows, cols] f32 matrices (torchao's dynamic scaling; docs/kernels.md, "Float8 numerics").
//
//   amax   = max |x| over the scaled group (NaN propagates, as torch.max)
//   scale  = max_finite(target) / max(amax, 1e-12), computed in double and rounded to
//            float (torchao's amax_to_scale); with power-of-two rounding
//            2^floor(log2(scale)) on the float (torchao's _round_scale_down_to_power_of_2)
//   bits   = target(x * scale), the product in float, the cast saturating and round to
//            nearest even (torchao's tensor.to(float32) * scale, then to_fp8_saturated)
//   value  = float(bits) / scale, the division in float (the operand torchao's emulated
//            GEMM multiplies: a._data.float() / a._scale)
// Groups: tensorwise (one scale), per_row (one scale per row: amax over the columns) and
// per_column (one scale per column: amax over the rows). A GEMM operand is always scaled
// along its reduction dim, so per_row or per_column follows from which dim the GEMM
// reduces; f8_linear_casts_of() gives each recipe's casts for the three GEMMs of a linear.
//
// The CPU path emulates Float8: the GEMM stays f32 and consumes the dequantized values
// (f8_quantize_dequantize); the raw bytes and scales (f8_quantize, f8_scales) are what an
// FP8 all-gather moves and what an FP8 GEMM would consume.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include <tessera/core/dtype.hpp>
#include <tessera/core/error.hpp>
#include <tessera/core/float8.hpp>
#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cpu {

// ---- casts as values ----------------------------------------------------------------------

/// Which elements share a scale.
enum class f8_granularity : std::uint8_t {
  tensorwise,  ///< the whole matrix (torchao: TENSORWISE)
  per_row,     ///< each row; amax over the columns (torchao: AXISWISE, axiswise_dim=-1)
  per_column,  ///< each column; amax over the rows (torchao: AXISWISE, axiswise_dim=0)
};

/// How the scale is rounded after max_finite / amax.
enum class f8_scale_rounding : std::uint8_t {
  none,          ///< the float nearest to the quotient
  power_of_two,  ///< 2^floor(log2(scale)) (torchao's round_scales_to_power_of_2)
};

/// How one operand is cast to FP8.
struct f8_cast {
  dtype target = dtype::f8_e4m3fn;  ///< dtype::f8_e4m3fn or dtype::f8_e5m2
  f8_granularity granularity = f8_granularity::tensorwise;
  f8_scale_rounding rounding = f8_scale_rounding::none;
  friend constexpr bool operator==(const f8_cast&, const f8_cast&) = default;
};

/// torchao's three recipes (Float8LinearRecipeName; core/float8.hpp).
using tessera::f8_recipe;

/// The casts of one linear y = x W^T in tessera's storage (x: input [N, C], W: weight
/// [OC, C], dy: grad_output [N, OC]), one per operand of each GEMM, as torchao's
/// Float8LinearConfig names them. std::nullopt: that operand stays f32 (high precision).
struct f8_linear_casts {
  // output = input . weight^T; reduces over C.
  std::optional<f8_cast> input;
  std::optional<f8_cast> weight;
  // grad_input = grad_output . weight; reduces over OC.
  std::optional<f8_cast> grad_output;
  std::optional<f8_cast> weight_for_grad_input;
  // grad_weight = grad_output^T . input; reduces over N.
  std::optional<f8_cast> grad_output_for_grad_weight;
  std::optional<f8_cast> input_for_grad_weight;
  friend constexpr bool operator==(const f8_linear_casts&, const f8_linear_casts&) = default;
};

/// Each recipe's casts, as torchao's Float8LinearConfig.from_recipe_name (torchao/float8/
/// config.py) and the axiswise dims of matmul_with_hp_or_float8_args (float8_linear.py),
/// translated to tessera's row-major storage:
///   tensorwise          one scale per tensor; input and weight e4m3, grad_output e5m2;
///                       scales not rounded.
///   rowwise             all e4m3, power-of-two scales; every operand scaled along its
///                       GEMM's reduction dim: input and weight per row for the output,
///                       grad_output per row and weight per column for grad_input,
///                       grad_output and input per column for grad_weight.
///   rowwise_with_gw_hp  output as rowwise; grad_input from grad_output per row (e4m3)
///                       and the weight tensorwise (e4m3); grad_weight in f32; power-of-two
///                       scales.
constexpr f8_linear_casts f8_linear_casts_of(f8_recipe r) noexcept {
  using g = f8_granularity;
  constexpr dtype e4m3 = dtype::f8_e4m3fn, e5m2 = dtype::f8_e5m2;
  switch (r) {
    case f8_recipe::tensorwise: {
      const f8_cast e4{e4m3, g::tensorwise, f8_scale_rounding::none};
      const f8_cast e5{e5m2, g::tensorwise, f8_scale_rounding::none};
      return {e4, e4, e5, e4, e5, e4};
    }
    case f8_recipe::rowwise: {
      const f8_cast row{e4m3, g::per_row, f8_scale_rounding::power_of_two};
      const f8_cast col{e4m3, g::per_column, f8_scale_rounding::power_of_two};
      return {row, row, row, col, col, col};
    }
    case f8_recipe::rowwise_with_gw_hp: {
      const f8_cast row{e4m3, g::per_row, f8_scale_rounding::power_of_two};
      const f8_cast tensor{e4m3, g::tensorwise, f8_scale_rounding::power_of_two};
      return {row, row, row, tensor, std::nullopt, std::nullopt};
    }
  }
  return {};
}

/// Largest finite value of an FP8 dtype: 448 (e4m3fn), 57344 (e5m2); 0 for other dtypes.
constexpr float f8_max_finite(dtype t) noexcept {
  return t == dtype::f8_e4m3fn ? f8_e4m3fn::max_finite
                               : (t == dtype::f8_e5m2 ? f8_e5m2::max_finite : 0.0f);
}

/// Number of scales of a [rows, cols] matrix: 1, rows or cols.
constexpr std::int64_t f8_scale_count(f8_granularity g, std::int64_t rows, std::int64_t cols) noexcept {
  return g == f8_granularity::tensorwise ? 1 : (g == f8_granularity::per_row ? rows : cols);
}

/// Which dim of a linear other ranks hold the rest of (tensor parallel): its output features
/// (column-parallel: the weight's rows and the output gradient's columns are split) or its
/// input features (row-parallel: the input's and the weight's columns). A cast whose scale
/// groups span the split dim needs its amaxes reduced across those ranks.
enum class f8_split : std::uint8_t { none, out_features, in_features };

/// The three GEMMs of a linear.
enum class f8_gemm : std::uint8_t { output, grad_input, grad_weight };

/// An operand of one of a linear's GEMMs: its shape [rows, cols], whether other ranks hold
/// more of its rows / columns (f8_split), and its cast (nullopt: high precision).
struct f8_operand_of {
  std::int64_t rows = 0, cols = 0;
  bool rows_split = false, cols_split = false;
  std::optional<f8_cast> cast;

  /// True when the cast's scale groups span other ranks (their amaxes must be reduced).
  constexpr bool spans() const {
    if (!cast) return false;
    if (cast->granularity == f8_granularity::tensorwise) return rows_split || cols_split;
    return cast->granularity == f8_granularity::per_row ? cols_split : rows_split;
  }
  /// The amaxes a reduction moves: one per scale.
  constexpr std::int64_t scales() const { return cast ? f8_scale_count(cast->granularity, rows, cols) : 0; }
};

/// Whether a Float8 linear's backward writes a weight gradient instead of adding to it
/// (kernels/pending_gradients.hpp; float8_linear.hpp's groups): none by default.
struct f8_adds_to_weights {
  bool operator()(float*, std::int64_t) const noexcept { return false; }
};

/// The two operands of GEMM `g` of a linear [N, C] -> [N, OC] (x [N, C], W [OC, C], dy [N, OC]):
/// output: x, W; grad_input: dy, W; grad_weight: dy, x -- in the order the GEMM takes them.
constexpr std::array<f8_operand_of, 2> f8_gemm_operands(f8_gemm g, const f8_linear_casts& c, std::int64_t N,
                                                       std::int64_t C, std::int64_t OC, f8_split split) {
  const bool in = split == f8_split::in_features, of = split == f8_split::out_features;
  switch (g) {
    case f8_gemm::output: return {{{N, C, false, in, c.input}, {OC, C, of, in, c.weight}}};
    case f8_gemm::grad_input: return {{{N, OC, false, of, c.grad_output}, {OC, C, of, in, c.weight_for_grad_input}}};
    case f8_gemm::grad_weight:
      return {{{N, OC, false, of, c.grad_output_for_grad_weight}, {N, C, false, in, c.input_for_grad_weight}}};
  }
  return {};
}


// ---- amax and scales ----------------------------------------------------------------------

namespace detail {
/// max(m, |v|) with NaN sticking (as torch.max): kernels/pointwise.hpp's, the CUDA kernels' too.
inline float abs_max_step(float m, float v) noexcept { return pointwise::abs_max_step(m, v); }
}  // namespace detail

/// max |x[i]| over n values; NaN if any is NaN; 0 for n == 0.
inline float abs_max(const float* x, std::int64_t n) {
  constexpr std::int64_t chunk = 1 << 14;
  const std::int64_t nc = (n + chunk - 1) / chunk;
  std::vector<float> part(static_cast<std::size_t>(std::max<std::int64_t>(nc, 1)), 0.0f);
  parallel_for(nc, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      float m = 0.0f;
      for (std::int64_t i = c * chunk, e = std::min(n, (c + 1) * chunk); i < e; ++i)
        m = detail::abs_max_step(m, x[i]);
      part[static_cast<std::size_t>(c)] = m;
    }
  });
  float m = 0.0f;
  for (float p : part) m = detail::abs_max_step(m, p);
  return m;
}

/// out[r] = max over c of |x[r, c]| (row-major [rows, cols]).
inline void abs_max_rows(float* out, const float* x, std::int64_t rows, std::int64_t cols) {
  parallel_for(rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      float m = 0.0f;
      for (std::int64_t c = 0; c < cols; ++c) m = detail::abs_max_step(m, x[r * cols + c]);
      out[r] = m;
    }
  }, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(cols, 1)));
}

/// out[c] = max over r of |x[r, c]| (row-major [rows, cols]).
inline void abs_max_cols(float* out, const float* x, std::int64_t rows, std::int64_t cols) {
  parallel_for(cols, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) out[c] = 0.0f;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = c0; c < c1; ++c) out[c] = detail::abs_max_step(out[c], x[r * cols + c]);
  }, 64);
}

/// 2^floor(log2(s)) on the float, as torchao rounds scales to powers of two:
/// pointwise::pow2_floor_as_log2f, which the CUDA kernels share (a scale just below a power of
/// two 2^k whose float log2 rounds to k keeps 2^k).
inline float f8_round_scale_down_to_power_of_two(float s) noexcept { return pointwise::pow2_floor_as_log2f(s); }

/// torchao's amax_to_scale: max_finite / max(amax, 1e-12) in double, rounded to float,
/// then rounded to a power of two if asked (pointwise::f8_scale, shared with the CUDA
/// kernels). A NaN amax gives a NaN scale.
inline float f8_scale_from_amax(float amax, dtype target, f8_scale_rounding rounding) {
  check(target == dtype::f8_e4m3fn || target == dtype::f8_e5m2,
        "f8_scale_from_amax: the target must be dtype::f8_e4m3fn or dtype::f8_e5m2");
  return pointwise::f8_scale(amax, f8_max_finite(target), rounding == f8_scale_rounding::power_of_two);
}

/// The amaxes of x [rows, cols] under granularity g: f8_scale_count(g, rows, cols) floats
/// (one; one a row; one a column), what f8_scales turns into scales.
inline void f8_amax(float* amax, const float* x, std::int64_t rows, std::int64_t cols, f8_granularity g) {
  switch (g) {
    case f8_granularity::tensorwise: amax[0] = abs_max(x, rows * cols); break;
    case f8_granularity::per_row: abs_max_rows(amax, x, rows, cols); break;
    case f8_granularity::per_column: abs_max_cols(amax, x, rows, cols); break;
  }
}

/// The default amax reduction: none (every scale group is held whole by this rank).
struct f8_local_amax {
  void operator()(float*, std::int64_t) const noexcept {}
};
/// True when R is f8_local_amax: no amax leaves this rank (the CUDA path then keeps the
/// amaxes and scales on the device).
template <class R>
inline constexpr bool f8_reduces_nothing = std::is_same_v<std::remove_cvref_t<R>, f8_local_amax>;

/// The scales of x [rows, cols] under cast c: f8_scale_count(c.granularity, rows, cols)
/// floats written to `scales`. `reduce(amax, n)` sees the n amaxes before they become scales:
/// where other ranks hold the rest of a group (tensor parallel), it takes their max across
/// those ranks, as torchao's amax of a sharded DTensor does.
template <class Reduce = f8_local_amax>
void f8_scales(float* scales, const float* x, std::int64_t rows, std::int64_t cols, f8_cast c, Reduce&& reduce = {}) {
  const std::int64_t n = f8_scale_count(c.granularity, rows, cols);
  f8_amax(scales, x, rows, cols, c.granularity);
  reduce(scales, n);
  for (std::int64_t i = 0; i < n; ++i) scales[i] = f8_scale_from_amax(scales[i], c.target, c.rounding);
}

// ---- casts --------------------------------------------------------------------------------

namespace detail {
/// Calls f(F8{}) with the element type of an FP8 dtype.
template <class F>
void with_f8_type(dtype t, F&& f) {
  if (t == dtype::f8_e4m3fn) f(f8_e4m3fn{});
  else if (t == dtype::f8_e5m2) f(f8_e5m2{});
  else check(false, "Float8 cast: the target must be dtype::f8_e4m3fn or dtype::f8_e5m2");
}

/// g(r, c0, c1, scale(r, c)) over the rows of [rows, cols], in parallel; s(r, c) is the
/// scale of element (r, c) under granularity gr.
template <class G>
void for_each_row_scaled(std::int64_t rows, std::int64_t cols, f8_granularity gr, const float* scales, G&& g) {
  parallel_for(rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      switch (gr) {
        case f8_granularity::tensorwise: g(r, [s = scales[0]](std::int64_t) { return s; }); break;
        case f8_granularity::per_row: g(r, [s = scales[r]](std::int64_t) { return s; }); break;
        case f8_granularity::per_column: g(r, [scales](std::int64_t c) { return scales[c]; }); break;
      }
    }
  }, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(cols, 1)));
}
}  // namespace detail

/// bits[i] = target(x[i] * scale): the FP8 codes of x [rows, cols] (saturating, round to
/// nearest even) under the scales of f8_scales.
inline void f8_quantize(std::uint8_t* bits, const float* x, const float* scales, std::int64_t rows,
                        std::int64_t cols, f8_cast c) {
  detail::with_f8_type(c.target, [&]<class F8>(F8) {
    detail::for_each_row_scaled(rows, cols, c.granularity, scales, [&](std::int64_t r, auto scale) {
      for (std::int64_t j = 0; j < cols; ++j) bits[r * cols + j] = F8(x[r * cols + j] * scale(j)).bits;
    });
  });
}

/// out[i] = float(bits[i]) / scale: the values an FP8 GEMM multiplies.
inline void f8_dequantize(float* out, const std::uint8_t* bits, const float* scales, std::int64_t rows,
                          std::int64_t cols, f8_cast c) {
  detail::with_f8_type(c.target, [&]<class F8>(F8) {
    detail::for_each_row_scaled(rows, cols, c.granularity, scales, [&](std::int64_t r, auto scale) {
      for (std::int64_t j = 0; j < cols; ++j)
        out[r * cols + j] = static_cast<float>(F8::from_bits(bits[r * cols + j])) / scale(j);
    });
  });
}

/// Where f8_quantize_dequantize also leaves the raw cast (each pointer may be null):
/// rows*cols codes, and f8_scale_count(...) scales.
struct f8_raw {
  std::uint8_t* bits = nullptr;
  float* scales = nullptr;
};

/// out = dequantize(quantize(x)): x [rows, cols] through the FP8 cast c and back, the f32
/// operand of the emulated GEMM. out may alias x. Optionally keeps the codes and scales;
/// `reduce` as f8_scales.
template <class Reduce = f8_local_amax>
void f8_quantize_dequantize(float* out, const float* x, std::int64_t rows, std::int64_t cols, f8_cast c,
                            f8_raw raw = {}, Reduce&& reduce = {}) {
  std::vector<float> own;
  float* scales = raw.scales;
  if (!scales) {
    own.resize(static_cast<std::size_t>(f8_scale_count(c.granularity, rows, cols)));
    scales = own.data();
  }
  f8_scales(scales, x, rows, cols, c, reduce);
  detail::with_f8_type(c.target, [&]<class F8>(F8) {
    detail::for_each_row_scaled(rows, cols, c.granularity, scales, [&](std::int64_t r, auto scale) {
      if (raw.bits) {
        for (std::int64_t j = 0; j < cols; ++j) {
          const float s = scale(j);
          const F8 q(x[r * cols + j] * s);
          raw.bits[r * cols + j] = q.bits;
          out[r * cols + j] = static_cast<float>(q) / s;
        }
      } else {  // the same values without the bytes, in a loop that vectorizes
        for (std::int64_t j = 0; j < cols; ++j) {
          const float s = scale(j);
          out[r * cols + j] = round_to_f8<F8>(x[r * cols + j] * s) / s;
        }
      }
    });
  });
}

}  // namespace tessera::cpu
