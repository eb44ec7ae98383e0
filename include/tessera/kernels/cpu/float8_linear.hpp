// tessera/kernels/cpu/float8_linear.hpp: a linear's three GEMMs with Float8 operands,
// emulated on the CPU.
// tessera-requires: openblas
//
// Each operand of each GEMM goes through its recipe's cast (f8_linear_casts_of): scaled,
// rounded to e4m3 / e5m2 with saturation, and scaled back -- the exact values an FP8 GEMM
// multiplies. The GEMM itself runs in f32 (OpenBLAS), as the FP8 tensor cores accumulate in
// f32; only the rounding of the products' sum differs from a real FP8 GEMM. The CUDA path
// runs real FP8 GEMMs (docs/kernels.md, "Float8 numerics").
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/linears.hpp>

namespace tessera::cpu {

/// The operand a GEMM multiplies: `x` itself when the cast is high precision, else x
/// quantized and dequantized into `buf`, the amaxes of groups that span ranks through
/// `reduce` (f8_scales).
template <class Reduce>
const float* f8_operand(float* buf, const float* x, const f8_operand_of& o, Reduce& reduce) {
  if (!o.cast) return x;
  if (o.spans())
    f8_quantize_dequantize(buf, x, o.rows, o.cols, *o.cast, {}, reduce);
  else
    f8_quantize_dequantize(buf, x, o.rows, o.cols, *o.cast);
  return buf;
}

/// Floats of the two operand buffers the Float8 linears below need for a linear [N, C] -> [N, OC]:
/// {activations / gradients (N x max(C, OC)), weights or the input again (max(OC, N) x C)}.
constexpr std::int64_t f8_linear_buffer_a(std::int64_t N, std::int64_t C, std::int64_t OC) {
  return N * (C > OC ? C : OC);
}
constexpr std::int64_t f8_linear_buffer_b(std::int64_t N, std::int64_t C, std::int64_t OC) {
  return (OC > N ? OC : N) * C;
}

/// A group of linears on one input [N, C] (q, k, v; w1, w3): l.out [N, l.OC] = q(inp) .
/// q(l.w [l.OC, C])^T, q the casts `c.input` and `c.weight`, the input cast once for the group.
/// `a` and `b` hold f8_linear_buffer_a / _b floats for the group's widest linear; `split` and
/// `reduce` as f8_operand. A GEMM calls `reduce` for its operands in their order
/// (f8_gemm_operands': op[0] before op[1]; the input's once), here and on the GPU
/// (kernels/cuda/float8_linear.cuh), so that a caller may hand each its amaxes (async TP's
/// parts, model/llama_block_regions.hpp, one linear at a time).
template <class Reduce = f8_local_amax>
void f8_matmuls_forward(const float* inp, std::int64_t N, std::int64_t C, std::span<const linear_out> ls,
                        const f8_linear_casts& c, float* a, float* b, f8_split split = f8_split::none,
                        Reduce&& reduce = {}) {
  const float* x = nullptr;
  for (const linear_out& l : ls) {
    const auto op = f8_gemm_operands(f8_gemm::output, c, N, C, l.OC, split);
    if (x == nullptr) x = f8_operand(a, inp, op[0], reduce);  // op[0]'s reduction before op[1]'s (as on the GPU)
    const float* w = f8_operand(b, l.w, op[1], reduce);
    matmul_forward(l.out, x, w, nullptr, N, C, l.OC);
  }
}
/// One linear: out [N, OC] = q(inp [N, C]) . q(weight [OC, C])^T.
template <class Reduce = f8_local_amax>
void f8_matmul_forward(float* out, const float* inp, const float* weight, std::int64_t N, std::int64_t C,
                       std::int64_t OC, const f8_linear_casts& c, float* a, float* b, f8_split split = f8_split::none,
                       Reduce&& reduce = {}) {
  const linear_out l{out, weight, OC};
  f8_matmuls_forward(inp, N, C, {&l, 1}, c, a, b, split, reduce);
}

/// The group's backward: first every l.dw += q(l.dout)^T . q(inp) (not nullptr; the input's
/// operand cast once for the group, into `b`), then dinp += q(l.dout) . q(l.w) in the group's
/// order (dinp not nullptr), each operand under its own cast of `c`. With write_dinp the first
/// writes dinp (what it held is not read); a weight gradient for which writes_dw(dw, n) is
/// true is written likewise. Buffers as f8_matmuls_forward.
template <class Reduce = f8_local_amax, class WritesDw = f8_adds_to_weights>
void f8_matmuls_backward(float* dinp, const float* inp, std::int64_t N, std::int64_t C, std::span<const linear_grad> ls,
                         const f8_linear_casts& c, float* a, float* b, f8_split split = f8_split::none,
                         Reduce&& reduce = {}, bool write_dinp = false, WritesDw&& writes_dw = {}) {
  const float* x = nullptr;
  for (const linear_grad& l : ls) {
    if (!l.dw) continue;
    const auto op = f8_gemm_operands(f8_gemm::grad_weight, c, N, C, l.OC, split);
    const float* dy = f8_operand(a, l.dout, op[0], reduce);
    if (x == nullptr) x = f8_operand(b, inp, op[1], reduce);
    matmul_backward(nullptr, l.dw, nullptr, dy, x, nullptr, N, C, l.OC, false, writes_dw(l.dw, l.OC * C));
  }
  for (const linear_grad& l : ls) {
    if (!dinp) break;
    const auto op = f8_gemm_operands(f8_gemm::grad_input, c, N, C, l.OC, split);
    const float* dy = f8_operand(a, l.dout, op[0], reduce);
    const float* w = f8_operand(b, l.w, op[1], reduce);
    matmul_backward(dinp, nullptr, nullptr, dy, nullptr, w, N, C, l.OC, write_dinp);
    write_dinp = false;
  }
  if (write_dinp && dinp) std::fill(dinp, dinp + N * C, 0.0f);  // no linear
}
/// One linear: dinp += q(dout) . q(weight), dweight += q(dout)^T . q(inp) (either may be
/// nullptr; write_dinp, write_dweight: written instead).
template <class Reduce = f8_local_amax>
void f8_matmul_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                        std::int64_t N, std::int64_t C, std::int64_t OC, const f8_linear_casts& c, float* a, float* b,
                        f8_split split = f8_split::none, Reduce&& reduce = {}, bool write_dinp = false,
                        bool write_dweight = false) {
  const linear_grad l{dweight, dout, weight, OC};
  f8_matmuls_backward(dinp, inp, N, C, {&l, 1}, c, a, b, split, reduce, write_dinp,
                      [&](float*, std::int64_t) { return write_dweight; });
}

}  // namespace tessera::cpu
