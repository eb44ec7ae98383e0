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

#include <cstdint>
#include <optional>

#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/kernels/cpu/matmul.hpp>

namespace tessera::cpu {

/// The operand a GEMM multiplies: `x` itself when the cast is high precision (nullopt),
/// else x [rows, cols] quantized and dequantized into `buf`.
inline const float* f8_operand(float* buf, const float* x, std::int64_t rows, std::int64_t cols,
                               const std::optional<f8_cast>& c) {
  if (!c) return x;
  f8_quantize_dequantize(buf, x, rows, cols, *c);
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

/// out [N, OC] = q(inp [N, C]) . q(weight [OC, C])^T, q the casts `c.input` and `c.weight`.
/// `a` and `b` hold f8_linear_buffer_a / _b floats.
inline void f8_matmul_forward(float* out, const float* inp, const float* weight, std::int64_t N, std::int64_t C,
                              std::int64_t OC, const f8_linear_casts& c, float* a, float* b) {
  matmul_forward(out, f8_operand(a, inp, N, C, c.input), f8_operand(b, weight, OC, C, c.weight), nullptr, N, C, OC);
}

/// Accumulates dinp += q(dout) . q(weight) and dweight += q(dout)^T . q(inp), each operand
/// under its own cast of `c` (either output may be nullptr). Buffers as f8_matmul_forward.
inline void f8_matmul_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                               std::int64_t N, std::int64_t C, std::int64_t OC, const f8_linear_casts& c, float* a,
                               float* b) {
  if (dinp)
    matmul_backward(dinp, nullptr, nullptr, f8_operand(a, dout, N, OC, c.grad_output),
                    nullptr, f8_operand(b, weight, OC, C, c.weight_for_grad_input), N, C, OC);
  if (dweight)
    matmul_backward(nullptr, dweight, nullptr, f8_operand(a, dout, N, OC, c.grad_output_for_grad_weight),
                    f8_operand(b, inp, N, C, c.input_for_grad_weight), nullptr, N, C, OC);
}

}  // namespace tessera::cpu
