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
// forward() and backward() loop over them; a pipeline stage calls the parts it owns. Under
// activation checkpointing (set_checkpointing) a block keeps some of its saved tensors and
// its backward first recomputes the rest (llama_checkpointing.hpp).
// The model does not know it is parallel. A `llama_shard` (llama_shard.hpp) says which
// part of the math this rank computes, as sizes (set_positions: which tokens of each
// sequence); the hooks object runs where a layout changes (llama_block.hpp) and at the
// begin/end of each part: blocks are parts 0..n_layers-1, the two ends together part
// `ends_part()`. `serial_hooks` does nothing; the parallel runtime runs its collectives there.
// The model is a template on its kernel backend (kernels/backend.hpp): `llama_model` is
// basic_llama_model<cpu_kernels>; on another backend (cuda_kernels) the parameters, gradients
// and activations are in its memory and the parts run its kernels (device_llama.hpp adds
// the optimizer and host transfers), the split backward of zero-bubble schedules included.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/core/trace.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/pending_gradients.hpp>
#include <tessera/kernels/rounded_weights.hpp>
#include <tessera/model/llama_activations.hpp>
#include <tessera/model/llama_arena.hpp>
#include <tessera/model/llama_block.hpp>
#include <tessera/model/llama_checkpointing.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_ends.hpp>
#include <tessera/model/llama_params.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/model/llama_split_backward.hpp>
#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

template <kernel_backend K = cpu_kernels>
class basic_llama_model {
 public:
  using kernels = K;
  using space = typename K::space;
  using activations = basic_llama_activations<K>;
  using saved_type = basic_block_saved<space>;

  /// `allocate`: own parameter and gradient arenas of this shard's shapes (a parallel
  /// runtime that manages the memory itself binds pointers with bind() instead).
  explicit basic_llama_model(const llama_config& c, bool allocate = true)
      : basic_llama_model(c, llama_shard::whole(c), allocate) {}
  basic_llama_model(const llama_config& c, const llama_shard& s, bool allocate = true) : cfg_(c), shard_(s) {
    check_config(c);
    const std::string problem = shard_problem(c, s);
    check(problem.empty(), "llama config '" + std::string(c.name) + "': bad shard: " + problem);
    pptr_.assign(static_cast<std::size_t>(n_tensors()), nullptr);
    gptr_.assign(static_cast<std::size_t>(n_tensors()), nullptr);
    if (!allocate) return;
    const arena_layout layout = param_arena_layout(c, s);
    params_ = arena<float, space>(layout);
    grads_ = arena<float, space>(layout);
    for (std::int64_t i = 0; i < n_tensors(); ++i) bind(i, params_.data() + offset(i), grads_.data() + offset(i));
    kept_.cover(params_.data(), static_cast<std::int64_t>(params_.size()),  // bf16 operands: kept weights
                bf16_weight_elements(dims_of(c, s, 1, 1), c.n_layers));
    pending_.cover(grads_.data(), layout.slots());  // zero_grad() defers to the GEMMs
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
  std::int64_t part_of(std::int64_t i) const { return entry(i).layer >= 0 ? entry(i).layer : ends_part(); }
  /// The sizes of a batch [B, T] on this shard (checked: llama_shard.hpp's batch_dims_of).
  llama_dims batch_dims(std::int64_t B, std::int64_t T) const { return batch_dims_of(cfg_, shard_, B, T); }
  /// This shard's block of parameter i (the whole shape for llama_shard::whole).
  param_shape local_shape(std::int64_t i) const { return local_param_shape(cfg_, shard_, entry(i)); }

  float* param(std::int64_t i) { return weights_changed(), pptr_[static_cast<std::size_t>(i)]; }
  const float* param(std::int64_t i) const { return pptr_[static_cast<std::size_t>(i)]; }
  float* grad(std::int64_t i) { return settle_gradients(), raw_grad(i); }
  const float* grad(std::int64_t i) const { return settle_gradients(), raw_grad(i); }
  /// Points parameter i and its gradient at memory the caller owns (local_shape(i) floats each);
  /// other memory than it was bound to counts as a change of the weights (kept copies round again).
  void bind(std::int64_t i, float* p, float* g) {
    if (const float* was = pptr_[static_cast<std::size_t>(i)]; was != nullptr && was != p) weights_changed();
    pptr_[static_cast<std::size_t>(i)] = p;
    gptr_[static_cast<std::size_t>(i)] = g;
  }
  void bind_grad(std::int64_t i, float* g) { gptr_[static_cast<std::size_t>(i)] = g; }  // the weight as it is
  /// For a runtime that binds the parameters into an arena of its own (parallel_llama): keeps the
  /// bf16 copies of the weights bound inside [base, base + n), `capacity` elements (0: none), as
  /// an owned arena's; the runtime calls weights_changed() and steps AdamW by adamw_update(base, ...).
  void keep_rounded_weights(const float* base, std::int64_t n, std::int64_t capacity) {
    check(params_.size() == 0, "llama_model::keep_rounded_weights: the model keeps its own arena's weights");
    kept_.cover(base, n, capacity);
  }
  /// Block l's parameters and gradients by name.
  block_params block_weights_of(std::int64_t l) const { return block_weights_from<const float>(pptr_.data() + block_base(l)); }
  block_grads block_grads_of(std::int64_t l) const { return settle_gradients(), block_grads_at(l); }
  /// The flat arenas (padding between slots is zero and stays zero under AdamW).
  arena<float, space>& params() { return weights_changed(), owned(params_); }
  /// Written through a pointer from before the last forward: the kept bf16 weights round again.
  void weights_changed() noexcept { kept_.invalidate(); }
  /// One AdamW step over the owned arena (n floats; K::adamw_update's arithmetic) that writes
  /// the kept bf16 weights too, so that the next forward does not round them.
  void adamw_update(const float* g, float* m, float* v, std::int64_t n, std::int64_t step, const cpu::adamw_config& c) {
    adamw_update(owned(params_).data(), g, m, v, n, step, c);
  }
  /// The same over arena p: the owned one, or the one given to keep_rounded_weights.
  void adamw_update(float* p, const float* g, float* m, float* v, std::int64_t n, std::int64_t step,
                    const cpu::adamw_config& cfg) {
    adamw_update_kept<K>(kept_, p, g, m, v, n, step, cfg);
  }
  arena<float, space>& grads() { return settle_gradients(), owned(grads_); }

  /// TorchTitan's initialization (init_param) of this shard's parameters (made on the host).
  void init_weights(std::uint64_t seed) {
    init_shard_params(
        cfg_, shard_, seed,
        [this](std::int64_t i) -> float* { return space::host_accessible ? param(i) : nullptr; },
        [this](std::int64_t i, const float* values) { K::to_device(param(i), values, local_shape(i).numel()); });
  }

  /// Zero in name (kernels/pending_gradients.hpp): a weight's first GEMM writes it; the accessors
  /// above zero what is pending. A pointer kept from before reads zeros after one or a backward().
  void zero_grad() { owned(grads_), pending_.defer_all(); }

  /// Forward over this rank's inputs and targets [B, T] (row-major). Returns the mean
  /// cross-entropy over its tokens. When `need_backward`, also prepares the logits'
  /// gradient of `loss_scale` times that mean (1 / accumulation steps for gradient
  /// accumulation; times this rank's share of the tokens under data parallel) for
  /// backward(). Negative targets are ignored (torch's ignore_index).
  float forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t B,
                std::int64_t T, bool need_backward = true, float loss_scale = 1.0f) {
    basic_serial_hooks<K> h;
    return forward(inputs, targets, B, T, need_backward, loss_scale, h);
  }
  void backward() { basic_serial_hooks<K> h; backward(h); }

  template <class Hooks>
  float forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t B,
                std::int64_t T, bool need_backward, float loss_scale, Hooks& h) {
    check(static_cast<std::int64_t>(targets.size()) == B * T,
          "llama::forward: inputs and targets must hold B*T = " + std::to_string(B * T) + " ids");
    act_->have_dlogits = false;  // a forward that throws (bad ids) leaves nothing for backward()
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
    check(act_->embedding && act_->first == 0, "llama::forward_embedding: the activations in use hold no embedding");
    if constexpr (!space::host_accessible) cpu::check_tokens(inputs.data(), B * T, cfg_.vocab_size, "llama::forward");
    keep_ids<K>(act_->inputs, inputs);
    embed_forward<K>(residual(0), act_->inputs.data(), weight(0), scratch_.proj.data(), dims(), h);
  }
  /// residual(l + 1) = block l (residual(l)). A checkpointed block runs in the shared
  /// recompute buffer and keeps only its kept groups (llama_checkpointing.hpp).
  template <class Hooks>
  void forward_block(std::int64_t l, Hooks& h) {
    [[maybe_unused]] const auto kept = use_rounded_weights<K>(kept_);
    basic_block_work<space> w(saved(l), recompute_, keep_of(l));
    block_forward<K>(residual(l + 1), residual(l), block_weights_of(l), w.saved(), scratch_, dims(), h);
  }
  /// The loss of residual(n_layers) against the targets (see forward()).
  template <class Hooks>
  float forward_head(std::span<const std::int32_t> targets, bool need_backward, float loss_scale, Hooks& h) {
    check(act_->head && act_->last == cfg_.n_layers, "llama::forward_head: the activations in use hold no head");
    check(static_cast<std::int64_t>(targets.size()) == dims().N(),
          "llama::forward: inputs and targets must hold B*T = " + std::to_string(dims().N()) + " ids");
    keep_ids<K>(act_->targets, targets);
    [[maybe_unused]] const auto kept = use_rounded_weights<K>(kept_);
    const float loss = head_forward<K>(residual(cfg_.n_layers), act_->targets.data(), weight(final_norm_index()),
                                    output_weight(), act_->head_buffers, need_backward, loss_scale, dims(), h);
    act_->have_dlogits = need_backward;
    return loss;
  }
  /// The head's gradients; leaves the gradient of residual(n_layers) in residual_grad().
  template <class Hooks>
  void backward_head(Hooks& h) {
    take_dlogits();
    [[maybe_unused]] const auto kept = use_rounded_weights<K>(kept_);
    auto g = gradient_part(final_norm_index(), n_tensors() - final_norm_index());
    head_backward<K>(residual_grad(), raw_grad(final_norm_index()), output_grad(), residual(cfg_.n_layers),
                  weight(final_norm_index()), output_weight(), act_->head_buffers, scratch_.dfull.data(),
                  scratch_.dtmp.data(), dims(), h);
    g.done();
  }
  /// residual_grad(): the gradient of residual(l + 1) in, of residual(l) out. A checkpointed
  /// block first recomputes what it did not keep (rebuild()).
  template <class Hooks>
  void backward_block(std::int64_t l, Hooks& h) {
    [[maybe_unused]] const auto kept = use_rounded_weights<K>(kept_);
    basic_block_work<space> w(saved(l), recompute_, keep_of(l));
    rebuild(w, l, h);
    auto g = gradient_part(block_base(l), n_block_params);
    block_backward<K>(residual_grad(), block_grads_at(l), residual(l), block_weights_of(l), w.saved(), scratch_, dims(),
                   h);
    g.done();
  }

  // ---- activation checkpointing (llama_checkpointing.hpp) ----

  /// Checkpoints blocks as `ac` says (sequence_parallel: whether the model runs under SP, which
  /// TorchTitan's op policy looks at). Takes effect for the activations made from now on.
  void set_checkpointing(const ac_settings& ac, bool sequence_parallel = false) {
    ac_ = ac, ac_sp_ = sequence_parallel;
    own_ = activations{};  // re-made for the next batch
    scratch_dims_ = llama_dims{};
  }
  const ac_settings& checkpointing() const noexcept { return ac_; }

  /// The global positions of each sequence's tokens this model computes (context parallel:
  /// a part of every sequence; balanced per document, B x T: each row's), RoPE's angles.
  /// Empty: 0..T-1. The tables are remade now when they keep their size, else with the scratch.
  void set_positions(std::vector<std::int64_t> p) {
    if (p == positions_) return;
    positions_ = std::move(p);
    if (static_cast<std::int64_t>(positions_.size()) != scratch_dims_.rope_T()) scratch_dims_ = llama_dims{};
    else rope_tables<K>(scratch_, scratch_dims_, cfg_, positions_);
  }
  /// The groups block l keeps (ac_keep_all: not checkpointed).
  std::uint16_t keep_of(std::int64_t l) const { return ac_keep_mask(ac_, l, ac_sp_); }
  /// The keep mask of the checkpointed blocks (ac_keep_all when none is).
  std::uint16_t checkpointed_keep() const { return ac_checkpointed_keep(ac_, cfg_.n_layers, ac_sp_); }
  /// Matmul and attention FLOPs the recomputes did since construction (or reset).
  std::int64_t recompute_flops() const noexcept { return recompute_flops_; }
  void reset_recompute_flops() noexcept { recompute_flops_ = 0; }
  /// Before a checkpointed block's backward: rebuilds in `w` what it did not keep, with the
  /// backward's parameters and hooks (under FSDP the gathered ones, under TP its collectives again).
  template <class Hooks>
  void rebuild(basic_block_work<space>& w, std::int64_t l, Hooks& h) {
    if (w.checkpointed())
      block_recompute<K>(residual(l), block_weights_of(l), w.saved(), scratch_, dims(), h, w.keep(), recompute_flops_);
  }
  template <class Hooks>
  void backward_embedding(Hooks& h) {
    gradient_part(0, 1).done();  // the embedding's gradient zeroed if pending: no GEMM writes it
    embed_backward<K>(raw_grad(0), residual_grad(), act_->inputs.data(), scratch_.dgath.data(), dims(), h);
  }

  // ---- the backward split into input gradient (I) and weight gradient (W), for zero-bubble
  // pipeline schedules (llama_split_backward.hpp); I keeps in the activations what W needs ----

  template <class Hooks>
  void backward_head_input(Hooks& h) {
    take_dlogits();
    [[maybe_unused]] const auto kept = use_rounded_weights<K>(kept_);
    head_backward_input<K>(residual_grad(), act_->head_dxf, residual(cfg_.n_layers), weight(final_norm_index()),
                        output_weight(), act_->head_buffers, scratch_.dfull.data(), scratch_.dtmp.data(), dims(), h);
  }
  void backward_head_weight() {
    auto g = gradient_part(final_norm_index(), n_tensors() - final_norm_index());
    head_backward_weight<K>(raw_grad(final_norm_index()), output_grad(), act_->head_dxf, residual(cfg_.n_layers),
                         act_->head_buffers, dims());
    g.done();
  }
  /// A checkpointed block recomputes before its I, as before a whole backward, and keeps
  /// what it recomputed with its deferred gradients until its W (which recomputes nothing).
  template <class Hooks>
  void backward_block_input(std::int64_t l, Hooks& h) {
    {
      [[maybe_unused]] const auto kept = use_rounded_weights<K>(kept_);
      basic_block_work<space> w(saved(l), recompute_, keep_of(l));
      rebuild(w, l, h);
      block_backward_input<K>(residual_grad(), residual(l), block_weights_of(l), w.saved(), scratch_, deferred(l), dims(),
                           h);
    }
    const std::uint16_t keep = keep_of(l);
    if (keep == ac_keep_all) return;
    auto& def = deferred(l);
    const auto redo = static_cast<std::uint16_t>(ac_keep_all & ~keep);
    swap_kept(def.recomputed, recompute_, redo, false);  // the recomputed groups go with the deferred ones
    def.recomputed_floats = block_recompute_floats(dims(), keep);
    allocate_recompute(recompute_, dims(), keep);
  }
  /// (The hooks see only Float8's amax all-reduces of tensorwise casts under tensor
  /// parallel; W has no other communication.)
  template <class Hooks>
  void backward_block_weight(std::int64_t l, Hooks& h) {
    const std::uint16_t keep = keep_of(l);
    auto g = gradient_part(block_base(l), n_block_params);
    if (keep == ac_keep_all) {
      block_backward_weight<K>(block_grads_at(l), residual(l), saved(l), deferred(l), scratch_, dims(), h);
      return g.done();
    }
    const auto redo = static_cast<std::uint16_t>(ac_keep_all & ~keep);
    swap_kept(saved(l), deferred(l).recomputed, redo, false);
    block_backward_weight<K>(block_grads_at(l), residual(l), saved(l), deferred(l), scratch_, dims(), h);  // releases the deferred
    release_groups(saved(l), redo);
    g.done();
  }
  template <class Hooks>
  void backward_embedding_input(Hooks& h) {
    embed_backward_input<K>(act_->embed_dres, residual_grad(), scratch_.dgath.data(), dims(), h);
  }
  void backward_embedding_weight() {
    gradient_part(0, 1).done();
    embed_backward_weight<K>(raw_grad(0), act_->embed_dres, act_->inputs.data(), dims());
  }

  // ---- activations ----

  /// Activations for blocks [first, last) of a batch [B, T] (with the embedding when first
  /// is 0 and `embedding`, with the head when last is n_layers and `head`), for use().
  activations make_activations(std::int64_t B, std::int64_t T, std::int64_t first, std::int64_t last, bool embedding,
                               bool head) const {
    check(0 <= first && first <= last && last <= cfg_.n_layers, "llama::make_activations: bad block range");
    activations a;
    allocate(a, batch_dims(B, T), first, last, embedding && first == 0, head && last == cfg_.n_layers);
    return a;
  }
  /// The parts run on `a` from now on (and the scratch is sized for its batch); use_own()
  /// returns to the model's own activations.
  void use(activations& a) { act_ = &a, size_scratch(a.dims); }
  void use_own() { act_ = &own_; }

  /// The residual stream in front of block l (l = n_layers: behind the last), [Nr, D];
  /// l in [first, last] of the activations in use.
  float* residual(std::int64_t l) {
    return act_->res.data() + (l - act_->first) * act_->dims.Nr() * cfg_.dim;
  }
  /// The gradient of the residual stream where backward currently is, [Nr, D].
  float* residual_grad() { return scratch_.dres.data(); }
  /// The sizes of the current (B, T) on this shard.
  const llama_dims& dims() const noexcept { return act_->dims; }

  /// Bytes of activations (and backward scratch) held for the current (B, T) by the
  /// model's own activations: what was allocated, which llama_activation_bytes predicts.
  std::int64_t activation_bytes() const { return own_.bytes + scratch_bytes_; }
  /// Bytes of the bf16 weights kept from a forward, elements forwards rounded into them, and
  /// the store (kernels/rounded_weights.hpp; an FSDP runtime adopts its bf16 gathers there).
  std::int64_t kept_weight_bytes() const { return rounded_weight_bytes<K>(kept_); }
  std::int64_t kept_weight_rounds() const noexcept { return kept_.rounded(); }
  rounded_weights_of<K>& kept_store() noexcept { return kept_; }
  /// Bytes of the backward scratch alone (shared by all activations).
  std::int64_t scratch_bytes() const { return scratch_bytes_; }

 private:
  llama_config cfg_;
  llama_shard shard_;
  arena<float, space> params_, grads_;
  std::vector<float*> pptr_, gptr_;
  activations own_;
  activations* act_ = &own_;
  basic_block_scratch<space> scratch_;
  llama_dims scratch_dims_;
  std::int64_t scratch_bytes_ = 0;
  ac_settings ac_{};
  bool ac_sp_ = false;
  saved_type recompute_;  // what checkpointed blocks rebuild, one block's worth, shared
  std::vector<std::int64_t> positions_;  // set_positions (empty: 0..T-1)
  std::int64_t recompute_flops_ = 0;
  [[no_unique_address]] rounded_weights_of<K> kept_;  // the parts that run linears use it; adamw_update writes it
  mutable pending_gradients pending_;  // over the owned gradient arena; zero_grad() marks, the accessors zero

  arena<float, space>& owned(arena<float, space>& a) {
    return check(a.size() > 0, "llama_model: this model's parameters are bound by a parallel runtime; it owns no arena"), a;
  }
  std::int64_t offset(std::int64_t i) const {
    return static_cast<std::int64_t>(params_.layout().slots()[static_cast<std::size_t>(i)].offset);
  }
  static constexpr std::int64_t block_base(std::int64_t l) { return 1 + l * n_block_params; }
  std::int64_t final_norm_index() const { return block_base(cfg_.n_layers); }
  const float* weight(std::int64_t i) const { return pptr_[static_cast<std::size_t>(i)]; }  // no weights_changed
  const float* output_weight() const { return weight(cfg_.tied_embeddings ? 0 : final_norm_index() + 1); }
  float* output_grad() { return raw_grad(cfg_.tied_embeddings ? 0 : final_norm_index() + 1); }
  float* raw_grad(std::int64_t i) const { return gptr_[static_cast<std::size_t>(i)]; }  // pending or not: the parts'
  block_grads block_grads_at(std::int64_t l) const { return block_weights_from<float>(gptr_.data() + block_base(l)); }
  void settle_gradients() const { pending_.settle_all([](float* x, std::int64_t n) { K::zero(x, n); }); }
  /// Tensors [first, first + count) of a backward part (pending_part): linears' left to their GEMMs.
  pending_part<K> gradient_part(std::int64_t first, std::int64_t count) {
    return pending_part<K>(pending_, first, count, [this](std::int64_t i) {
      return is_block_linear(entry(i).role) || entry(i).role == param_role::output;
    });
  }
  saved_type& saved(std::int64_t l) {
    check(l >= act_->first && l < act_->last, "llama: block " + std::to_string(l) + " has no activations in use");
    return act_->saved[static_cast<std::size_t>(l - act_->first)];
  }
  basic_block_deferred<space>& deferred(std::int64_t l) {
    if (act_->deferred.size() != act_->saved.size()) act_->deferred.resize(act_->saved.size());
    return act_->deferred[static_cast<std::size_t>(l - act_->first)];
  }
  void take_dlogits() {
    check(act_->have_dlogits, "llama::backward: call forward(..., need_backward = true) first"), act_->have_dlogits = false;
  }

  void allocate(activations& a, const llama_dims& d, std::int64_t first, std::int64_t last, bool embedding,
                bool head) const {
    a.allocate(d, cfg_.dim, first, last, embedding, head, [this](std::int64_t l) { return keep_of(l); });
  }
  /// Sizes the model's own activations (all blocks, both ends) and the scratch for (B, T);
  /// with other activations in use, checks that they fit.
  void prepare(std::int64_t B, std::int64_t T) {
    const llama_dims d = batch_dims(B, T);
    if (act_ != &own_) {
      check(act_->dims.B == B && act_->dims.T == T, "llama::forward: the activations in use were made for another batch");
    } else if (!(B == own_.dims.B && T == own_.dims.T)) {
      allocate(own_, d, 0, cfg_.n_layers, true, true);
    }
    size_scratch(d);
  }
  void size_scratch(const llama_dims& d) {
    if (d.B == scratch_dims_.B && d.T == scratch_dims_.T) return;
    K::synchronize();  // the last shape's scratch may still be read
    scratch_dims_ = d;
    scratch_.allocate(d);
    scratch_bytes_ = 4 * total_of(block_scratch_sizes(d));
    const std::uint16_t keep = checkpointed_keep();
    recompute_ = saved_type{};
    if (keep != ac_keep_all) {
      allocate_recompute(recompute_, d, keep);
      scratch_bytes_ += 4 * block_recompute_floats(d, keep);
    }
    rope_tables<K>(scratch_, d, cfg_, positions_);
  }
};

/// The Llama on the CPU kernels (host memory).
using llama_model = basic_llama_model<>;

/// A Llama model whose configuration `Config::config` is checked when the type is formed
/// (config_problem, in config_words' words: config_is_valid; tests/compile_fail/model_*).
template <class Config>
class llama : public llama_model {
  static constexpr llama_config C = Config::config;
  static constexpr bool valid = config_is_valid<config_problem(C), Config>();
  static_assert(valid || !valid);  // evaluates `valid`, so forming llama<Config> runs the check

 public:
  static constexpr llama_config static_config = C;
  static constexpr std::int64_t parameter_count = param_count(C);
  llama() : llama_model(C) {}
};

}  // namespace tessera
