// tessera/model/llama_params.hpp: what the Llama template knows about its parameters
// besides their shapes (llama_config.hpp): TorchTitan's names, the shape a parameter is
// stored in, the run-time check of a configuration and TorchTitan's initialization of one
// whole tensor. How a parameter is split is the parallel layer's business: it maps roles
// to layouts (tessera/parallel/llama_plan.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <tessera/core/error.hpp>
#include <tessera/core/extents.hpp>
#include <tessera/model/detail/init.hpp>
#include <tessera/model/llama_config.hpp>

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

/// A parameter's global shape as the model stores it: norms [dim], the others [rows, cols].
constexpr shape_t param_global_shape(const param_entry& e) {
  return e.shape.is_vector() ? shape_t{e.shape.cols} : shape_t{e.shape.rows, e.shape.cols};
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

/// TorchTitan's Llama 3 initialization (torchtitan/models/llama3/model/model.py,
/// init_weights with depth_init = True) of the whole parameter `i` into `out`: embedding
/// N(0, 1); wq, wk, wv, w1 truncated N(0, 0.02) on [-2, 2]; wo, w2, w3 truncated N(0, s)
/// on [-2, 2] with s = 0.02 / sqrt(2 (layer + 1)); norms 1; output truncated
/// N(0, dim^-1/2) on +-3 dim^-1/2. Tied models (TorchTitan has none) give the shared table
/// the output's rule, since it also produces the logits. Each tensor draws from its own
/// stream (seed, i), so a parallel run that slices the tensors gets the same values.
inline void init_param(const llama_config& c, std::int64_t i, std::uint64_t seed, float* out) {
  const double out_std = 1.0 / std::sqrt(static_cast<double>(c.dim));
  const param_entry e = param_at(c, i);
  const std::int64_t n = e.shape.numel();
  detail::normal_source rng(detail::mix_seed(seed, static_cast<std::uint64_t>(i)));
  const double depth_std = 0.02 / std::sqrt(2.0 * static_cast<double>(e.layer + 1));
  switch (e.role) {
    case param_role::attention_norm:
    case param_role::ffn_norm:
    case param_role::final_norm:
      for (std::int64_t j = 0; j < n; ++j) out[j] = 1.0f;
      break;
    case param_role::embedding:
      for (std::int64_t j = 0; j < n; ++j)
        out[j] = static_cast<float>(c.tied_embeddings ? rng.trunc_normal(0, out_std, -3 * out_std, 3 * out_std)
                                                      : rng.normal());
      break;
    case param_role::attention_q:
    case param_role::attention_k:
    case param_role::attention_v:
    case param_role::ffn_w1:
      for (std::int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(rng.trunc_normal(0, 0.02, -2, 2));
      break;
    case param_role::attention_o:
    case param_role::ffn_w2:
    case param_role::ffn_w3:
      for (std::int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(rng.trunc_normal(0, depth_std, -2, 2));
      break;
    case param_role::output:
      for (std::int64_t j = 0; j < n; ++j)
        out[j] = static_cast<float>(rng.trunc_normal(0, out_std, -3 * out_std, 3 * out_std));
      break;
  }
}

}  // namespace tessera
