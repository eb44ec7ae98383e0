// tessera/model/device_llama.hpp: one rank's Llama on a kernel backend -- its parameters,
// gradients, AdamW moments and activations in the backend's memory: basic_llama_model<K>
// (llama.hpp: the same parts as llama_model, run with the backend's kernels) with the
// optimizer, clipping and the host transfers a trainer of one device needs.
// tessera-requires: openblas
//
//   device_llama<cuda_kernels> m(cfg);     // kernels/cuda/backend.cuh, in a .cu file
//   m.init_weights(seed);                  // TorchTitan's initialization, as llama_model's
//   float loss = m.forward(ids, targets, B, T);
//   m.backward(); m.adamw_step(step, opt); m.zero_grad();
//
// With K = cpu_kernels it computes what llama_model computes, bit for bit; on a backend whose
// memory is not the host's (tests/support/staged_kernels.hpp: the CPU kernels on a space the
// model reaches only through the backend's transfers) too, which checks the device path on
// any machine (tests/model/test_device_llama.cpp); with cuda_kernels the same code runs on the
// current GPU (tests/gpu/test_cuda_llama.cu). The block linears may compute with Float8
// operands (the f8_linears of the constructor, as the float8 policy sets them; FP8 GEMMs on a
// GPU), and blocks may be checkpointed (set_checkpointing: llama_model's modes). It is the
// whole model on one device: shards and their hooks are basic_llama_model's.
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
#include <tessera/model/cuda_workspace.hpp>
#include <tessera/model/llama.hpp>
#include <tessera/model/llama_ac.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

template <kernel_backend K>
class device_llama : public basic_llama_model<K> {
  using base = basic_llama_model<K>;

 public:
  using kernels = K;  // train::basic_trainer runs its optimizer with them
  using space = typename K::space;

  /// `float8`: the block linears that compute with Float8 operands, and the recipe (none by
  /// default; K must have them: K::float8).
  explicit device_llama(const llama_config& c, const f8_linears& float8 = {}) : base(c, shard_of(c, float8)) {}

  /// Floats of the flat parameter arena (padding included; llama_model's params().size()).
  std::int64_t arena_size() { return static_cast<std::int64_t>(base::grads().size()); }  // params() is for writing

  /// The flat parameter arena from / to the host (arena_size() floats, llama_model's layout).
  void load_params(std::span<const float> host) {
    check(static_cast<std::int64_t>(host.size()) == arena_size(),
          "device_llama::load_params: " + std::to_string(host.size()) + " floats for an arena of " +
              std::to_string(arena_size()));
    K::to_device(base::params().data(), host.data(), arena_size());
  }
  void store_params(std::span<float> host) { to_host(host, base::params(), "store_params"); }
  void store_grads(std::span<float> host) { to_host(host, base::grads(), "store_grads"); }

  /// One AdamW step over the whole arena (the padding stays zero), moments in the backend's
  /// memory -- allocated by the first step (a train::basic_trainer keeps its own instead);
  /// with bf16 operands it writes the kept bf16 weights too (basic_llama_model::adamw_update).
  void adamw_step(std::int64_t step, const cpu::adamw_config& opt) {
    const arena_layout& l = base::grads().layout();
    if (m_.size() == 0) m_ = arena<float, space>(l), v_ = arena<float, space>(l);
    base::adamw_update(base::grads().data(), m_.data(), v_.data(), arena_size(), step, opt);
  }
  /// The gradients' global norm, then clipping to max_norm (<= 0: none), as cpu::clip_grad_norm;
  /// returns the norm before clipping.
  float clip_grad_norm(float max_norm) {
    float* g = base::grads().data();
    const float norm = static_cast<float>(std::sqrt(K::sum_of_squares(g, arena_size())));
    if (max_norm > 0.0f) clip_by_norm<K>(g, arena_size(), norm, max_norm);
    return norm;
  }

  /// What activation_bytes() will be for a batch [B, T] of config c with Float8 linears f8
  /// and checkpointing ac: llama_activation_bytes, and the ids where they are in the
  /// backend's memory (not the host's).
  static std::int64_t activation_bytes_for(const llama_config& c, std::int64_t B, std::int64_t T,
                                           const f8_linears& f8 = {}, const ac_settings& ac = {}) {
    return llama_activation_bytes(c, shard_of(c, f8), B, T, ac, false) + (space::host_accessible ? 0 : 8 * B * T);
  }
  /// Bytes of device memory the backend keeps besides the model's tensors for such a step:
  /// the CUDA backends' scratch and cuBLASLt's workspace, and the bf16 weights the model keeps
  /// from its forward for its backward (model/cuda_workspace.hpp; what it leaves out is a few
  /// KiB); 0 for a backend without (the CPU's).
  static std::int64_t workspace_bytes_for(const llama_config& c, std::int64_t B, std::int64_t T,
                                          const f8_linears& f8 = {}) {
    if constexpr (requires { K::device_workspace; }) {
      const llama_dims d = dims_of(c, shard_of(c, f8), B, T);
      return cuda::llama_workspace(d, K::bf16_operands, K::tc_attention(d.hd), bf16_weight_elements(d, c.n_layers),
                                   K::cudnn_attention_workspace(d.B, d.T, d.heads, d.kv_heads, d.hd))
          .total();
    } else {
      return 0;
    }
  }

 private:
  arena<float, space> m_, v_;

  static llama_shard shard_of(const llama_config& c, const f8_linears& f) {
    detail::need<K>(K::float8 || !f.any(), "a Float8 linear");
    check(!f.weights_cast, "device_llama: weights_cast is the FSDP policy's FP8 all-gather; one device casts its own");
    llama_shard s = llama_shard::whole(c);
    s.float8 = f;
    return s;
  }
  void to_host(std::span<float> host, arena<float, space>& a, const char* who) {
    check(static_cast<std::int64_t>(host.size()) == arena_size(), std::string("device_llama::") + who + ": " +
                                                                       std::to_string(host.size()) +
                                                                       " floats for an arena of " +
                                                                       std::to_string(arena_size()));
    K::synchronize();
    K::to_host(host.data(), a.data(), arena_size());
  }
};

}  // namespace tessera
