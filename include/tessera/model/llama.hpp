// tessera/model/llama.hpp: the Llama 3 model template with explicit forward and backward.
// tessera-requires: openblas
//
// `tessera::llama<Config>` (Config one of debugmodel, llama3_1b, ..., or any type with a
// `static constexpr llama_config config`) is a llama_model whose configuration is checked
// at compile time. The math is TorchTitan's Llama 3 (pre-norm blocks, RMSNorm, GQA with
// interleaved RoPE and the Llama 3.1 frequency scaling, SwiGLU, untied or tied output),
// written as calls to tessera's CPU kernels in the style of llm.c: one parameter arena and
// one gradient arena of the same layout, activations kept for backward in buffers sized for
// the current (B, T), every shape visible at the call.
//
// The model does not know it is parallel. A `llama_shard` says which part of the math this
// rank computes (its heads, FFN columns and vocabulary rows under tensor parallel; its part
// of the sequence in norms under sequence parallel), and forward/backward call a hooks
// object at the points where a layout changes: `gather` (residual -> every token, in front
// of a column-parallel region), `reduce` (partial sums -> residual, after a row-parallel
// region), the loss-parallel row reductions, and the begin/end of each FSDP unit (a block,
// or the root: embedding, final norm and output). `serial_hooks` does nothing; the
// parallel runtime (tessera/train/parallel_llama.hpp) runs the planner's collectives there.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
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
#include <tessera/kernels/cpu/vocab_parallel.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_params.hpp>
#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

/// The part of the model's math one rank computes. tp_size = 1: all of it.
struct llama_shard {
  std::int64_t tp_rank = 0;
  std::int64_t tp_size = 1;
  bool sequence_parallel = false;  ///< norms and residual adds on this rank's tokens only
  bool loss_parallel = false;      ///< cross-entropy on this rank's vocabulary columns
};

/// The hooks of a single rank: every layout change is the identity.
struct serial_hooks {
  void forward_begin(std::int64_t) {}
  void forward_end(std::int64_t) {}
  void backward_begin(std::int64_t) {}
  void backward_end(std::int64_t) {}
  /// Residual [rows, D] -> every token [B*T, D]; returns the result (`in` when nothing moves).
  const float* gather(const float* in, float*) { return in; }
  /// Partial sums [B*T, D] -> residual; returns the result.
  const float* reduce(const float* in, float*) { return in; }
  /// Loss parallel: [B*T] row maxima reduced (max) and [B*T, 2] statistics reduced (sum), in place.
  void reduce_row_max(float*) {}
  void reduce_row_stats(float*) {}
  /// TP without loss parallel: logits [B*T, Vl] -> [B*T, V], and the gradient back.
  void gather_logits(const float*, float*) {}
  void slice_logits(const float*, float*) {}
};

class llama_model {
 public:
  /// The FSDP unit of the embedding, final norm and output (blocks are units 0..n_layers-1).
  std::int64_t root_unit() const noexcept { return cfg_.n_layers; }

  /// `allocate`: own parameter and gradient arenas of this shard's shapes (a parallel
  /// runtime that manages the memory itself binds pointers with bind() instead).
  explicit llama_model(const llama_config& c, llama_shard s = {}, bool allocate = true) : cfg_(c), shard_(s) {
    check_config(c);
    check(s.tp_size >= 1 && s.tp_rank >= 0 && s.tp_rank < s.tp_size, "llama_model: bad tensor-parallel shard");
    check(c.n_heads % s.tp_size == 0 && c.n_kv_heads % s.tp_size == 0 && ffn_hidden_dim(c) % s.tp_size == 0,
          "llama config '" + std::string(c.name) + "': tensor parallel over " + std::to_string(s.tp_size) +
              " ranks needs n_heads, n_kv_heads and the FFN width divisible by it");
    pptr_.assign(static_cast<std::size_t>(n_tensors()), nullptr);
    gptr_.assign(static_cast<std::size_t>(n_tensors()), nullptr);
    if (!allocate) return;
    arena_layout layout;
    for (std::int64_t i = 0; i < n_tensors(); ++i) {
      const param_shape ls = local_shape(i);
      const std::int64_t shape[2] = {ls.rows, ls.cols};
      layout.add(titan_name(entry(i)), ls.is_vector() ? std::span<const std::int64_t>(shape + 1, 1)
                                                      : std::span<const std::int64_t>(shape, 2));
    }
    params_ = arena<float>(layout);
    grads_ = arena<float>(layout);
    for (std::int64_t i = 0; i < n_tensors(); ++i) bind(i, params_.data() + offset(i), grads_.data() + offset(i));
  }

  const llama_config& config() const noexcept { return cfg_; }
  const llama_shard& shard() const noexcept { return shard_; }
  std::int64_t n_tensors() const noexcept { return param_tensor_count(cfg_); }
  param_entry entry(std::int64_t i) const { return param_at(cfg_, i); }
  std::string name(std::int64_t i) const { return titan_name(entry(i)); }
  std::int64_t num_params() const noexcept { return param_count(cfg_); }
  /// The FSDP unit parameter i belongs to.
  std::int64_t unit_of(std::int64_t i) const {
    const param_entry e = entry(i);
    return (e.role == param_role::embedding || e.role == param_role::final_norm || e.role == param_role::output)
               ? root_unit()
               : e.layer;
  }
  /// This shard's block of parameter i (the whole shape when tp_size = 1).
  param_shape local_shape(std::int64_t i) const {
    param_shape s = entry(i).shape;
    const int d = s.is_vector() ? -1 : parallel::tp_dim(tp_style_of(entry(i).role));
    if (d == 0) s.rows = split_size(s.rows, shard_.tp_size, shard_.tp_rank);
    if (d == 1) s.cols = split_size(s.cols, shard_.tp_size, shard_.tp_rank);
    return s;
  }

  float* param(std::int64_t i) { return pptr_[static_cast<std::size_t>(i)]; }
  const float* param(std::int64_t i) const { return pptr_[static_cast<std::size_t>(i)]; }
  float* grad(std::int64_t i) { return gptr_[static_cast<std::size_t>(i)]; }
  const float* grad(std::int64_t i) const { return gptr_[static_cast<std::size_t>(i)]; }
  /// Points parameter i and its gradient at memory the caller owns (local_shape(i) floats each).
  void bind(std::int64_t i, float* p, float* g) {
    pptr_[static_cast<std::size_t>(i)] = p;
    gptr_[static_cast<std::size_t>(i)] = g;
  }
  /// The flat arenas (padding between slots is zero and stays zero under AdamW).
  arena<float>& params() { return owned(params_); }
  arena<float>& grads() { return owned(grads_); }

  /// TorchTitan's initialization (init_param) of this shard's parameters.
  void init_weights(std::uint64_t seed) {
    std::vector<float> full;
    for (std::int64_t i = 0; i < n_tensors(); ++i) {
      const param_shape g = entry(i).shape, l = local_shape(i);
      if (g.numel() == l.numel()) {
        init_param(cfg_, i, seed, param(i));
        continue;
      }
      full.resize(static_cast<std::size_t>(g.numel()));
      init_param(cfg_, i, seed, full.data());
      const int d = parallel::tp_dim(tp_style_of(entry(i).role));
      const std::int64_t off = split_offset(d == 0 ? g.rows : g.cols, shard_.tp_size, shard_.tp_rank);
      for (std::int64_t r = 0; r < l.rows; ++r)
        std::copy_n(full.data() + (d == 0 ? (off + r) * g.cols : r * g.cols + off), l.cols, param(i) + r * l.cols);
    }
  }

  void zero_grad() { grads().zero(); }

  /// Forward over this rank's inputs and targets [B, T] (row-major). Returns the mean
  /// cross-entropy over its tokens. When `need_backward`, also prepares the logits'
  /// gradient of `loss_scale` times that mean (1 / accumulation steps for gradient
  /// accumulation; times this rank's share of the tokens under data parallel) for
  /// backward(). Negative targets are ignored (torch's ignore_index).
  float forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t B,
                std::int64_t T, bool need_backward = true, float loss_scale = 1.0f) {
    serial_hooks h;
    return forward(inputs, targets, B, T, need_backward, loss_scale, h);
  }
  void backward() {
    serial_hooks h;
    backward(h);
  }

  template <class Hooks>
  float forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t B,
                std::int64_t T, bool need_backward, float loss_scale, Hooks& h) {
    check(static_cast<std::int64_t>(inputs.size()) == B * T && static_cast<std::int64_t>(targets.size()) == B * T,
          "llama::forward: inputs and targets must hold B*T = " + std::to_string(B * T) + " ids");
    prepare(B, T);
    const llama_config& c = cfg_;
    const std::int64_t N = B * T, Nr = B * Tl_, D = c.dim, hd = head_dim(c), Hq = heads_ * hd, Hk = kv_heads_ * hd,
                       F = ffn_, V = c.vocab_size;
    const float eps = static_cast<float>(c.norm_eps);
    inputs_.assign(inputs.begin(), inputs.end());
    targets_.assign(targets.begin(), targets.end());
    h.forward_begin(root_unit());
    cpu::embedding_shard_forward(proj_.data(), inputs_.data(), param(0), N, V, v0_, Vl_, D);
    settle(res(0), h.reduce(proj_.data(), res(0)), Nr * D);
    for (std::int64_t l = 0; l < c.n_layers; ++l) {
      h.forward_begin(l);
      layer_acts& a = acts_[static_cast<std::size_t>(l)];
      const float* x = res(l);
      cpu::rmsnorm_forward(a.an.data(), a.rstd1.data(), x, lp(l, 0), Nr, D, eps);
      a.anf = h.gather(a.an.data(), a.an_full.data());
      cpu::matmul_forward(a.q.data(), a.anf, lp(l, 1), nullptr, N, D, Hq);
      cpu::matmul_forward(a.k.data(), a.anf, lp(l, 2), nullptr, N, D, Hk);
      cpu::matmul_forward(a.v.data(), a.anf, lp(l, 3), nullptr, N, D, Hk);
      cpu::rope_forward(a.q.data(), a.q.data(), cos_.data(), sin_.data(), B, T, heads_, hd);
      cpu::rope_forward(a.k.data(), a.k.data(), cos_.data(), sin_.data(), B, T, kv_heads_, hd);
      cpu::attention_forward(a.att.data(), a.lse.data(), a.q.data(), a.k.data(), a.v.data(), B, T, heads_, kv_heads_,
                             hd);
      cpu::matmul_forward(proj_.data(), a.att.data(), lp(l, 4), nullptr, N, Hq, D);
      add(a.mid.data(), x, h.reduce(proj_.data(), a.mid.data()), Nr * D);  // mid = x + attention(x)
      cpu::rmsnorm_forward(a.fn.data(), a.rstd2.data(), a.mid.data(), lp(l, 5), Nr, D, eps);
      a.fnf = h.gather(a.fn.data(), a.fn_full.data());
      cpu::feed_forward_forward(proj_.data(), a.h1.data(), a.h3.data(), a.act.data(), a.fnf, lp(l, 6), lp(l, 8),
                                lp(l, 7), N, D, F);
      add(res(l + 1), a.mid.data(), h.reduce(proj_.data(), res(l + 1)), Nr * D);  // out = mid + ffn(mid)
      h.forward_end(l);
    }
    cpu::rmsnorm_forward(xf_.data(), rstdf_.data(), res(c.n_layers), param(final_norm_index()), Nr, D, eps);
    xff_ = h.gather(xf_.data(), xf_full_.data());
    cpu::matmul_forward(logits_.data(), xff_, output_weight(), nullptr, N, D, Vl_);
    const std::int64_t count = cpu::count_targets(targets_.data(), N, V);
    const float scale = need_backward && count ? loss_scale / static_cast<float>(count) : 0.0f;
    float* dl = need_backward ? logits_.data() : nullptr;
    float loss;
    if (Vl_ == V) {  // the whole vocabulary here
      loss = need_backward ? cpu::cross_entropy_forward_backward(dl, nullptr, logits_.data(), targets_.data(), N, V, scale)
                           : cpu::cross_entropy_forward(nullptr, logits_.data(), targets_.data(), N, V);
    } else if (shard_.loss_parallel) {
      cpu::ce_shard_row_max(rowmax_.data(), logits_.data(), N, Vl_);
      h.reduce_row_max(rowmax_.data());
      cpu::ce_shard_row_stats(stats_.data(), logits_.data(), rowmax_.data(), targets_.data(), N, v0_, Vl_);
      h.reduce_row_stats(stats_.data());
      loss = cpu::ce_shard_finish(dl, logits_.data(), rowmax_.data(), stats_.data(), targets_.data(), N, V, v0_, Vl_,
                                  scale);
    } else {
      h.gather_logits(logits_.data(), logits_full_.data());
      float* dfull = need_backward ? logits_full_.data() : nullptr;
      loss = need_backward
                 ? cpu::cross_entropy_forward_backward(dfull, nullptr, logits_full_.data(), targets_.data(), N, V, scale)
                 : cpu::cross_entropy_forward(nullptr, logits_full_.data(), targets_.data(), N, V);
      if (need_backward) h.slice_logits(logits_full_.data(), logits_.data());
    }
    h.forward_end(root_unit());
    have_dlogits_ = need_backward;
    return loss;
  }

  /// Accumulates into the gradients the gradient prepared by the last forward().
  template <class Hooks>
  void backward(Hooks& h) {
    check(have_dlogits_, "llama::backward: call forward(..., need_backward = true) first");
    have_dlogits_ = false;
    const llama_config& c = cfg_;
    const std::int64_t B = B_, T = T_, N = B * T, Nr = B * Tl_, D = c.dim, hd = head_dim(c), Hq = heads_ * hd,
                       Hk = kv_heads_ * hd, F = ffn_, V = c.vocab_size;
    float* dres = dres_.data();  // gradient of the residual stream (this rank's rows), updated in place
    float* dfull = dfull_.data();  // gradients in every-token rows, partial over tp
    h.backward_begin(root_unit());
    zero(dfull, N * D);
    cpu::matmul_backward(dfull, output_grad(), nullptr, logits_.data(), xff_, output_weight(), N, D, Vl_);
    const float* dxf = h.reduce(dfull, dtmp_.data());
    zero(dres, Nr * D);
    cpu::rmsnorm_backward(dres, grad(final_norm_index()), dxf, res(c.n_layers), param(final_norm_index()),
                          rstdf_.data(), Nr, D);
    for (std::int64_t l = c.n_layers - 1; l >= 0; --l) {
      h.backward_begin(l);
      layer_acts& a = acts_[static_cast<std::size_t>(l)];
      // out = mid + R(ffn(G(norm(mid)))): G's backward is R and R's is G.
      zero(dfull, N * D);
      cpu::feed_forward_backward(dfull, lg(l, 6), lg(l, 8), lg(l, 7), h.gather(dres, dgath_.data()), a.fnf,
                                 a.h1.data(), a.h3.data(), a.act.data(), lp(l, 6), lp(l, 8), lp(l, 7), N, D, F,
                                 ffn_scratch_.data());
      cpu::rmsnorm_backward(dres, lg(l, 5), h.reduce(dfull, dtmp_.data()), a.mid.data(), lp(l, 5), a.rstd2.data(),
                            Nr, D);
      // mid = x + R(wo(attention(rope(q), rope(k), v))) with q, k, v = w{q,k,v}(G(norm(x))).
      zero(datt_.data(), N * Hq);
      cpu::matmul_backward(datt_.data(), lg(l, 4), nullptr, h.gather(dres, dgath_.data()), a.att.data(), lp(l, 4), N,
                           Hq, D);
      cpu::attention_backward(dq_.data(), dk_.data(), dv_.data(), datt_.data(), a.q.data(), a.k.data(), a.v.data(),
                              a.att.data(), a.lse.data(), B, T, heads_, kv_heads_, hd);
      cpu::rope_backward(dq_.data(), dq_.data(), cos_.data(), sin_.data(), B, T, heads_, hd);
      cpu::rope_backward(dk_.data(), dk_.data(), cos_.data(), sin_.data(), B, T, kv_heads_, hd);
      zero(dfull, N * D);
      cpu::matmul_backward(dfull, lg(l, 1), nullptr, dq_.data(), a.anf, lp(l, 1), N, D, Hq);
      cpu::matmul_backward(dfull, lg(l, 2), nullptr, dk_.data(), a.anf, lp(l, 2), N, D, Hk);
      cpu::matmul_backward(dfull, lg(l, 3), nullptr, dv_.data(), a.anf, lp(l, 3), N, D, Hk);
      cpu::rmsnorm_backward(dres, lg(l, 0), h.reduce(dfull, dtmp_.data()), res(l), lp(l, 0), a.rstd1.data(), Nr, D);
      h.backward_end(l);
    }
    cpu::embedding_shard_backward(grad(0), h.gather(dres, dgath_.data()), inputs_.data(), N, V, v0_, Vl_, D);
    h.backward_end(root_unit());
  }

  /// Bytes of activations (and backward scratch) held for the current (B, T).
  std::int64_t activation_bytes() const { return act_bytes_; }

 private:
  struct layer_acts {
    tensor<float> an, rstd1, an_full, q, k, v, att, lse, mid, fn, rstd2, fn_full, h1, h3, act;
    const float* anf = nullptr;  // the norm outputs as the column-parallel GEMMs saw them
    const float* fnf = nullptr;
  };
  llama_config cfg_;
  llama_shard shard_;
  arena<float> params_, grads_;
  std::vector<float*> pptr_, gptr_;
  std::int64_t B_ = 0, T_ = 0, Tl_ = 0, act_bytes_ = 0;
  std::int64_t heads_ = 0, kv_heads_ = 0, ffn_ = 0, v0_ = 0, Vl_ = 0;
  std::vector<layer_acts> acts_;
  tensor<float> res_, xf_, xf_full_, rstdf_, logits_, logits_full_, rowmax_, stats_, cos_, sin_, proj_;
  tensor<float> dres_, dtmp_, dfull_, dgath_, datt_, dq_, dk_, dv_, ffn_scratch_;
  const float* xff_ = nullptr;
  std::vector<std::int32_t> inputs_, targets_;
  bool have_dlogits_ = false;

  arena<float>& owned(arena<float>& a) {
    check(a.size() > 0, "llama_model: this model's parameters are bound by a parallel runtime; it owns no arena");
    return a;
  }
  std::int64_t offset(std::int64_t i) const {
    return static_cast<std::int64_t>(params_.layout().slots()[static_cast<std::size_t>(i)].offset);
  }
  std::int64_t final_norm_index() const { return 1 + cfg_.n_layers * n_block_params; }
  float* lp(std::int64_t layer, int k) { return param(1 + layer * n_block_params + k); }
  float* lg(std::int64_t layer, int k) { return grad(1 + layer * n_block_params + k); }
  float* output_weight() { return cfg_.tied_embeddings ? param(0) : param(final_norm_index() + 1); }
  float* output_grad() { return cfg_.tied_embeddings ? grad(0) : grad(final_norm_index() + 1); }
  float* res(std::int64_t l) { return res_.data() + l * B_ * Tl_ * cfg_.dim; }

  static void zero(float* p, std::int64_t n) { std::fill(p, p + n, 0.0f); }
  /// y = a + b elementwise (b may alias y).
  static void add(float* y, const float* a, const float* b, std::int64_t n) {
    cpu::parallel_for(n, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t i = lo; i < hi; ++i) y[i] = a[i] + b[i];
    }, 4096);
  }
  /// Makes `dst` hold the result a hook returned (a copy only when the hook returned its input).
  static void settle(float* dst, const float* result, std::int64_t n) {
    if (result != dst) std::memcpy(dst, result, static_cast<std::size_t>(n) * sizeof(float));
  }

  /// Sizes the activation buffers for (B, T); a no-op when they already fit.
  void prepare(std::int64_t B, std::int64_t T) {
    check(B > 0 && T > 0, "llama::forward: B and T must be positive");
    if (B == B_ && T == T_) return;
    const llama_config& c = cfg_;
    const std::int64_t P = shard_.tp_size, r = shard_.tp_rank;
    const bool split_seq = P > 1 && shard_.sequence_parallel;
    check(!split_seq || T >= P, "llama::forward: sequence parallel over " + std::to_string(P) +
                                    " ranks needs seq_len >= " + std::to_string(P) + " (got " + std::to_string(T) + ")");
    heads_ = c.n_heads / P, kv_heads_ = c.n_kv_heads / P, ffn_ = ffn_hidden_dim(c) / P;
    v0_ = split_offset(c.vocab_size, P, r), Vl_ = split_size(c.vocab_size, P, r);
    B_ = B, T_ = T, Tl_ = split_seq ? split_size(T, P, r) : T;
    const std::int64_t N = B * T, Nr = B * Tl_, D = c.dim, hd = head_dim(c), Hq = heads_ * hd, Hk = kv_heads_ * hd,
                       F = ffn_, V = c.vocab_size;
    acts_.clear();
    acts_.resize(static_cast<std::size_t>(c.n_layers));
    act_bytes_ = 0;
    auto mk = [&](std::int64_t n) {
      act_bytes_ += n * 4;
      return tensor<float>({n});
    };
    const std::int64_t full_rows = split_seq ? N : 0;  // every-token copies exist only under SP
    for (auto& a : acts_) {
      a.an = mk(Nr * D), a.rstd1 = mk(Nr), a.an_full = mk(full_rows * D), a.q = mk(N * Hq), a.k = mk(N * Hk);
      a.v = mk(N * Hk), a.att = mk(N * Hq), a.lse = mk(B * heads_ * T), a.mid = mk(Nr * D), a.fn = mk(Nr * D);
      a.rstd2 = mk(Nr), a.fn_full = mk(full_rows * D), a.h1 = mk(N * F), a.h3 = mk(N * F), a.act = mk(N * F);
    }
    res_ = mk((c.n_layers + 1) * Nr * D), xf_ = mk(Nr * D), xf_full_ = mk(full_rows * D), rstdf_ = mk(Nr);
    logits_ = mk(N * Vl_), logits_full_ = mk(Vl_ < V && !shard_.loss_parallel ? N * V : 0);
    rowmax_ = mk(Vl_ < V && shard_.loss_parallel ? N : 0), stats_ = mk(Vl_ < V && shard_.loss_parallel ? 2 * N : 0);
    proj_ = mk(N * D), dres_ = mk(Nr * D), dtmp_ = mk(P > 1 ? Nr * D : 0), dfull_ = mk(N * D);
    dgath_ = mk(full_rows * D), datt_ = mk(N * Hq), dq_ = mk(N * Hq), dk_ = mk(N * Hk), dv_ = mk(N * Hk);
    ffn_scratch_ = mk(2 * N * F), cos_ = mk(T * hd / 2), sin_ = mk(T * hd / 2);
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
