// tessera/model/llama_params.hpp: what the Llama template knows about its parameters
// besides their shapes (llama_config.hpp): TorchTitan's names, the shape a parameter is
// stored in, the run-time check of a configuration and TorchTitan's initialization of one
// whole tensor. How a parameter is split is the parallel layer's business: it maps roles
// to layouts (tessera/parallel/llama_plan.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

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

/// What is wrong with a configuration: one constexpr check that both llama<Config>'s
/// static_asserts and the run-time check_config read (their words: config_words).
enum class config_error : std::uint8_t { none, nonpositive, dim_not_divisible, heads_not_divisible, odd_head_dim };

constexpr config_error config_problem(const llama_config& c) {
  if (!(c.dim > 0 && c.n_layers > 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.vocab_size > 0))
    return config_error::nonpositive;
  if (c.dim % c.n_heads != 0) return config_error::dim_not_divisible;
  if (c.n_heads % c.n_kv_heads != 0) return config_error::heads_not_divisible;
  if (head_dim(c) % 2 != 0) return config_error::odd_head_dim;
  return config_error::none;
}

/// The words of each error (the static_asserts in llama.hpp spell the same sentences).
constexpr std::string_view config_words(config_error e) {
  switch (e) {
    case config_error::none: return "";
    case config_error::nonpositive: return "dim, n_layers, n_heads, n_kv_heads and vocab_size must be positive";
    case config_error::dim_not_divisible:
      return "dim is not divisible by n_heads; head_dim = dim / n_heads must be whole";
    case config_error::heads_not_divisible:
      return "n_heads is not divisible by n_kv_heads; each KV head must serve the same number of query heads";
    case config_error::odd_head_dim: return "head_dim (dim / n_heads) is odd; RoPE rotates pairs and needs it even";
  }
  return "?";
}

/// Fires config_problem's error `E` as one static_assert, in config_words' words; the
/// instantiation line names the culprit, the config type `Config`. llama<Config> and
/// recipe_traits<R> form it (tests/compile_fail/model_*, recipe_model_config.cpp).
template <config_error E, class Config>
constexpr bool config_is_valid() {
  static_assert(E != config_error::nonpositive,
                "tessera model config (Config below): dim, n_layers, n_heads, n_kv_heads and vocab_size must be positive");
  static_assert(E != config_error::dim_not_divisible,
                "tessera model config (Config below): dim is not divisible by n_heads; head_dim = dim / n_heads must be "
                "whole");
  static_assert(E != config_error::heads_not_divisible,
                "tessera model config (Config below): n_heads is not divisible by n_kv_heads; each KV head must serve "
                "the same number of query heads");
  static_assert(E != config_error::odd_head_dim,
                "tessera model config (Config below): head_dim (dim / n_heads) is odd; RoPE rotates pairs and needs it "
                "even");
  return E == config_error::none;
}

/// Checks a configuration at run time: config_problem's words with the numbers.
inline void check_config(const llama_config& c) {
  const config_error e = config_problem(c);
  if (e == config_error::none) return;
  auto n = [](std::int64_t v) { return std::to_string(v); };
  std::string numbers;
  switch (e) {
    case config_error::nonpositive:
      numbers = "dim " + n(c.dim) + ", n_layers " + n(c.n_layers) + ", n_heads " + n(c.n_heads) + ", n_kv_heads " +
                n(c.n_kv_heads) + ", vocab_size " + n(c.vocab_size);
      break;
    case config_error::dim_not_divisible: numbers = "dim " + n(c.dim) + ", n_heads " + n(c.n_heads); break;
    case config_error::heads_not_divisible:
      numbers = "n_heads " + n(c.n_heads) + ", n_kv_heads " + n(c.n_kv_heads);
      break;
    default: numbers = "head_dim " + n(head_dim(c)); break;
  }
  throw error("llama config '" + std::string(c.name) + "': " + std::string(config_words(e)) + " (" + numbers + ")");
}

/// TorchTitan's Llama 3 initialization (torchtitan/models/llama3/model/model.py,
/// init_weights with depth_init = True) of parameter `i`, its values one at a time in
/// row-major order: embedding N(0, 1); wq, wk, wv, w1 truncated N(0, 0.02) on [-2, 2]; wo,
/// w2, w3 truncated N(0, s) on [-2, 2] with s = 0.02 / sqrt(2 (layer + 1)); norms 1; output
/// truncated N(0, dim^-1/2) on +-3 dim^-1/2. Tied models (TorchTitan has none) give the
/// shared table the output's rule, since it also produces the logits. Each tensor draws from
/// its own stream (seed, i), so a parallel run that slices the tensors gets the same values;
/// a block of a tensor is the stream up to its last element (skip() draws what lies between).
class param_stream {
 public:
  param_stream(const llama_config& c, std::int64_t i, std::uint64_t seed)
      : rng_(detail::mix_seed(seed, static_cast<std::uint64_t>(i))) {
    const double out_std = 1.0 / std::sqrt(static_cast<double>(c.dim));
    const param_entry e = param_at(c, i);
    const double depth_std = 0.02 / std::sqrt(2.0 * static_cast<double>(e.layer + 1));
    switch (e.role) {
      case param_role::attention_norm:
      case param_role::ffn_norm:
      case param_role::final_norm: rule_ = rule::one; break;
      case param_role::embedding:
        if (c.tied_embeddings) set(out_std, 3 * out_std);
        else rule_ = rule::normal;
        break;
      case param_role::attention_q:
      case param_role::attention_k:
      case param_role::attention_v:
      case param_role::ffn_w1: set(0.02, 2); break;
      case param_role::attention_o:
      case param_role::ffn_w2:
      case param_role::ffn_w3: set(depth_std, 2); break;
      case param_role::output: set(out_std, 3 * out_std); break;
    }
  }
  float next() {
    switch (rule_) {
      case rule::one: return 1.0f;
      case rule::normal: return static_cast<float>(rng_.normal());
      default: return static_cast<float>(rng_.trunc_normal(0, std_, -bound_, bound_));
    }
  }
  void skip(std::int64_t n) {
    if (rule_ != rule::one)
      for (std::int64_t j = 0; j < n; ++j) next();
  }

 private:
  enum class rule : std::uint8_t { one, normal, truncated };
  detail::normal_source rng_;
  rule rule_ = rule::truncated;
  double std_ = 0, bound_ = 0;
  void set(double std, double bound) { std_ = std, bound_ = bound; }
};

/// The whole parameter `i` into `out` (param_stream's values).
inline void init_param(const llama_config& c, std::int64_t i, std::uint64_t seed, float* out) {
  param_stream s(c, i, seed);
  const std::int64_t n = param_at(c, i).shape.numel();
  for (std::int64_t j = 0; j < n; ++j) out[j] = s.next();
}

}  // namespace tessera
