// tessera/kernels/cpu/rope.hpp: rotary position embedding as Llama 3.1 defines it.
//
// Frequencies: f_i = theta^(-2i/d) for i < d/2 (d = head_dim, theta = 500000), then the
// Llama 3.1 scaling (Meta's reference apply_scaling): with wavelength w_i = 2 pi / f_i,
//   w_i < original_context / high_freq_factor  -> f_i kept,
//   w_i > original_context / low_freq_factor   -> f_i / factor,
//   otherwise s = (original_context / w_i - low) / (high - low) and
//             f_i = (1 - s) f_i / factor + s f_i.
// Defaults: factor 8, low 1, high 4, original context 8192. Angle at position t: t * f_i.
//
// Two pairings of a head vector x (both rotate a pair (a, b) to
// (a cos - b sin, a sin + b cos) by angle t f_i):
//   rope_style::interleaved (Meta, TorchTitan; complex view): pair i = (x[2i], x[2i+1])
//   rope_style::half        (Hugging Face rotate_half):       pair i = (x[i], x[i + d/2])
// tessera's Llama uses `interleaved` (TorchTitan's convention); Hugging Face checkpoints'
// wq/wk are permuted on load to match (see docs/kernels.md).
//
// Tables: cos, sin [T, d/2] from rope_table. Activations [B, T, n_heads, d].
// rope_forward writes out (may alias inp); rope_backward WRITES dinp = R(-angle) dout
// (may alias dout): the rotation is orthogonal, so its gradient is the inverse rotation.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cpu {

struct rope_config {
  double theta = 500000.0;
  bool scaling = true;  // Llama 3.1 frequency scaling; false gives plain RoPE (Llama 3.0)
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_context = 8192.0;
};

enum class rope_style { interleaved, half };

/// The d/2 inverse frequencies (rad per position), Llama 3.1 scaled when cfg.scaling.
inline void rope_frequencies(float* freqs, std::int64_t head_dim, const rope_config& cfg = {}) {
  check(head_dim > 0 && head_dim % 2 == 0, "rope_frequencies: head_dim must be even and positive");
  const double low_wavelen = cfg.original_context / cfg.low_freq_factor;
  const double high_wavelen = cfg.original_context / cfg.high_freq_factor;
  for (std::int64_t i = 0; i < head_dim / 2; ++i) {
    // as torch: 1 / theta ** (arange(0, d, 2).float() / d), in float
    const float expo = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    double f = static_cast<double>(1.0f / std::pow(static_cast<float>(cfg.theta), expo));
    if (cfg.scaling) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen < high_wavelen) {
      } else if (wavelen > low_wavelen) {
        f = f / cfg.factor;
      } else {
        const double s = (cfg.original_context / wavelen - cfg.low_freq_factor) /
                         (cfg.high_freq_factor - cfg.low_freq_factor);
        f = (1.0 - s) * f / cfg.factor + s * f;
      }
    }
    freqs[i] = static_cast<float>(f);
  }
}

/// cos and sin tables [T, head_dim/2] for positions 0..T-1 (angle = float(t) * freq, as
/// torch.outer in float), or for the tokens' global `positions` (context parallel's part
/// of a sequence).
inline void rope_table(float* cos, float* sin, std::int64_t T, std::int64_t head_dim,
                       const rope_config& cfg = {}, const std::int64_t* positions = nullptr) {
  const std::int64_t h = head_dim / 2;
  std::vector<float> f(static_cast<std::size_t>(h));
  rope_frequencies(f.data(), head_dim, cfg);
  for (std::int64_t t = 0; t < T; ++t) {
    const std::int64_t at = positions ? positions[t] : t;  // row t rotates by its token's position
    for (std::int64_t i = 0; i < h; ++i) {
      const float a = static_cast<float>(at) * f[static_cast<std::size_t>(i)];
      cos[t * h + i] = static_cast<float>(std::cos(static_cast<double>(a)));
      sin[t * h + i] = static_cast<float>(std::sin(static_cast<double>(a)));
    }
  }
}

namespace detail {
template <bool Inverse>
void rope_apply(float* out, const float* inp, const float* cos, const float* sin, std::int64_t B,
                std::int64_t T, std::int64_t NH, std::int64_t HD, rope_style style) {
  const std::int64_t h = HD / 2;
  parallel_for(B * T, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t t = r % T;
      const float* c = cos + t * h;
      const float* s = sin + t * h;
      constexpr float sign = Inverse ? -1.0f : 1.0f;
      for (std::int64_t hd = 0; hd < NH; ++hd) {
        const float* x = inp + (r * NH + hd) * HD;
        float* y = out + (r * NH + hd) * HD;
        // two plain loops (constant strides) so the compiler vectorizes both pairings
        if (style == rope_style::interleaved) {
          for (std::int64_t i = 0; i < h; ++i) {
            const pointwise::pair r = pointwise::rope_rotate(x[2 * i], x[2 * i + 1], c[i], sign * s[i]);
            y[2 * i] = r.first;
            y[2 * i + 1] = r.second;
          }
        } else {
          for (std::int64_t i = 0; i < h; ++i) {
            const pointwise::pair r = pointwise::rope_rotate(x[i], x[i + h], c[i], sign * s[i]);
            y[i] = r.first;
            y[i + h] = r.second;
          }
        }
      }
    }
  }, 4);
}
}  // namespace detail

/// out[B,T,NH,HD] = RoPE(inp); out may alias inp.
inline void rope_forward(float* out, const float* inp, const float* cos, const float* sin,
                         std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t HD,
                         rope_style style = rope_style::interleaved) {
  detail::rope_apply<false>(out, inp, cos, sin, B, T, NH, HD, style);
}

/// dinp = RoPE^-1(dout) (writes; dinp may alias dout).
inline void rope_backward(float* dinp, const float* dout, const float* cos, const float* sin,
                          std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t HD,
                          rope_style style = rope_style::interleaved) {
  detail::rope_apply<true>(dinp, dout, cos, sin, B, T, NH, HD, style);
}

}  // namespace tessera::cpu
