// tessera/model/device_llama.hpp: one rank's Llama on a kernel backend -- its parameters,
// gradients, AdamW moments and activations in the backend's memory, the same parts as
// llama_model (llama_block.hpp, llama_ends.hpp) run with the backend's kernels.
// tessera-requires: openblas
//
//   device_llama<cuda_kernels> m(cfg);     // kernels/cuda/backend.cuh, in a .cu file
//   m.init_weights(seed);                  // TorchTitan's initialization, as llama_model's
//   float loss = m.forward(ids, targets, B, T);
//   m.backward(); m.adamw_step(step, opt); m.zero_grad();
//
// With K = cpu_kernels it computes what llama_model computes, bit for bit (the same parts
// with the same kernels in the same order; tests/model/test_device_llama.cpp), which checks
// the driver on any machine; with cuda_kernels the same driver runs on the current GPU
// (tests/gpu/test_cuda_llama.cu). The block linears may compute with Float8 operands (the
// f8_linears of the constructor, as the float8 policy sets them; FP8 GEMMs on a GPU), and
// blocks may be checkpointed (set_checkpointing: llama_model's modes, the same recompute).
// What it does not do (yet): shards -- it is the whole model on one device --, RoPE positions
// other than 0..T-1 (context parallel), pipeline stages. llama_model has those on the host.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/model/llama_ac.hpp>
#include <tessera/model/llama_arena.hpp>
#include <tessera/model/llama_block.hpp>
#include <tessera/model/llama_checkpointing.hpp>
#include <tessera/model/llama_ends.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

template <kernel_backend K>
class device_llama {
 public:
  using kernels = K;  // train::basic_trainer runs its optimizer with them
  using space = typename K::space;

  /// `float8`: the block linears that compute with Float8 operands, and the recipe (none by
  /// default; K must have them: K::float8).
  explicit device_llama(const llama_config& c, const f8_linears& float8 = {})
      : cfg_(c), shard_(shard_of(c, float8)), params_(checked_layout(c)), grads_(params_.layout()) {
    for (std::int64_t i = 0; i < n_tensors(); ++i) {
      pptr_.push_back(params_.data() + offset(i));
      gptr_.push_back(grads_.data() + offset(i));
    }
  }

  const llama_config& config() const noexcept { return cfg_; }
  std::int64_t n_tensors() const noexcept { return param_tensor_count(cfg_); }
  /// Floats of the flat parameter arena (padding included; llama_model's params().size()).
  std::int64_t arena_size() const noexcept { return static_cast<std::int64_t>(params_.size()); }
  std::int64_t num_params() const noexcept { return param_count(cfg_); }
  /// The flat arenas in the backend's memory (llama_model's layout; padding stays zero).
  arena<float, space>& params() noexcept { return params_; }
  arena<float, space>& grads() noexcept { return grads_; }
  /// Parameter i and its gradient, in the backend's memory.
  float* param(std::int64_t i) { return pptr_[static_cast<std::size_t>(i)]; }
  float* grad(std::int64_t i) { return gptr_[static_cast<std::size_t>(i)]; }

  /// TorchTitan's initialization, as llama_model::init_weights (made on the host, copied).
  void init_weights(std::uint64_t seed) {
    std::vector<float> host(params_.size()), full;
    for (std::int64_t i = 0; i < n_tensors(); ++i)
      init_shard_param(cfg_, shard_, i, seed, host.data() + offset(i), full);
    load_params(host);
  }
  /// The flat parameter arena from / to the host (arena_size() floats, llama_model's layout).
  void load_params(std::span<const float> host) {
    check(static_cast<std::int64_t>(host.size()) == arena_size(),
          "device_llama::load_params: " + std::to_string(host.size()) + " floats for an arena of " +
              std::to_string(arena_size()));
    K::to_device(params_.data(), host.data(), arena_size());
  }
  void store_params(std::span<float> host) const { to_host(host, params_, "store_params"); }
  void store_grads(std::span<float> host) const { to_host(host, grads_, "store_grads"); }

  void zero_grad() { K::zero(grads_.data(), arena_size()); }
  /// One AdamW step over the whole arena (the padding stays zero), moments in the backend's
  /// memory -- allocated by the first step (a train::basic_trainer keeps its own instead).
  void adamw_step(std::int64_t step, const cpu::adamw_config& opt) {
    if (m_.size() == 0) m_ = arena<float, space>(params_.layout()), v_ = arena<float, space>(params_.layout());
    K::adamw_update(params_.data(), grads_.data(), m_.data(), v_.data(), arena_size(), step, opt);
  }
  /// The gradients' global norm, then clipping to max_norm (<= 0: none), as cpu::clip_grad_norm;
  /// returns the norm before clipping.
  float clip_grad_norm(float max_norm) {
    const float norm = static_cast<float>(std::sqrt(K::sum_of_squares(grads_.data(), arena_size())));
    if (max_norm > 0.0f) clip_by_norm<K>(grads_.data(), arena_size(), norm, max_norm);
    return norm;
  }

  /// The mean cross-entropy of inputs -> targets [B, T] (row-major, on the host; negative
  /// targets ignored), as llama_model::forward; prepares the gradient for backward().
  float forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t B,
                std::int64_t T, bool need_backward = true, float loss_scale = 1.0f) {
    check(static_cast<std::int64_t>(inputs.size()) == B * T && static_cast<std::int64_t>(targets.size()) == B * T,
          "device_llama::forward: inputs and targets must hold B*T = " + std::to_string(B * T) + " ids");
    have_dlogits_ = false;  // a forward that throws leaves nothing for backward()
    cpu::check_tokens(inputs.data(), B * T, cfg_.vocab_size, "device_llama::forward");  // before the copy
    prepare(B, T);
    K::to_device(ids_.data(), inputs.data(), B * T);
    K::to_device(targets_.data(), targets.data(), B * T);
    const llama_dims& d = dims_;
    embed_forward<K>(residual(0), ids_.data(), param(0), scratch_.proj.data(), d, hooks_);
    for (std::int64_t l = 0; l < cfg_.n_layers; ++l) {
      basic_block_work<space> w(saved_[static_cast<std::size_t>(l)], recompute_, keep_of(l));
      block_forward<K>(residual(l + 1), residual(l), block_params_of(l), w.saved(), scratch_, d, hooks_);
    }
    const float loss = head_forward<K>(residual(cfg_.n_layers), targets_.data(), param(final_norm()), output(false),
                                       head_, need_backward, loss_scale, d, hooks_);
    have_dlogits_ = need_backward;
    return loss;
  }
  /// Accumulates into the gradients the gradient prepared by the last forward().
  void backward() {
    check(have_dlogits_, "device_llama::backward: call forward(..., need_backward = true) first");
    have_dlogits_ = false;
    const llama_dims& d = dims_;
    float* dres = scratch_.dres.data();
    head_backward<K>(dres, grad(final_norm()), output(true), residual(cfg_.n_layers), param(final_norm()),
                     output(false), head_, scratch_.dfull.data(), scratch_.dtmp.data(), d, hooks_);
    for (std::int64_t l = cfg_.n_layers - 1; l >= 0; --l) {
      basic_block_work<space> w(saved_[static_cast<std::size_t>(l)], recompute_, keep_of(l));
      if (w.checkpointed())
        block_recompute<K>(residual(l), block_params_of(l), w.saved(), scratch_, d, hooks_, w.keep(), recompute_flops_);
      block_backward<K>(dres, block_weights_from<float>(gptr_.data() + 1 + l * n_block_params), residual(l),
                        block_params_of(l), w.saved(), scratch_, d, hooks_);
    }
    embed_backward<K>(grad(0), dres, ids_.data(), scratch_.dgath.data(), d, hooks_);
  }

  /// Checkpoints blocks as `ac` says (llama_model::set_checkpointing's modes); takes effect
  /// from the next forward.
  void set_checkpointing(const ac_settings& ac) {
    ac_ = ac;
    dims_ = llama_dims{};  // re-sized for the next batch
  }
  /// Matmul and attention FLOPs the recomputes did.
  std::int64_t recompute_flops() const noexcept { return recompute_flops_; }

  /// Bytes of activations and scratch held for the current batch: what llama_model holds
  /// (llama_activation_bytes: the kept groups, the residual streams, the head's buffers, the
  /// scratch, the recompute buffer), and the ids.
  std::int64_t activation_bytes() const noexcept { return act_bytes_; }
  /// What activation_bytes() will be for a batch [B, T] of config c with Float8 linears f8
  /// and checkpointing ac.
  static std::int64_t activation_bytes_for(const llama_config& c, std::int64_t B, std::int64_t T,
                                           const f8_linears& f8 = {}, const ac_settings& ac = {}) {
    return llama_activation_bytes(c, shard_of(c, f8), B, T, ac, false) + 8 * B * T;
  }

 private:
  /// Device-side ids (int32 is no tensor element type).
  struct id_buffer {
    std::int32_t* p = nullptr;
    std::int64_t n = 0;
    id_buffer() = default;
    explicit id_buffer(std::int64_t count)
        : p(static_cast<std::int32_t*>(space::allocate(static_cast<std::size_t>(count) * 4))), n(count) {}
    id_buffer(id_buffer&& o) noexcept : p(std::exchange(o.p, nullptr)), n(std::exchange(o.n, 0)) {}
    id_buffer& operator=(id_buffer&& o) noexcept {
      std::swap(p, o.p), std::swap(n, o.n);
      return *this;
    }
    ~id_buffer() { space::deallocate(p, static_cast<std::size_t>(n) * 4); }
    std::int32_t* data() const noexcept { return p; }
  };

  llama_config cfg_;
  llama_shard shard_;
  arena<float, space> params_, grads_, m_, v_;
  std::vector<float*> pptr_, gptr_;
  llama_dims dims_;
  tensor<float, space> res_;
  std::vector<basic_block_saved<space>> saved_;
  basic_block_scratch<space> scratch_;
  basic_head_saved<space> head_;
  id_buffer ids_, targets_;
  basic_serial_hooks<K> hooks_;
  bool have_dlogits_ = false;
  std::int64_t act_bytes_ = 0;
  ac_settings ac_{};
  basic_block_saved<space> recompute_;  // what checkpointed blocks rebuild, one block's worth
  std::int64_t recompute_flops_ = 0;

  std::uint16_t keep_of(std::int64_t l) const { return ac_keep_mask(ac_, l, false); }

  static llama_shard shard_of(const llama_config& c, const f8_linears& f) {
    detail::need<K>(K::float8 || !f.any(), "a Float8 linear");
    check(!f.weights_cast, "device_llama: weights_cast is the FSDP policy's FP8 all-gather; one device casts its own");
    llama_shard s = llama_shard::whole(c);
    s.float8 = f;
    return s;
  }
  static arena_layout checked_layout(const llama_config& c) {
    check_config(c);
    return param_arena_layout(c, llama_shard::whole(c));
  }
  std::int64_t offset(std::int64_t i) const {
    return static_cast<std::int64_t>(params_.layout().slots()[static_cast<std::size_t>(i)].offset);
  }
  std::int64_t final_norm() const { return 1 + cfg_.n_layers * n_block_params; }
  float* output(bool gradient) {
    const std::int64_t i = cfg_.tied_embeddings ? 0 : final_norm() + 1;
    return gradient ? grad(i) : param(i);
  }
  block_params block_params_of(std::int64_t l) const {
    return block_weights_from<const float>(pptr_.data() + 1 + l * n_block_params);
  }
  float* residual(std::int64_t l) { return res_.data() + l * dims_.Nr() * cfg_.dim; }
  void to_host(std::span<float> host, const arena<float, space>& a, const char* who) const {
    check(static_cast<std::int64_t>(host.size()) == arena_size(), std::string("device_llama::") + who + ": " +
                                                                       std::to_string(host.size()) +
                                                                       " floats for an arena of " +
                                                                       std::to_string(arena_size()));
    K::synchronize();
    K::to_host(host.data(), a.data(), arena_size());
  }
  /// Sizes every buffer for [B, T] (kept while the batch shape stays) and fills the RoPE tables.
  void prepare(std::int64_t B, std::int64_t T) {
    check(B > 0 && T > 0, "device_llama::forward: B and T must be positive");
    if (B == dims_.B && T == dims_.T) return;
    K::synchronize();  // buffers of the last shape may still be read
    dims_ = dims_of(cfg_, shard_, B, T);
    const llama_dims& d = dims_;
    res_ = tensor<float, space>({(cfg_.n_layers + 1) * d.Nr() * cfg_.dim});
    saved_.clear();
    saved_.resize(static_cast<std::size_t>(cfg_.n_layers));
    for (std::int64_t l = 0; l < cfg_.n_layers; ++l) allocate_kept(saved_[static_cast<std::size_t>(l)], d, keep_of(l));
    const std::uint16_t keep = ac_checkpointed_keep(ac_, cfg_.n_layers, false);
    recompute_ = basic_block_saved<space>{};
    if (keep != ac_keep_all) allocate_recompute(recompute_, d, keep);
    scratch_.allocate(d);
    head_.allocate(d);
    ids_ = id_buffer(B * T), targets_ = id_buffer(B * T);
    std::vector<float> cos(static_cast<std::size_t>(d.rope_T() * d.hd / 2)), sin(cos.size());
    cpu::rope_table(cos.data(), sin.data(), d.rope_T(), d.hd, rope_config_of(cfg_));
    K::to_device(scratch_.cos.data(), cos.data(), static_cast<std::int64_t>(cos.size()));
    K::to_device(scratch_.sin.data(), sin.data(), static_cast<std::int64_t>(sin.size()));
    act_bytes_ = activation_bytes_for(cfg_, B, T, shard_.float8, ac_);
  }
};

}  // namespace tessera
