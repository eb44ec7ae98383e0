// tessera/kernels/cuda/float8_linear.cuh: a linear's three GEMMs with Float8 operands on the
// GPU, with cpu::f8_matmuls_forward / _backward's interface and casts (kernels/cpu/
// float8_linear.hpp): every operand through its recipe's cast, the amaxes of groups that span
// ranks through `reduce`.
// tessera-requires: cuda (compiled by nvcc: include from a .cu translation unit)
//
// A GEMM runs on the FP8 tensor cores (cuBLASLt, gemm.hpp) when both its operands are cast,
// with scales cuBLASLt applies -- one per tensor, or one per row of its output's rows and
// columns (outer vectors: torchao's rowwise; sm_90 and newer) -- its sizes are multiples of
// 16 and the GPU is sm_89 or newer. The codes are quantized on the device (float8.cuh),
// transposed where the TN layout needs them (cast and transposed in one pass), and the
// dequantization scales are 1 / scale; the scales are computed on the device (no wait for
// it) unless an amax group spans ranks. Otherwise -- a high-precision operand
// (rowwise_with_gw_hp's grad_weight), a scale along the reduction dim, odd sizes, an older
// GPU -- it runs the CPU's emulation: the cast operands quantized and dequantized into f32 on
// the device, then backend K's GEMM. Both give the values the CPU's emulation multiplies; the
// FP8 GEMM accumulates them in another order and applies the scales to the sums
// (docs/cuda.md).
//
// The buffers `a` and `b` are the model's f8a / f8b (llama_shard.hpp: N x max(C, OC) and
// max(OC, N) x max(C, OC) floats): the emulation's f32 operands, or the codes as bytes
// (transposed where the GEMM takes them so). `ws` gives the cuBLASLt handle and room for two
// operands' scales.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>

#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/kernels/cuda/float8.cuh>
#include <tessera/kernels/cuda/gemm.hpp>
#include <tessera/kernels/cuda/launch.cuh>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/linears.hpp>

namespace tessera::cuda {

/// What the Float8 linears need besides their buffers: the GEMM handle and device floats for
/// the scales of a GEMM's two operands (max(N, C, OC) each).
struct f8_workspace {
  blas* gemm = nullptr;
  float* scales_a = nullptr;
  float* scales_b = nullptr;
};

namespace detail {
template <class F8>
__global__ void f8_quantize_dequantize_k(float* out, const float* x, const float* scales, std::int64_t rows,
                                         std::int64_t cols, cpu::f8_granularity g) {
  for_each_scaled(rows, cols, scales, g, [&](std::int64_t r, std::int64_t c, float s) {
    out[r * cols + c] = static_cast<float>(F8(x[r * cols + c] * s)) / s;
  });
}

inline cudaDataType_t cuda_f8_type(dtype t) { return t == dtype::f8_e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3; }

/// True when the GEMM C[m, n] (reduction k) of operands A (scales per `a_rows`: along m) and
/// B (along n) runs on the FP8 tensor cores: both cast, tensorwise both or along m and n
/// both (`a_outer`, `b_outer` the granularities that are), sizes multiples of 16, sm_89+.
inline bool fp8_gemm(const cpu::f8_operand_of& A, cpu::f8_granularity a_outer, const cpu::f8_operand_of& B,
                     cpu::f8_granularity b_outer, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (!A.cast || !B.cast || m % 16 || n % 16 || k % 16 || compute_capability() < 89) return false;
  if (A.cast->target == dtype::f8_e5m2 && B.cast->target == dtype::f8_e5m2) return false;  // cuBLASLt has no e5m2 x e5m2
  const auto ga = A.cast->granularity, gb = B.cast->granularity;
  using g = cpu::f8_granularity;
  if (ga == g::tensorwise && gb == g::tensorwise) return true;
  // outer-vector scales: cuBLASLt has them on Hopper (sm_90) and newer
  return ga == a_outer && gb == b_outer && compute_capability() >= 90;
}
inline bool rowwise(const cpu::f8_operand_of& A) { return A.cast->granularity != cpu::f8_granularity::tensorwise; }

/// The amax reduction of an operand: `reduce` when its scale groups span ranks, else none.
template <class Reduce, class F>
void with_reduce(const cpu::f8_operand_of& o, Reduce& reduce, F&& f) {
  if (o.spans())
    f(reduce);
  else
    f(cpu::f8_local_amax{});
}
}  // namespace detail

/// out = dequantize(quantize(x)) on the device under cast c (as cpu::f8_quantize_dequantize);
/// `scales` device scratch of f8_scale_count floats; `reduce` as f8_scales.
template <class Reduce = cpu::f8_local_amax>
void f8_quantize_dequantize(float* out, const float* x, std::int64_t rows, std::int64_t cols, cpu::f8_cast c,
                            float* scales, Reduce&& reduce = {}) {
  cuda::f8_scales(scales, x, rows, cols, c, reduce);
  if (rows == 0 || cols == 0) return;
  cpu::detail::with_f8_type(c.target, [&]<class F8>(F8) {
    TESSERA_LAUNCH(detail::rows_grid(rows, cols), detail::threads, 0, nullptr, detail::f8_quantize_dequantize_k<F8>)(
        out, x, scales, rows, cols, c.granularity);
  });
  detail::launched("cuda::f8_quantize_dequantize");
}

/// The FP8 codes of x [rows, cols] under cast c into `bits` ([cols, rows] when `transposed`),
/// and its dequantization scales (1 / scale) into `inverse`. Per-row scales of groups this
/// rank holds whole take one fused pass (f8_row_codes_k); the rest, f8_scales then a cast.
template <class Reduce>
void f8_codes(std::uint8_t* bits, float* inverse, const float* x, std::int64_t rows, std::int64_t cols, cpu::f8_cast c,
              Reduce&& reduce, bool transposed = false) {
  if constexpr (cpu::f8_reduces_nothing<Reduce>) {
    if (!transposed && c.granularity == cpu::f8_granularity::per_row) {  // a block a row, all in one pass
      if (rows == 0) return;
      const float max_finite = cpu::f8_max_finite(c.target);
      const bool pow2 = c.rounding == cpu::f8_scale_rounding::power_of_two;
      const bool fours = cols % 4 == 0 && detail::aligned(x, 16) && detail::aligned(bits, 4);  // then every row too
      cpu::detail::with_f8_type(c.target, [&]<class F8>(F8) {
        if (fours)
          TESSERA_LAUNCH(static_cast<unsigned>(rows), detail::threads, 0, nullptr, detail::f8_row_codes_k<F8, 4>)(
              reinterpret_cast<detail::u8_group<4>*>(bits), inverse, reinterpret_cast<const detail::f32_group<4>*>(x),
              cols / 4, max_finite, pow2);
        else
          TESSERA_LAUNCH(static_cast<unsigned>(rows), detail::threads, 0, nullptr, detail::f8_row_codes_k<F8, 1>)(
              reinterpret_cast<detail::u8_group<1>*>(bits), inverse, reinterpret_cast<const detail::f32_group<1>*>(x),
              cols, max_finite, pow2);
      });
      detail::launched("cuda::f8_codes");
      return;
    }
  }
  cuda::f8_scales(inverse, x, rows, cols, c, reduce);
  if (transposed)
    cuda::f8_quantize_transposed(bits, x, inverse, rows, cols, c);
  else
    cuda::f8_quantize(bits, x, inverse, rows, cols, c);
  const std::int64_t n = cpu::f8_scale_count(c.granularity, rows, cols);
  TESSERA_LAUNCH(detail::blocks_for(n), detail::threads, 0, nullptr, detail::reciprocal_k)(inverse, n);
  detail::launched("cuda::f8_codes");
}

namespace detail {
/// The emulation's operand: x itself without a cast, else quantized and dequantized into buf.
template <class Reduce>
const float* f8_operand(float* buf, const float* x, const cpu::f8_operand_of& o, float* scales, Reduce& reduce) {
  if (!o.cast) return x;
  with_reduce(o, reduce, [&](auto&& r) { cuda::f8_quantize_dequantize(buf, x, o.rows, o.cols, *o.cast, scales, r); });
  return buf;
}
template <class Reduce>
void codes_of(std::uint8_t* bits, float* inverse, const float* x, const cpu::f8_operand_of& o, Reduce& reduce,
              bool transposed = false) {
  with_reduce(o, reduce, [&](auto&& r) { cuda::f8_codes(bits, inverse, x, o.rows, o.cols, *o.cast, r, transposed); });
}
inline std::uint8_t* bytes(float* p) { return reinterpret_cast<std::uint8_t*>(p); }
}  // namespace detail

/// A group of linears on one input, as cpu::f8_matmuls_forward: l.out [N, l.OC] = q(inp [N,
/// C]) . q(l.w [l.OC, C])^T, the input's codes made once for the group when its linears'
/// GEMMs all take one path (FP8 GEMMs or the emulation; else one by one); K's GEMM when the
/// emulation runs.
template <class K, class Reduce = cpu::f8_local_amax>
void f8_matmuls_forward(const f8_workspace& ws, const float* inp, std::int64_t N, std::int64_t C,
                        std::span<const linear_out> ls, const cpu::f8_linear_casts& c, float* a, float* b,
                        cpu::f8_split split = cpu::f8_split::none, Reduce&& reduce = {}) {
  using g = cpu::f8_granularity;
  const auto operands = [&](const linear_out& l) {
    return cpu::f8_gemm_operands(cpu::f8_gemm::output, c, N, C, l.OC, split);
  };
  const auto fp8 = [&](const linear_out& l) {  // A = weight, B = inp
    const auto op = operands(l);
    return detail::fp8_gemm(op[1], g::per_row, op[0], g::per_row, l.OC, N, C);
  };
  const bool shared =
      std::all_of(ls.begin(), ls.end(), [&](const linear_out& l) { return fp8(l) == fp8(ls.front()); });
  bool ready = false;  // a holds the input's operand
  const float* x = nullptr;
  for (const linear_out& l : ls) {
    const auto op = operands(l);
    if (fp8(l)) {
      if (!ready) detail::codes_of(detail::bytes(a), ws.scales_b, inp, op[0], reduce);
      detail::codes_of(detail::bytes(b), ws.scales_a, l.w, op[1], reduce);
      matmul_forward_f8(*ws.gemm, l.out, detail::bytes(a), detail::cuda_f8_type(op[0].cast->target), ws.scales_b,
                        detail::bytes(b), detail::cuda_f8_type(op[1].cast->target), ws.scales_a, N, C, l.OC,
                        detail::rowwise(op[0]));
    } else {
      if (!ready) x = detail::f8_operand(a, inp, op[0], ws.scales_a, reduce);
      const float* w = detail::f8_operand(b, l.w, op[1], ws.scales_b, reduce);
      K::matmul_forward(l.out, x, w, N, C, l.OC);
    }
    ready = shared;
  }
}
/// The group's backward, as cpu::f8_matmuls_backward: the weight gradients first (the input's
/// transposed codes made once when their GEMMs all take one path), then dinp in the group's
/// order; written instead of added to as there (beta 0). Rowwise FP8 GEMMs throughout, with no
/// amax group spanning ranks: linear by linear instead, each dout cast both ways at once
/// (f8_codes_both) -- the same GEMMs on the same codes, dinp's in the group's order.
template <class K, class Reduce = cpu::f8_local_amax, class WritesDw = cpu::f8_adds_to_weights>
void f8_matmuls_backward(const f8_workspace& ws, float* dinp, const float* inp, std::int64_t N, std::int64_t C,
                         std::span<const linear_grad> ls, const cpu::f8_linear_casts& c, float* a, float* b,
                         cpu::f8_split split = cpu::f8_split::none, Reduce&& reduce = {}, bool write_dinp = false,
                         WritesDw&& writes_dw = {}) {
  using g = cpu::f8_granularity;
  // dw^T [C, OC] = inp^T . dout: A = inp's codes transposed, B = dout's transposed
  const auto dw_operands = [&](const linear_grad& l) {
    return cpu::f8_gemm_operands(cpu::f8_gemm::grad_weight, c, N, C, l.OC, split);
  };
  const auto dw_fp8 = [&](const linear_grad& l) {
    const auto op = dw_operands(l);
    return detail::fp8_gemm(op[1], g::per_column, op[0], g::per_column, C, l.OC, N);
  };
  const auto di_operands = [&](const linear_grad& l) {
    return cpu::f8_gemm_operands(cpu::f8_gemm::grad_input, c, N, C, l.OC, split);
  };
  const auto di_fp8 = [&](const linear_grad& l) {
    const auto op = di_operands(l);
    return detail::fp8_gemm(op[1], g::per_column, op[0], g::per_row, C, N, l.OC);
  };
  // Rowwise with every linear's two backward GEMMs on the FP8 tensor cores and no amax group
  // spanning ranks (so no reduction, whose order would change): each dout's two casts from two
  // reads of it (f8_codes_both), its codes both ways and their scales side by side in `a`
  // (2 N OC bytes, then N + OC floats), the input's and the weight's transposed codes side by
  // side in `b` (C N, then C OC bytes); the GEMMs as below, dinp's in the group's order.
  const bool both = dinp && std::all_of(ls.begin(), ls.end(), [&](const linear_grad& l) {
    if (!l.dw || !dw_fp8(l) || !di_fp8(l)) return false;
    const auto w = dw_operands(l), i = di_operands(l);
    return i[0].cast->granularity == g::per_row && w[0].cast->granularity == g::per_column && !w[0].spans() &&
           !w[1].spans() && !i[0].spans() && !i[1].spans();
  });
  if (both) {
    std::uint8_t* x_t = detail::bytes(b);
    for (std::size_t k = 0; k < ls.size(); ++k) {
      const linear_grad& l = ls[k];
      const auto w = dw_operands(l), i = di_operands(l);
      std::uint8_t *dy = detail::bytes(a), *dy_t = dy + N * l.OC, *w_t = x_t + N * C;
      float* dy_inverse = reinterpret_cast<float*>(dy_t + N * l.OC);  // rows, then columns
      f8_codes_both(dy, dy_t, dy_inverse, l.dout, N, l.OC, *i[0].cast, *w[0].cast);
      if (k == 0) detail::codes_of(x_t, ws.scales_a, inp, w[1], reduce, true);
      matmul_grad_weight_f8(*ws.gemm, l.dw, dy_t, detail::cuda_f8_type(w[0].cast->target), dy_inverse + N, x_t,
                            detail::cuda_f8_type(w[1].cast->target), ws.scales_a, N, C, l.OC, true,
                            writes_dw(l.dw, l.OC * C));
      detail::codes_of(w_t, ws.scales_b, l.w, i[1], reduce, true);
      matmul_grad_input_f8(*ws.gemm, dinp, dy, detail::cuda_f8_type(i[0].cast->target), dy_inverse, w_t,
                           detail::cuda_f8_type(i[1].cast->target), ws.scales_b, N, C, l.OC, true, write_dinp);
      write_dinp = false;
    }
    if (write_dinp) K::zero(dinp, N * C);  // no linear
    return;
  }
  const auto first = std::find_if(ls.begin(), ls.end(), [](const linear_grad& l) { return l.dw != nullptr; });
  const bool shared =
      std::all_of(ls.begin(), ls.end(), [&](const linear_grad& l) { return !l.dw || dw_fp8(l) == dw_fp8(*first); });
  bool ready = false;  // b holds the input's operand
  const float* x = nullptr;
  for (const linear_grad& l : ls) {
    if (!l.dw) continue;
    const auto op = dw_operands(l);
    const bool write = writes_dw(l.dw, l.OC * C);
    if (dw_fp8(l)) {
      std::uint8_t *dy_t = detail::bytes(a), *x_t = detail::bytes(b);
      detail::codes_of(dy_t, ws.scales_b, l.dout, op[0], reduce, true);
      if (!ready) detail::codes_of(x_t, ws.scales_a, inp, op[1], reduce, true);
      matmul_grad_weight_f8(*ws.gemm, l.dw, dy_t, detail::cuda_f8_type(op[0].cast->target), ws.scales_b, x_t,
                            detail::cuda_f8_type(op[1].cast->target), ws.scales_a, N, C, l.OC, detail::rowwise(op[0]),
                            write);
    } else {
      const float* dy = detail::f8_operand(a, l.dout, op[0], ws.scales_a, reduce);
      if (!ready) x = detail::f8_operand(b, inp, op[1], ws.scales_b, reduce);
      if (write) K::zero(l.dw, l.OC * C);  // K's GEMM adds (it takes no pending tensor: this one is taken)
      K::matmul_backward(nullptr, l.dw, dy, x, nullptr, N, C, l.OC);
    }
    ready = shared;
  }
  for (const linear_grad& l : ls) {  // dinp^T [C, N] = w^T . dout^T: A = w's codes transposed, B = dout's
    if (!dinp) break;
    const auto op = di_operands(l);
    if (di_fp8(l)) {
      std::uint8_t *dy = detail::bytes(a), *w_t = detail::bytes(b);
      detail::codes_of(dy, ws.scales_b, l.dout, op[0], reduce);
      detail::codes_of(w_t, ws.scales_a, l.w, op[1], reduce, true);
      matmul_grad_input_f8(*ws.gemm, dinp, dy, detail::cuda_f8_type(op[0].cast->target), ws.scales_b, w_t,
                           detail::cuda_f8_type(op[1].cast->target), ws.scales_a, N, C, l.OC, detail::rowwise(op[0]),
                           write_dinp);
    } else {
      const float* dy = detail::f8_operand(a, l.dout, op[0], ws.scales_a, reduce);
      const float* w = detail::f8_operand(b, l.w, op[1], ws.scales_b, reduce);
      K::matmul_backward(dinp, nullptr, dy, nullptr, w, N, C, l.OC, write_dinp);
    }
    write_dinp = false;
  }
  if (write_dinp && dinp) K::zero(dinp, N * C);  // no linear
}
}  // namespace tessera::cuda
