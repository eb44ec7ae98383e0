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
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cpu {

struct adamw_config {
  float lr = 8e-4f;  // TorchTitan's Llama 3 debug-model default
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

/// The scalars of step `step` (from 1): the bias corrections in double, as PyTorch; the
/// CPU and CUDA updates take the same ones.
inline pointwise::adamw_scalars adamw_step_scalars(std::int64_t step, const adamw_config& cfg) {
  check(step >= 1, "adamw_update: step counts from 1");
  const double bc1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), static_cast<double>(step));
  return {.step_size = static_cast<float>(cfg.lr / bc1),
          .bc2_sqrt = static_cast<float>(std::sqrt(bc2)),
          .decay = 1.0f - cfg.lr * cfg.weight_decay,
          .beta1 = cfg.beta1,
          .beta2 = cfg.beta2,
          .eps = cfg.eps};
}

inline void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                         std::int64_t step, const adamw_config& cfg) {
  const pointwise::adamw_scalars k = adamw_step_scalars(step, cfg);
  parallel_for(static_cast<std::int64_t>(n), [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) pointwise::adamw(params[i], m[i], v[i], grads[i], k);
  }, 1 << 14);
}

}  // namespace tessera::cpu
