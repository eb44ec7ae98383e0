// tessera/model/llama_config.hpp: Llama 3 configurations as constexpr values.
//
// A configuration is a plain struct; the published models are types holding one (so that
// `tessera::llama<tessera::llama3_8b>` names a model and the config stays usable on
// compilers without floating-point template parameters). Parameter counts, FFN widths and
// the list of parameters with their roles are constexpr functions of the struct.
#pragma once

#include <cstdint>
#include <string_view>

namespace tessera {

/// Llama 3 hyper-parameters (TorchTitan's TransformerModelArgs, reduced to what the math
/// needs). The FFN multiplier is a fraction num/den so that the width is computed exactly
/// as Python's `int(multiplier * hidden)` would for the published values.
struct llama_config {
  std::string_view name;
  std::int64_t dim = 0;
  std::int64_t n_layers = 0;
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;
  std::int64_t vocab_size = 0;
  std::int64_t multiple_of = 256;
  std::int64_t ffn_mult_num = 1;  ///< ffn_dim_multiplier = num / den (1/1 = none)
  std::int64_t ffn_mult_den = 1;
  bool tied_embeddings = false;
  double norm_eps = 1e-5;
  double rope_theta = 500000.0;
  bool rope_scaling = true;  ///< Llama 3.1 frequency scaling (factor 8, low 1, high 4, 8192)
  double rope_scale_factor = 8.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  double rope_original_context = 8192.0;
  std::int64_t max_seq_len = 131072;
};

/// Width of the SwiGLU hidden layer, as Meta's and TorchTitan's FeedForward compute it:
/// h = int(2 * 4 * dim / 3); h = int(multiplier * h); round h up to a multiple_of.
constexpr std::int64_t ffn_hidden_dim(const llama_config& c) {
  std::int64_t h = 2 * (4 * c.dim) / 3;
  h = (c.ffn_mult_num * h) / c.ffn_mult_den;
  return c.multiple_of * ((h + c.multiple_of - 1) / c.multiple_of);
}
constexpr std::int64_t head_dim(const llama_config& c) { return c.dim / c.n_heads; }
constexpr std::int64_t kv_dim(const llama_config& c) { return c.n_kv_heads * head_dim(c); }

/// The role of a parameter: what it is in the model's math. Parallel policies map roles to
/// layouts (e.g. attention_q -> column-wise); the model itself never looks at them.
enum class param_role : std::uint8_t {
  embedding,
  attention_norm,
  attention_q,
  attention_k,
  attention_v,
  attention_o,
  ffn_norm,
  ffn_w1,
  ffn_w2,
  ffn_w3,
  final_norm,
  output,
};

/// A block linear's role (the parameters fp8::linears<...> may name; the weights whose
/// gradients a GEMM writes, with the output's).
constexpr bool is_block_linear(param_role r) {
  return r == param_role::attention_q || r == param_role::attention_k || r == param_role::attention_v ||
         r == param_role::attention_o || r == param_role::ffn_w1 || r == param_role::ffn_w2 || r == param_role::ffn_w3;
}

constexpr std::string_view role_name(param_role r) {
  switch (r) {
    case param_role::embedding: return "embedding";
    case param_role::attention_norm: return "attention_norm";
    case param_role::attention_q: return "attention_q";
    case param_role::attention_k: return "attention_k";
    case param_role::attention_v: return "attention_v";
    case param_role::attention_o: return "attention_o";
    case param_role::ffn_norm: return "ffn_norm";
    case param_role::ffn_w1: return "ffn_w1";
    case param_role::ffn_w2: return "ffn_w2";
    case param_role::ffn_w3: return "ffn_w3";
    case param_role::final_norm: return "final_norm";
    case param_role::output: return "output";
  }
  return "?";
}

/// Roles of one transformer block, in arena order.
inline constexpr param_role block_roles[] = {
    param_role::attention_norm, param_role::attention_q, param_role::attention_k,
    param_role::attention_v,    param_role::attention_o, param_role::ffn_norm,
    param_role::ffn_w1,         param_role::ffn_w2,      param_role::ffn_w3};
inline constexpr int n_block_params = 9;

/// Shape of a parameter as [rows, cols] (a norm weight is [1, dim]). Linear weights are
/// stored as PyTorch's nn.Linear does: [out_features, in_features], row-major.
struct param_shape {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  constexpr std::int64_t numel() const { return rows * cols; }
  constexpr bool is_vector() const { return rows == 1; }
};

constexpr param_shape shape_of(const llama_config& c, param_role r) {
  const std::int64_t f = ffn_hidden_dim(c);
  switch (r) {
    case param_role::embedding: return {c.vocab_size, c.dim};
    case param_role::attention_norm:
    case param_role::ffn_norm:
    case param_role::final_norm: return {1, c.dim};
    case param_role::attention_q: return {c.n_heads * head_dim(c), c.dim};
    case param_role::attention_k:
    case param_role::attention_v: return {kv_dim(c), c.dim};
    case param_role::attention_o: return {c.dim, c.n_heads * head_dim(c)};
    case param_role::ffn_w1:
    case param_role::ffn_w3: return {f, c.dim};
    case param_role::ffn_w2: return {c.dim, f};
    case param_role::output: return {c.vocab_size, c.dim};
  }
  return {};
}

/// Parameters of one transformer block.
constexpr std::int64_t block_param_count(const llama_config& c) {
  std::int64_t n = 0;
  for (param_role r : block_roles) n += shape_of(c, r).numel();
  return n;
}

/// All parameters: embedding, blocks, final norm, and the output projection unless tied.
constexpr std::int64_t param_count(const llama_config& c) {
  return shape_of(c, param_role::embedding).numel() + c.n_layers * block_param_count(c) +
         c.dim + (c.tied_embeddings ? 0 : shape_of(c, param_role::output).numel());
}

/// Parameters counted by TorchTitan's FLOPs estimate: everything but the embedding table
/// (for tied models the shared table still multiplies as the output layer).
constexpr std::int64_t param_count_for_flops(const llama_config& c) {
  return param_count(c) - shape_of(c, param_role::embedding).numel() +
         (c.tied_embeddings ? shape_of(c, param_role::output).numel() : 0);
}

/// Training FLOPs per token as TorchTitan counts them (utils.get_num_flop_per_token):
/// 6 * N + 12 * n_layers * n_heads * head_dim * seq_len.
constexpr double flops_per_token(const llama_config& c, std::int64_t seq_len) {
  return 6.0 * static_cast<double>(param_count_for_flops(c)) +
         12.0 * static_cast<double>(c.n_layers * c.n_heads * head_dim(c) * seq_len);
}

/// A parameter tensor: its role, its block (-1 outside blocks) and its shape.
struct param_entry {
  param_role role{};
  std::int64_t layer = -1;
  param_shape shape{};
};

/// Number of parameter tensors.
constexpr std::int64_t param_tensor_count(const llama_config& c) {
  return 2 + c.n_layers * n_block_params + (c.tied_embeddings ? 0 : 1);
}

/// The i-th parameter tensor, in arena order: embedding, blocks (block_roles order), final
/// norm, output (absent with tied embeddings).
constexpr param_entry param_at(const llama_config& c, std::int64_t i) {
  if (i == 0) return {param_role::embedding, -1, shape_of(c, param_role::embedding)};
  --i;
  if (i < c.n_layers * n_block_params) {
    const auto k = static_cast<int>(i % n_block_params);
    return {block_roles[k], i / n_block_params, shape_of(c, block_roles[k])};
  }
  i -= c.n_layers * n_block_params;
  if (i == 0) return {param_role::final_norm, -1, shape_of(c, param_role::final_norm)};
  return {param_role::output, -1, shape_of(c, param_role::output)};
}

/// Sum of the shapes of all parameter tensors (equals param_count; checked below).
constexpr std::int64_t param_count_by_entries(const llama_config& c) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < param_tensor_count(c); ++i) n += param_at(c, i).shape.numel();
  return n;
}

// ---- the published configurations ------------------------------------------------------
// Dimensions: Meta's Llama 3.1 / 3.2 model cards and TorchTitan's llama3 registry
// (torchtitan/models/llama3/__init__.py). Tied input/output embeddings for 3.2 1B and 3B.

/// TorchTitan's `debugmodel`: dim 256, 6 layers, 16 heads (multi-head: 16 KV heads),
/// FFN 768, vocab 2048. Kept identical to TorchTitan's so loss curves can be compared; at
/// about 6.3M parameters a training step of 8 x 256 tokens takes well under a second on
/// two cores, and the loss visibly falls within tens of steps.
struct debugmodel {
  static constexpr llama_config config{.name = "debugmodel", .dim = 256, .n_layers = 6,
                                       .n_heads = 16, .n_kv_heads = 16, .vocab_size = 2048,
                                       .multiple_of = 256};
};
struct llama3_1b {
  static constexpr llama_config config{.name = "llama3_1b", .dim = 2048, .n_layers = 16,
                                       .n_heads = 32, .n_kv_heads = 8, .vocab_size = 128256,
                                       .multiple_of = 256, .ffn_mult_num = 3, .ffn_mult_den = 2,
                                       .tied_embeddings = true};
};
struct llama3_3b {
  static constexpr llama_config config{.name = "llama3_3b", .dim = 3072, .n_layers = 28,
                                       .n_heads = 24, .n_kv_heads = 8, .vocab_size = 128256,
                                       .multiple_of = 256, .ffn_mult_num = 1, .ffn_mult_den = 1,
                                       .tied_embeddings = true};
};
struct llama3_8b {
  static constexpr llama_config config{.name = "llama3_8b", .dim = 4096, .n_layers = 32,
                                       .n_heads = 32, .n_kv_heads = 8, .vocab_size = 128256,
                                       .multiple_of = 1024, .ffn_mult_num = 13,
                                       .ffn_mult_den = 10};
};
struct llama3_70b {
  static constexpr llama_config config{.name = "llama3_70b", .dim = 8192, .n_layers = 80,
                                       .n_heads = 64, .n_kv_heads = 8, .vocab_size = 128256,
                                       .multiple_of = 4096, .ffn_mult_num = 13,
                                       .ffn_mult_den = 10};
};
struct llama3_405b {
  static constexpr llama_config config{.name = "llama3_405b", .dim = 16384, .n_layers = 126,
                                       .n_heads = 128, .n_kv_heads = 8, .vocab_size = 128256,
                                       .multiple_of = 4096, .ffn_mult_num = 12,
                                       .ffn_mult_den = 10};
};

/// The configurations tessera knows by name (for command lines and recipes).
inline constexpr const llama_config* named_configs[] = {
    &debugmodel::config, &llama3_1b::config, &llama3_3b::config,
    &llama3_8b::config,  &llama3_70b::config, &llama3_405b::config};

/// The configuration called `name`, or nullptr.
constexpr const llama_config* find_config(std::string_view name) {
  for (const llama_config* c : named_configs)
    if (c->name == name) return c;
  return nullptr;
}
static_assert(find_config("llama3_70b")->n_layers == 80);

// FFN widths as published (Meta's params.json / HF config.json intermediate_size).
static_assert(ffn_hidden_dim(debugmodel::config) == 768);
static_assert(ffn_hidden_dim(llama3_1b::config) == 8192);
static_assert(ffn_hidden_dim(llama3_3b::config) == 8192);
static_assert(ffn_hidden_dim(llama3_8b::config) == 14336);
static_assert(ffn_hidden_dim(llama3_70b::config) == 28672);
static_assert(ffn_hidden_dim(llama3_405b::config) == 53248);

/// Rounds a count to `digits` significant figures' worth of 10^`exp` (the published totals
/// are 8.03B, 70.6B, 405.9B, 1.24B, 3.21B: 1.24B is round_to(n, 7) == 124).
constexpr std::int64_t round_to(std::int64_t n, int exp) {
  std::int64_t p = 1;
  for (int i = 0; i < exp; ++i) p *= 10;
  return (n + p / 2) / p;
}

// Exact totals (computed by hand in docs/model.md) and the published rounded figures.
static_assert(param_count(llama3_8b::config) == 8'030'261'248);
static_assert(round_to(param_count(llama3_8b::config), 7) == 803);      // 8.03B
static_assert(param_count(llama3_70b::config) == 70'553'706'496);
static_assert(round_to(param_count(llama3_70b::config), 8) == 706);     // 70.6B
static_assert(param_count(llama3_405b::config) == 405'853'388'800);
static_assert(round_to(param_count(llama3_405b::config), 8) == 4059);   // 405.9B
static_assert(param_count(llama3_1b::config) == 1'235'814'400);
static_assert(round_to(param_count(llama3_1b::config), 7) == 124);      // 1.24B
static_assert(param_count(llama3_3b::config) == 3'212'749'824);
static_assert(round_to(param_count(llama3_3b::config), 7) == 321);      // 3.21B
static_assert(param_count_by_entries(llama3_8b::config) == param_count(llama3_8b::config));
static_assert(param_count_by_entries(llama3_1b::config) == param_count(llama3_1b::config));

}  // namespace tessera
