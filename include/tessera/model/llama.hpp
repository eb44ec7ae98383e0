// tessera/model/llama.hpp: the Llama 3 model template with explicit forward and backward.
// tessera-requires: openblas
//
// `tessera::llama<Config>` (Config one of debugmodel, llama3_1b, ..., or any type with a
// `static constexpr llama_config config`) is a llama_model whose configuration is checked
// at compile time. The math is TorchTitan's Llama 3 (pre-norm blocks, RMSNorm, GQA with
// interleaved RoPE and the Llama 3.1 frequency scaling, SwiGLU, untied or tied output),
// written in the style of llm.c: one parameter arena and one gradient arena of the same
// layout, and the model as three kinds of parts with a forward and a backward each --
//   the embedding            embed_forward / embed_backward        (llama_ends.hpp)
//   blocks 0 .. n_layers-1   block_forward / block_backward        (llama_block.hpp)
//   the head                 head_forward / head_backward          (llama_ends.hpp)
// forward() and backward() are loops over them; a pipeline stage calls the parts it owns
// (forward_embedding, forward_block, forward_head and their backwards), and activation
// checkpointing calls forward_block again.
//
// The model does not know it is parallel. A `llama_shard` (llama_shard.hpp) says which
// part of the math this rank computes, as sizes; the hooks object runs at the points where
// a layout changes (llama_block.hpp) and at the begin/end of each part: blocks are parts
// 0..n_layers-1 and the two ends together are part `ends_part()` (begun before the
// embedding's forward, ended after the head's; begun before the head's backward, ended
// after the embedding's). `serial_hooks` does nothing; the parallel runtime
// (tessera/parallel/) runs the planner's collectives there.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/core/trace.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/model/llama_block.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_ends.hpp>
#include <tessera/model/llama_params.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

class llama_model {
 public:
  /// `allocate`: own parameter and gradient arenas of this shard's shapes (a parallel
  /// runtime that manages the memory itself binds pointers with bind() instead).
  explicit llama_model(const llama_config& c, bool allocate = true) : llama_model(c, llama_shard::whole(c), allocate) {}
  llama_model(const llama_config& c, const llama_shard& s, bool allocate = true) : cfg_(c), shard_(s) {
    check_config(c);
    const std::string problem = shard_problem(c, s);
    check(problem.empty(), "llama config '" + std::string(c.name) + "': bad shard: " + problem);
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
  /// The part of the ends (blocks are parts 0..n_layers-1).
  std::int64_t ends_part() const noexcept { return cfg_.n_layers; }
  /// The part parameter i belongs to.
  std::int64_t part_of(std::int64_t i) const {
    const std::int64_t layer = entry(i).layer;
    return layer >= 0 ? layer : ends_part();
  }
  /// This shard's block of parameter i (the whole shape for llama_shard::whole).
  param_shape local_shape(std::int64_t i) const { return local_param_shape(cfg_, shard_, entry(i)); }

  float* param(std::int64_t i) { return pptr_[static_cast<std::size_t>(i)]; }
  const float* param(std::int64_t i) const { return pptr_[static_cast<std::size_t>(i)]; }
  float* grad(std::int64_t i) { return gptr_[static_cast<std::size_t>(i)]; }
  const float* grad(std::int64_t i) const { return gptr_[static_cast<std::size_t>(i)]; }
  /// Points parameter i and its gradient at memory the caller owns (local_shape(i) floats each).
  void bind(std::int64_t i, float* p, float* g) {
    pptr_[static_cast<std::size_t>(i)] = p;
    gptr_[static_cast<std::size_t>(i)] = g;
  }
  /// Block l's parameters and gradients by name.
  block_params block_weights_of(std::int64_t l) const {
    return block_weights_from<const float>(pptr_.data() + block_base(l));
  }
  block_grads block_grads_of(std::int64_t l) const { return block_weights_from<float>(gptr_.data() + block_base(l)); }
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
      const auto [d, off] = local_param_offset(cfg_, shard_, entry(i));
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
    check(static_cast<std::int64_t>(targets.size()) == B * T,
          "llama::forward: inputs and targets must hold B*T = " + std::to_string(B * T) + " ids");
    h.forward_begin(ends_part());
    {
      trace::scope s("forward embedding", "part", ends_part());
      forward_embedding(inputs, B, T, h);
    }
    for (std::int64_t l = 0; l < cfg_.n_layers; ++l) {
      trace::scope s("forward block", "block", l);  // with the FSDP unit's gathers (hooks)
      h.forward_begin(l);
      forward_block(l, h);
      h.forward_end(l);
    }
    float loss;
    {
      trace::scope s("forward head", "part", ends_part());
      loss = forward_head(targets, need_backward, loss_scale, h);
    }
    h.forward_end(ends_part());
    return loss;
  }

  /// Accumulates into the gradients the gradient prepared by the last forward().
  template <class Hooks>
  void backward(Hooks& h) {
    h.backward_begin(ends_part());
    {
      trace::scope s("backward head", "part", ends_part());
      backward_head(h);
    }
    for (std::int64_t l = cfg_.n_layers - 1; l >= 0; --l) {
      trace::scope s("backward block", "block", l);  // with the FSDP unit's gradient reduction (hooks)
      h.backward_begin(l);
      backward_block(l, h);
      h.backward_end(l);
    }
    {
      trace::scope s("backward embedding", "part", ends_part());
      backward_embedding(h);
    }
    h.backward_end(ends_part());
  }

  // ---- the parts, for callers that run them one by one (pipeline stages, recompute) ----

  /// Sizes the buffers for [B, T] and embeds the ids into residual(0).
  template <class Hooks>
  void forward_embedding(std::span<const std::int32_t> inputs, std::int64_t B, std::int64_t T, Hooks& h) {
    check(static_cast<std::int64_t>(inputs.size()) == B * T,
          "llama::forward: inputs and targets must hold B*T = " + std::to_string(B * T) + " ids");
    prepare(B, T);
    inputs_.assign(inputs.begin(), inputs.end());
    embed_forward(residual(0), inputs_.data(), param(0), scratch_.proj.data(), dims_, h);
  }
  /// residual(l + 1) = block l (residual(l)).
  template <class Hooks>
  void forward_block(std::int64_t l, Hooks& h) {
    block_forward(residual(l + 1), residual(l), block_weights_of(l), saved_[static_cast<std::size_t>(l)], scratch_,
                  dims_, h);
  }
  /// The loss of residual(n_layers) against the targets (see forward()).
  template <class Hooks>
  float forward_head(std::span<const std::int32_t> targets, bool need_backward, float loss_scale, Hooks& h) {
    check(static_cast<std::int64_t>(targets.size()) == dims_.N(),
          "llama::forward: inputs and targets must hold B*T = " + std::to_string(dims_.N()) + " ids");
    targets_.assign(targets.begin(), targets.end());
    const float loss = head_forward(residual(cfg_.n_layers), targets_.data(), param(final_norm_index()),
                                    output_weight(), head_, need_backward, loss_scale, dims_, h);
    have_dlogits_ = need_backward;
    return loss;
  }
  /// The head's gradients; leaves the gradient of residual(n_layers) in residual_grad().
  template <class Hooks>
  void backward_head(Hooks& h) {
    check(have_dlogits_, "llama::backward: call forward(..., need_backward = true) first");
    have_dlogits_ = false;
    head_backward(residual_grad(), grad(final_norm_index()), output_grad(), residual(cfg_.n_layers),
                  param(final_norm_index()), output_weight(), head_, scratch_.dfull.data(), scratch_.dtmp.data(),
                  dims_, h);
  }
  /// residual_grad(): the gradient of residual(l + 1) in, of residual(l) out.
  template <class Hooks>
  void backward_block(std::int64_t l, Hooks& h) {
    block_backward(residual_grad(), block_grads_of(l), residual(l), block_weights_of(l),
                   saved_[static_cast<std::size_t>(l)], scratch_, dims_, h);
  }
  template <class Hooks>
  void backward_embedding(Hooks& h) {
    embed_backward(grad(0), residual_grad(), inputs_.data(), scratch_.dgath.data(), dims_, h);
  }

  /// The residual stream in front of block l (l = n_layers: behind the last), [Nr, D].
  float* residual(std::int64_t l) { return res_.data() + l * dims_.Nr() * cfg_.dim; }
  /// The gradient of the residual stream where backward currently is, [Nr, D].
  float* residual_grad() { return scratch_.dres.data(); }
  /// The sizes of the current (B, T) on this shard.
  const llama_dims& dims() const noexcept { return dims_; }

  /// Bytes of activations (and backward scratch) held for the current (B, T): what was
  /// allocated, which llama_activation_bytes predicts.
  std::int64_t activation_bytes() const { return act_bytes_; }

 private:
  llama_config cfg_;
  llama_shard shard_;
  arena<float> params_, grads_;
  std::vector<float*> pptr_, gptr_;
  llama_dims dims_;
  std::int64_t act_bytes_ = 0;
  std::vector<block_saved> saved_;
  block_scratch scratch_;
  head_saved head_;
  tensor<float> res_;
  std::vector<std::int32_t> inputs_, targets_;
  bool have_dlogits_ = false;

  arena<float>& owned(arena<float>& a) {
    check(a.size() > 0, "llama_model: this model's parameters are bound by a parallel runtime; it owns no arena");
    return a;
  }
  std::int64_t offset(std::int64_t i) const {
    return static_cast<std::int64_t>(params_.layout().slots()[static_cast<std::size_t>(i)].offset);
  }
  static constexpr std::int64_t block_base(std::int64_t l) { return 1 + l * n_block_params; }
  std::int64_t final_norm_index() const { return block_base(cfg_.n_layers); }
  float* output_weight() { return cfg_.tied_embeddings ? param(0) : param(final_norm_index() + 1); }
  float* output_grad() { return cfg_.tied_embeddings ? grad(0) : grad(final_norm_index() + 1); }

  /// Sizes the buffers for (B, T); a no-op when they already fit.
  void prepare(std::int64_t B, std::int64_t T) {
    check(B > 0 && T > 0, "llama::forward: B and T must be positive");
    if (B == dims_.B && T == dims_.T) return;
    const std::int64_t P = shard_.seq_parts;
    check(P == 1 || T >= P, "llama::forward: the residual stream split over " + std::to_string(P) +
                                " sequence parts needs seq_len >= " + std::to_string(P) + " (got " + std::to_string(T) +
                                ")");
    dims_ = dims_of(cfg_, shard_, B, T);
    saved_.clear();
    saved_.resize(static_cast<std::size_t>(cfg_.n_layers));
    act_bytes_ = 0;
    for (auto& s : saved_) {
      s.allocate(dims_);
      act_bytes_ += 4 * total_of(block_saved_sizes(dims_));
    }
    res_ = tensor<float>({(cfg_.n_layers + 1) * dims_.Nr() * cfg_.dim});
    head_.allocate(dims_);
    scratch_.allocate(dims_);
    act_bytes_ += static_cast<std::int64_t>(res_.numel()) * 4 + 4 * total_of(ends_saved_sizes(dims_)) +
                  4 * total_of(block_scratch_sizes(dims_));
    const llama_config& c = cfg_;
    cpu::rope_config rc;
    rc.theta = c.rope_theta;
    rc.scaling = c.rope_scaling;
    rc.factor = c.rope_scale_factor;
    rc.low_freq_factor = c.rope_low_freq_factor;
    rc.high_freq_factor = c.rope_high_freq_factor;
    rc.original_context = c.rope_original_context;
    cpu::rope_table(scratch_.cos.data(), scratch_.sin.data(), T, dims_.hd, rc);
  }
};

/// A Llama model whose configuration `Config::config` is checked when the type is formed
/// (config_problem, in config_words' words; tests/compile_fail/model_*).
template <class Config>
class llama : public llama_model {
  static constexpr llama_config C = Config::config;
  static constexpr config_error E = config_problem(C);
  static_assert(E != config_error::nonpositive,
                "tessera::llama<Config>: dim, n_layers, n_heads, n_kv_heads and vocab_size must be positive");
  static_assert(E != config_error::dim_not_divisible,
                "tessera::llama<Config>: dim is not divisible by n_heads; head_dim = dim / n_heads must be whole");
  static_assert(E != config_error::heads_not_divisible,
                "tessera::llama<Config>: n_heads is not divisible by n_kv_heads; each KV head must serve the same number of query heads");
  static_assert(E != config_error::odd_head_dim,
                "tessera::llama<Config>: head_dim (dim / n_heads) is odd; RoPE rotates pairs and needs it even");

 public:
  static constexpr llama_config static_config = C;
  static constexpr std::int64_t parameter_count = param_count(C);
  llama() : llama_model(C) {}
};

}  // namespace tessera
