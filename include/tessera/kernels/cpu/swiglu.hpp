// tessera/kernels/cpu/swiglu.hpp: the SwiGLU feed-forward of Llama.
// tessera-requires: openblas
//   h1 = x . w1^T, h3 = x . w3^T   ([N,H]);   a = silu(h1) * h3;   out = a . w2^T  ([N,C])
//   silu(x) = x * sigmoid(x)
// swiglu_forward/backward are the pointwise part (backward WRITES dh1, dh3; they may alias
// h1, h3 or dout). feed_forward_forward/backward compose it with the three GEMMs; forward
// keeps h1, h3 (and a) for backward; backward accumulates dinp (or writes it, write_dinp)
// and dw1, dw2, dw3 as matmul_backward does.
#pragma once

#include <cstdint>
#include <vector>

#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cpu {

inline void swiglu_forward(float* out, const float* h1, const float* h3, std::int64_t n) {
  parallel_for(n, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) out[i] = pointwise::swiglu(h1[i], h3[i]);
  }, 4096);
}

/// dh1 = dout * h3 * silu'(h1), dh3 = dout * silu(h1), with silu'(x) = s (1 + x (1 - s)).
inline void swiglu_backward(float* dh1, float* dh3, const float* dout, const float* h1,
                            const float* h3, std::int64_t n) {
  parallel_for(n, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const pointwise::pair d = pointwise::swiglu_grad(dout[i], h1[i], h3[i]);
      dh1[i] = d.first;
      dh3[i] = d.second;
    }
  }, 4096);
}

/// out[N,C] = (silu(inp . w1^T) * (inp . w3^T)) . w2^T. w1, w3: [H,C]; w2: [C,H].
/// Saves h1, h3, act ([N,H] each) for backward.
inline void feed_forward_forward(float* out, float* h1, float* h3, float* act, const float* inp,
                                 const float* w1, const float* w3, const float* w2,
                                 std::int64_t N, std::int64_t C, std::int64_t H) {
  matmul_forward(h1, inp, w1, nullptr, N, C, H);
  matmul_forward(h3, inp, w3, nullptr, N, C, H);
  swiglu_forward(act, h1, h3, N * H);
  matmul_forward(out, act, w2, nullptr, N, H, C);
}

/// Accumulates dinp [N,C] (with write_dinp, writes it: what it held is not read) and dw1, dw3
/// [H,C], dw2 [C,H]. `scratch` needs 2*N*H floats.
inline void feed_forward_backward(float* dinp, float* dw1, float* dw3, float* dw2,
                                  const float* dout, const float* inp, const float* h1,
                                  const float* h3, const float* act, const float* w1,
                                  const float* w3, const float* w2, std::int64_t N,
                                  std::int64_t C, std::int64_t H, float* scratch,
                                  bool write_dinp = false) {
  float* dact = scratch;  // dh1 overwrites dact in place
  float* dh1 = scratch;
  float* dh3 = scratch + N * H;
  gemm(false, false, N, H, C, 1.0f, dout, C, w2, H, 0.0f, dact, H);
  matmul_backward(nullptr, dw2, nullptr, dout, act, w2, N, H, C);
  swiglu_backward(dh1, dh3, dact, h1, h3, N * H);
  matmul_backward(dinp, dw1, nullptr, dh1, inp, w1, N, C, H, write_dinp);
  matmul_backward(dinp, dw3, nullptr, dh3, inp, w3, N, C, H);
}

}  // namespace tessera::cpu
