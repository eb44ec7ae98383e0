// tessera/model/llama.hpp: the Llama 3 model template with explicit forward and backward.
// tessera-requires: openblas
//
// `tessera::llama<Config>` (Config one of debugmodel, llama3_1b, ..., or any type with a
// `static constexpr llama_config config`) is a llama_model whose configuration is checked
// at compile time. The math is TorchTitan's Llama 3 (pre-norm blocks, RMSNorm, GQA with
// interleaved RoPE and the Llama 3.1 frequency scaling, SwiGLU, untied or tied output),
// written as calls to tessera's CPU kernels in the style of llm.c: one parameter arena and
// one gradient arena of the same layout, activations kept for backward in buffers sized for
// the current (B, T), every shape visible at the call. There is no parallel logic here:
// parameters carry a role (param_entry) that parallel policies map to layouts.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>
#include <tessera/model/detail/init.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

/// TorchTitan's name of a parameter (the keys of its state dict).
inline std::string titan_name(const param_entry& e) {
  const std::string p = "layers." + std::to_string(e.layer) + ".";
  switch (e.role) {
    case param_role::embedding: return "tok_embeddings.weight";
    case param_role::attention_norm: return p + "attention_norm.weight";
    case param_role::attention_q: return p + "attention.wq.weight";
    case param_role::attention_k: return p + "attention.wk.weight";
    case param_role::attention_v: return p + "attention.wv.weight";
    case param_role::attention_o: return p + "attention.wo.weight";
    case param_role::ffn_norm: return p + "ffn_norm.weight";
    case param_role::ffn_w1: return p + "feed_forward.w1.weight";
    case param_role::ffn_w2: return p + "feed_forward.w2.weight";
    case param_role::ffn_w3: return p + "feed_forward.w3.weight";
    case param_role::final_norm: return "norm.weight";
    case param_role::output: return "output.weight";
  }
  return {};
}

/// Checks a configuration at run time (the same facts llama<Config> checks at compile time).
inline void check_config(const llama_config& c) {
  const std::string n(c.name);
  check(c.dim > 0 && c.n_layers > 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.vocab_size > 0,
        "llama config '" + n + "': dim, n_layers, n_heads, n_kv_heads and vocab_size must be positive");
  check(c.dim % c.n_heads == 0, "llama config '" + n + "': dim (" + std::to_string(c.dim) +
                                    ") is not divisible by n_heads (" + std::to_string(c.n_heads) + ")");
  check(c.n_heads % c.n_kv_heads == 0,
        "llama config '" + n + "': n_heads (" + std::to_string(c.n_heads) +
            ") is not divisible by n_kv_heads (" + std::to_string(c.n_kv_heads) + ")");
  check(head_dim(c) % 2 == 0, "llama config '" + n + "': head_dim (" +
                                  std::to_string(head_dim(c)) + ") must be even for RoPE");
}

class llama_model {
 public:
  explicit llama_model(const llama_config& c) : cfg_(c) {
    check_config(c);
    arena_layout layout;
    for (std::int64_t i = 0; i < param_tensor_count(c); ++i) {
      const param_entry e = param_at(c, i);
      const std::int64_t shape[2] = {e.shape.rows, e.shape.cols};
      layout.add(titan_name(e), e.shape.is_vector() ? std::span<const std::int64_t>(shape + 1, 1)
                                                    : std::span<const std::int64_t>(shape, 2));
    }
    params_ = arena<float>(layout);
    grads_ = arena<float>(layout);
  }

  const llama_config& config() const noexcept { return cfg_; }
  std::int64_t n_tensors() const noexcept { return param_tensor_count(cfg_); }
  param_entry entry(std::int64_t i) const { return param_at(cfg_, i); }
  std::string name(std::int64_t i) const { return titan_name(entry(i)); }
  std::int64_t num_params() const noexcept { return param_count(cfg_); }

  float* param(std::int64_t i) { return params_.data() + offset(i); }
  const float* param(std::int64_t i) const { return params_.data() + offset(i); }
  float* grad(std::int64_t i) { return grads_.data() + offset(i); }
  const float* grad(std::int64_t i) const { return grads_.data() + offset(i); }
  /// The flat arenas (padding between slots is zero and stays zero under AdamW).
  arena<float>& params() noexcept { return params_; }
  arena<float>& grads() noexcept { return grads_; }

  /// TorchTitan's Llama 3 initialization (torchtitan/models/llama3/model/model.py,
  /// init_weights with depth_init = True): embedding N(0, 1); wq, wk, wv, w1 truncated
  /// N(0, 0.02) on [-2, 2]; wo, w2, w3 truncated N(0, s) on [-2, 2] with
  /// s = 0.02 / sqrt(2 (layer + 1)); norms 1; output truncated N(0, dim^-1/2) on +-3 dim^-1/2.
  /// Tied models (TorchTitan has none) give the shared table the output's rule, since it
  /// also produces the logits.
  void init_weights(std::uint64_t seed) {
    const double out_std = 1.0 / std::sqrt(static_cast<double>(cfg_.dim));
    for (std::int64_t i = 0; i < n_tensors(); ++i) {
      const param_entry e = entry(i);
      float* p = param(i);
      const std::int64_t n = e.shape.numel();
      detail::normal_source rng(detail::mix_seed(seed, static_cast<std::uint64_t>(i)));
      const double depth_std = 0.02 / std::sqrt(2.0 * static_cast<double>(e.layer + 1));
      switch (e.role) {
        case param_role::attention_norm:
        case param_role::ffn_norm:
        case param_role::final_norm:
          for (std::int64_t j = 0; j < n; ++j) p[j] = 1.0f;
          break;
        case param_role::embedding:
          for (std::int64_t j = 0; j < n; ++j)
            p[j] = static_cast<float>(cfg_.tied_embeddings
                                          ? rng.trunc_normal(0, out_std, -3 * out_std, 3 * out_std)
                                          : rng.normal());
          break;
        case param_role::attention_q:
        case param_role::attention_k:
        case param_role::attention_v:
        case param_role::ffn_w1:
          for (std::int64_t j = 0; j < n; ++j) p[j] = static_cast<float>(rng.trunc_normal(0, 0.02, -2, 2));
          break;
        case param_role::attention_o:
        case param_role::ffn_w2:
        case param_role::ffn_w3:
          for (std::int64_t j = 0; j < n; ++j)
            p[j] = static_cast<float>(rng.trunc_normal(0, depth_std, -2, 2));
          break;
        case param_role::output:
          for (std::int64_t j = 0; j < n; ++j)
            p[j] = static_cast<float>(rng.trunc_normal(0, out_std, -3 * out_std, 3 * out_std));
          break;
      }
    }
  }

  void zero_grad() { grads_.zero(); }

  /// Forward over inputs and targets [B, T] (row-major). Returns the mean cross-entropy.
  /// When `need_backward`, also prepares the logits' gradient of `loss_scale` times the
  /// mean loss (loss_scale = 1 / accumulation steps for gradient accumulation), for
  /// backward(). Negative targets are ignored (torch's ignore_index).
  float forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                std::int64_t B, std::int64_t T, bool need_backward = true, float loss_scale = 1.0f) {
    check(static_cast<std::int64_t>(inputs.size()) == B * T &&
              static_cast<std::int64_t>(targets.size()) == B * T,
          "llama::forward: inputs and targets must hold B*T = " + std::to_string(B * T) + " ids");
    prepare(B, T);
    const llama_config& c = cfg_;
    const std::int64_t N = B * T, D = c.dim, hd = head_dim(c), Hq = c.n_heads * hd,
                       Hk = kv_dim(c), F = ffn_hidden_dim(c), V = c.vocab_size;
    const float eps = static_cast<float>(c.norm_eps);
    inputs_.assign(inputs.begin(), inputs.end());
    targets_.assign(targets.begin(), targets.end());
    cpu::embedding_forward(res(0), inputs_.data(), param(0), N, V, D);
    for (std::int64_t l = 0; l < c.n_layers; ++l) {
      layer_acts& a = acts_[static_cast<std::size_t>(l)];
      const float* x = res(l);
      cpu::rmsnorm_forward(a.an.data(), a.rstd1.data(), x, lp(l, 0), N, D, eps);
      cpu::matmul_forward(a.q.data(), a.an.data(), lp(l, 1), nullptr, N, D, Hq);
      cpu::matmul_forward(a.k.data(), a.an.data(), lp(l, 2), nullptr, N, D, Hk);
      cpu::matmul_forward(a.v.data(), a.an.data(), lp(l, 3), nullptr, N, D, Hk);
      cpu::rope_forward(a.q.data(), a.q.data(), cos_.data(), sin_.data(), B, T, c.n_heads, hd);
      cpu::rope_forward(a.k.data(), a.k.data(), cos_.data(), sin_.data(), B, T, c.n_kv_heads, hd);
      cpu::attention_forward(a.att.data(), a.lse.data(), a.q.data(), a.k.data(), a.v.data(), B, T,
                             c.n_heads, c.n_kv_heads, hd);
      cpu::matmul_forward(a.mid.data(), a.att.data(), lp(l, 4), nullptr, N, Hq, D);
      add_inplace(a.mid.data(), x, N * D);  // mid = x + attention(x)
      cpu::rmsnorm_forward(a.fn.data(), a.rstd2.data(), a.mid.data(), lp(l, 5), N, D, eps);
      float* out = res(l + 1);
      cpu::feed_forward_forward(out, a.h1.data(), a.h3.data(), a.act.data(), a.fn.data(),
                                lp(l, 6), lp(l, 8), lp(l, 7), N, D, F);
      add_inplace(out, a.mid.data(), N * D);  // out = mid + ffn(mid)
    }
    cpu::rmsnorm_forward(xf_.data(), rstdf_.data(), res(c.n_layers), param(final_norm_index()), N,
                         D, eps);
    cpu::matmul_forward(logits_.data(), xf_.data(), output_weight(), nullptr, N, D, V);
    float loss;
    if (need_backward) {
      const std::int64_t count = cpu::count_targets(targets_.data(), N, V);
      const float scale = count ? loss_scale / static_cast<float>(count) : 0.0f;
      loss = cpu::cross_entropy_forward_backward(logits_.data(), nullptr, logits_.data(),
                                                 targets_.data(), N, V, scale);
    } else {
      loss = cpu::cross_entropy_forward(nullptr, logits_.data(), targets_.data(), N, V);
    }
    have_dlogits_ = need_backward;
    return loss;
  }

  /// Accumulates into the gradient arena the gradient prepared by the last forward().
  void backward() {
    check(have_dlogits_, "llama::backward: call forward(..., need_backward = true) first");
    have_dlogits_ = false;
    const llama_config& c = cfg_;
    const std::int64_t B = B_, T = T_, N = B * T, D = c.dim, hd = head_dim(c),
                       Hq = c.n_heads * hd, Hk = kv_dim(c), F = ffn_hidden_dim(c), V = c.vocab_size;
    float* dres = dres_.data();  // gradient of the residual stream, updated in place
    float* dtmp = dtmp_.data();
    zero(dtmp, N * D);
    cpu::matmul_backward(dtmp, output_grad(), nullptr, logits_.data(), xf_.data(), output_weight(),
                         N, D, V);
    zero(dres, N * D);
    cpu::rmsnorm_backward(dres, grad(final_norm_index()), dtmp, res(c.n_layers),
                          param(final_norm_index()), rstdf_.data(), N, D);
    for (std::int64_t l = c.n_layers - 1; l >= 0; --l) {
      layer_acts& a = acts_[static_cast<std::size_t>(l)];
      // out = mid + ffn(norm(mid)): dmid = dout + d(ffn path), accumulated into dres.
      zero(dtmp, N * D);
      cpu::feed_forward_backward(dtmp, lg(l, 6), lg(l, 8), lg(l, 7), dres, a.fn.data(),
                                 a.h1.data(), a.h3.data(), a.act.data(), lp(l, 6), lp(l, 8),
                                 lp(l, 7), N, D, F, ffn_scratch_.data());
      cpu::rmsnorm_backward(dres, lg(l, 5), dtmp, a.mid.data(), lp(l, 5), a.rstd2.data(), N, D);
      // mid = x + wo(attention(rope(q), rope(k), v)) with q, k, v = w{q,k,v}(norm(x)).
      zero(datt_.data(), N * Hq);
      cpu::matmul_backward(datt_.data(), lg(l, 4), nullptr, dres, a.att.data(), lp(l, 4), N, Hq, D);
      cpu::attention_backward(dq_.data(), dk_.data(), dv_.data(), datt_.data(), a.q.data(),
                              a.k.data(), a.v.data(), a.att.data(), a.lse.data(), B, T, c.n_heads,
                              c.n_kv_heads, hd);
      cpu::rope_backward(dq_.data(), dq_.data(), cos_.data(), sin_.data(), B, T, c.n_heads, hd);
      cpu::rope_backward(dk_.data(), dk_.data(), cos_.data(), sin_.data(), B, T, c.n_kv_heads, hd);
      zero(dtmp, N * D);
      cpu::matmul_backward(dtmp, lg(l, 1), nullptr, dq_.data(), a.an.data(), lp(l, 1), N, D, Hq);
      cpu::matmul_backward(dtmp, lg(l, 2), nullptr, dk_.data(), a.an.data(), lp(l, 2), N, D, Hk);
      cpu::matmul_backward(dtmp, lg(l, 3), nullptr, dv_.data(), a.an.data(), lp(l, 3), N, D, Hk);
      cpu::rmsnorm_backward(dres, lg(l, 0), dtmp, res(l), lp(l, 0), a.rstd1.data(), N, D);
    }
    cpu::embedding_backward(grad(0), dres, inputs_.data(), N, V, D);
  }

  /// Bytes of activations held for the current (B, T).
  std::int64_t activation_bytes() const { return act_bytes_; }

 private:
  struct layer_acts {
    tensor<float> an, rstd1, q, k, v, att, lse, mid, fn, rstd2, h1, h3, act;
  };
  llama_config cfg_;
  arena<float> params_, grads_;
  std::int64_t B_ = 0, T_ = 0, act_bytes_ = 0;
  std::vector<layer_acts> acts_;
  tensor<float> res_, xf_, rstdf_, logits_, cos_, sin_;
  tensor<float> dres_, dtmp_, datt_, dq_, dk_, dv_, ffn_scratch_;
  std::vector<std::int32_t> inputs_, targets_;
  bool have_dlogits_ = false;

  std::int64_t offset(std::int64_t i) const {
    return static_cast<std::int64_t>(params_.layout().slots()[static_cast<std::size_t>(i)].offset);
  }
  std::int64_t final_norm_index() const { return 1 + cfg_.n_layers * n_block_params; }
  float* lp(std::int64_t layer, int k) { return param(1 + layer * n_block_params + k); }
  float* lg(std::int64_t layer, int k) { return grad(1 + layer * n_block_params + k); }
  float* output_weight() { return cfg_.tied_embeddings ? param(0) : param(final_norm_index() + 1); }
  float* output_grad() { return cfg_.tied_embeddings ? grad(0) : grad(final_norm_index() + 1); }
  float* res(std::int64_t l) { return res_.data() + l * B_ * T_ * cfg_.dim; }

  static void zero(float* p, std::int64_t n) { std::fill(p, p + n, 0.0f); }
  static void add_inplace(float* y, const float* x, std::int64_t n) {
    cpu::parallel_for(n, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) y[i] += x[i];
    }, 4096);
  }

  /// Sizes the activation buffers for (B, T); a no-op when they already fit.
  void prepare(std::int64_t B, std::int64_t T) {
    check(B > 0 && T > 0, "llama::forward: B and T must be positive");
    if (B == B_ && T == T_) return;
    const llama_config& c = cfg_;
    const std::int64_t N = B * T, D = c.dim, hd = head_dim(c), Hq = c.n_heads * hd,
                       Hk = kv_dim(c), F = ffn_hidden_dim(c), V = c.vocab_size;
    B_ = B;
    T_ = T;
    acts_.clear();
    acts_.resize(static_cast<std::size_t>(c.n_layers));
    act_bytes_ = 0;
    auto mk = [&](std::int64_t n) {
      act_bytes_ += n * 4;
      return tensor<float>({n});
    };
    for (auto& a : acts_) {
      a.an = mk(N * D), a.rstd1 = mk(N), a.q = mk(N * Hq), a.k = mk(N * Hk), a.v = mk(N * Hk);
      a.att = mk(N * Hq), a.lse = mk(B * c.n_heads * T), a.mid = mk(N * D), a.fn = mk(N * D);
      a.rstd2 = mk(N), a.h1 = mk(N * F), a.h3 = mk(N * F), a.act = mk(N * F);
    }
    res_ = mk((c.n_layers + 1) * N * D), xf_ = mk(N * D), rstdf_ = mk(N), logits_ = mk(N * V);
    dres_ = mk(N * D), dtmp_ = mk(N * D), datt_ = mk(N * Hq), dq_ = mk(N * Hq);
    dk_ = mk(N * Hk), dv_ = mk(N * Hk), ffn_scratch_ = mk(2 * N * F);
    cos_ = mk(T * hd / 2), sin_ = mk(T * hd / 2);
    cpu::rope_config rc;
    rc.theta = c.rope_theta;
    rc.scaling = c.rope_scaling;
    rc.factor = c.rope_scale_factor;
    rc.low_freq_factor = c.rope_low_freq_factor;
    rc.high_freq_factor = c.rope_high_freq_factor;
    rc.original_context = c.rope_original_context;
    cpu::rope_table(cos_.data(), sin_.data(), T, hd, rc);
  }
};

/// A Llama model whose configuration `Config::config` is checked when the type is formed.
template <class Config>
class llama : public llama_model {
  static constexpr llama_config C = Config::config;
  static_assert(C.dim > 0 && C.n_layers > 0 && C.n_heads > 0 && C.n_kv_heads > 0 && C.vocab_size > 0,
                "tessera::llama<Config>: dim, n_layers, n_heads, n_kv_heads and vocab_size must be positive");
  static_assert(C.n_heads <= 0 || C.dim % C.n_heads == 0,
                "tessera::llama<Config>: dim is not divisible by n_heads; head_dim = dim / n_heads must be whole");
  static_assert(C.n_kv_heads <= 0 || C.n_heads % C.n_kv_heads == 0,
                "tessera::llama<Config>: n_heads is not divisible by n_kv_heads; each KV head must serve the same number of query heads");
  static_assert(C.n_heads <= 0 || (C.dim / C.n_heads) % 2 == 0,
                "tessera::llama<Config>: head_dim (dim / n_heads) is odd; RoPE rotates pairs and needs it even");

 public:
  static constexpr llama_config static_config = C;
  static constexpr std::int64_t parameter_count = param_count(C);
  llama() : llama_model(C) {}
};

}  // namespace tessera
