// tessera/kernels/cpu/rmsnorm.hpp: RMSNorm as Llama (and TorchTitan) define it:
//   rstd[n] = 1 / sqrt(mean_c(inp[n,c]^2) + eps);  out[n,c] = inp[n,c] * rstd[n] * weight[c]
// Backward (accumulates into dinp and dweight), with g = dout * weight:
//   dinp[n,c]  += rstd * (g[c] - inp[n,c] * rstd^2 * mean_k(g[k] * inp[n,k]))
//   dweight[c] += sum_n dout[n,c] * inp[n,c] * rstd[n]
// rstd [N] is saved by forward for backward. Llama's eps is 1e-5.
#pragma once

#include <cmath>
#include <cstdint>

#include <tessera/kernels/cpu/detail/vec_math.hpp>
#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cpu {

inline void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                            std::int64_t N, std::int64_t C, float eps = 1e-5f) {
  parallel_for(N, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const float* x = inp + i * C;
      const float ss = detail::dot(x, x, C);
      const float r = 1.0f / std::sqrt(ss / static_cast<float>(C) + eps);
      rstd[i] = r;
      float* o = out + i * C;
      for (std::int64_t c = 0; c < C; ++c) o[c] = pointwise::rmsnorm_scale(x[c], r, weight[c]);
    }
  }, 8);
}

/// dinp or dweight may be nullptr.
inline void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                             const float* weight, const float* rstd, std::int64_t N,
                             std::int64_t C) {
  if (dinp) {
    parallel_for(N, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const float* x = inp + i * C;
        const float* g = dout + i * C;
        const float r = rstd[i];
        float acc[detail::lanes] = {};
        std::int64_t c = 0;
        for (; c + detail::lanes <= C; c += detail::lanes)
          for (int l = 0; l < detail::lanes; ++l) acc[l] += g[c + l] * weight[c + l] * x[c + l];
        float dot = 0.0f;
        for (int l = 0; l < detail::lanes; ++l) dot += acc[l];
        for (; c < C; ++c) dot += g[c] * weight[c] * x[c];
        const float k = r * r * r * dot / static_cast<float>(C);
        float* d = dinp + i * C;
        for (c = 0; c < C; ++c) d[c] += pointwise::rmsnorm_grad(x[c], g[c], weight[c], r, k);
      }
    }, 8);
  }
  if (dweight) {  // threads split channels: deterministic, no reduction buffers
    parallel_for(C, [&](std::int64_t c0, std::int64_t c1) {
      for (std::int64_t i = 0; i < N; ++i) {
        const float* x = inp + i * C;
        const float* g = dout + i * C;
        const float r = rstd[i];
        for (std::int64_t c = c0; c < c1; ++c) dweight[c] += g[c] * x[c] * r;
      }
    }, 16);
  }
}

}  // namespace tessera::cpu
