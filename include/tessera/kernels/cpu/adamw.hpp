// tessera/kernels/cpu/adamw.hpp: AdamW exactly as torch.optim.AdamW (decoupled decay).
//   p <- p * (1 - lr * wd)
//   m <- m + (1 - b1) (g - m);   v <- b2 v + (1 - b2) g^2
//   p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Defaults are TorchTitan's: betas (0.9, 0.95), eps 1e-8, weight decay 0.1. `step` counts
// from 1. Runs over flat buffers (one call for a whole parameter arena).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/parallel.hpp>

namespace tessera::cpu {

struct adamw_config {
  float lr = 8e-4f;  // TorchTitan's Llama 3 debug-model default
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

inline void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                         std::int64_t step, const adamw_config& cfg) {
  check(step >= 1, "adamw_update: step counts from 1");
  const double bc1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), static_cast<double>(step));
  const float step_size = static_cast<float>(cfg.lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = 1.0f - cfg.lr * cfg.weight_decay;
  const float b1 = cfg.beta1, b2 = cfg.beta2, eps = cfg.eps;
  parallel_for(static_cast<std::int64_t>(n), [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) {
      const float g = grads[i];
      float p = params[i] * decay;
      const float mi = m[i] + (1.0f - b1) * (g - m[i]);
      const float vi = b2 * v[i] + (1.0f - b2) * g * g;
      m[i] = mi;
      v[i] = vi;
      p -= step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
      params[i] = p;
    }
  }, 1 << 14);
}

}  // namespace tessera::cpu
