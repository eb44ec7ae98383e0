// tessera/model/llama_ac.hpp: activation checkpointing as values -- the groups of a Llama
// block's saved activations (ac_op), the modes (ac_settings), which groups each block keeps
// (ac_keep_mask) and what that costs in memory. No kernels here (the recompute is in
// llama_checkpointing.hpp), so the policies and the constexpr memory estimator use it.
// The modes (TorchTitan's; docs/training.md "Activation checkpointing"):
//   none              every block keeps everything;
//   full              every block keeps nothing but its input, and backward reruns its forward;
//   selective_layer N every N-th block (blocks N-1, 2N-1, ...) is fully checkpointed, the
//                     others keep everything (TorchTitan's `selective_ac_option = N`);
//   selective_op      every block keeps the groups of an op list; the default is TorchTitan's
//                     op policy: every other matmul (the 1st, 3rd, ... of the block: wq, wv,
//                     w1; w2's output is the next block's input), the attention's output, and
//                     under sequence parallel the reduce-scatter after wo (so `mid`); the
//                     rest -- norms, wk, wo (and its all-reduce under plain TP), w3, the
//                     SwiGLU product, the all-gathers of sequence parallel -- is recomputed.
// A block's input (the residual stream in front of it) is always kept.
#pragma once

#include <array>
#include <cstdint>

#include <tessera/model/llama_shard.hpp>

namespace tessera {

/// The groups of a block's saved activations, by the operation that makes them.
enum class ac_op : std::uint8_t {
  attention_norm,  ///< an, rstd1 and (sequence parallel) its all-gather an_full
  wq,              ///< q (after RoPE)
  wk,              ///< k (after RoPE)
  wv,              ///< v
  attention,       ///< the attention's output and its log-sum-exp
  wo,              ///< mid = x + the reduced output of wo (the reduce-scatter under sequence parallel)
  ffn_norm,        ///< fn, rstd2 and (sequence parallel) fn_full
  w1,              ///< h1
  w3,              ///< h3
  swiglu,          ///< silu(h1) * h3
  count
};
inline constexpr int ac_op_count = static_cast<int>(ac_op::count);
constexpr std::uint16_t ac_bit(ac_op o) { return static_cast<std::uint16_t>(1u << static_cast<unsigned>(o)); }
inline constexpr std::uint16_t ac_keep_all = static_cast<std::uint16_t>((1u << ac_op_count) - 1);

/// The group of each of block_saved's 15 fields (block_saved_sizes' order).
inline constexpr std::array<ac_op, 15> ac_field_group{
    ac_op::attention_norm, ac_op::attention_norm, ac_op::attention_norm, ac_op::wq,       ac_op::wk,
    ac_op::wv,             ac_op::attention,      ac_op::attention,      ac_op::wo,       ac_op::ffn_norm,
    ac_op::ffn_norm,       ac_op::ffn_norm,       ac_op::w1,             ac_op::w3,       ac_op::swiglu};

enum class ac_mode : std::uint8_t { none, full, selective_layer, selective_op };

/// activation_checkpointing's options as values (parallel/activation_checkpoint.hpp).
struct ac_settings {
  ac_mode mode = ac_mode::none;
  int every = 0;               ///< selective_layer: every N-th block
  std::uint16_t ops = 0;       ///< selective_op: the groups kept (ac_bit of each op)
  bool default_ops = true;     ///< selective_op without an op list: TorchTitan's policy
  constexpr bool any() const { return mode != ac_mode::none; }
  friend constexpr bool operator==(const ac_settings&, const ac_settings&) = default;
};

/// TorchTitan's default op policy on a block (see the header comment).
constexpr std::uint16_t ac_default_ops(bool sequence_parallel) {
  return static_cast<std::uint16_t>(ac_bit(ac_op::wq) | ac_bit(ac_op::wv) | ac_bit(ac_op::attention) |
                                    ac_bit(ac_op::w1) | (sequence_parallel ? ac_bit(ac_op::wo) : 0));
}

/// The groups block `layer` keeps under `s` (ac_keep_all: not checkpointed).
constexpr std::uint16_t ac_keep_mask(const ac_settings& s, std::int64_t layer, bool sequence_parallel) {
  switch (s.mode) {
    case ac_mode::none: return ac_keep_all;
    case ac_mode::full: return 0;
    case ac_mode::selective_layer: return s.every > 0 && (layer + 1) % s.every == 0 ? 0 : ac_keep_all;
    case ac_mode::selective_op: return s.default_ops ? ac_default_ops(sequence_parallel) : s.ops;
  }
  return ac_keep_all;
}

/// Floats a block keeps from forward to backward under `keep` (its input not counted).
constexpr std::int64_t block_kept_floats(const llama_dims& d, std::uint16_t keep) {
  const auto n = block_saved_sizes(d);
  std::int64_t f = 0;
  for (std::size_t i = 0; i < n.size(); ++i)
    if (keep & ac_bit(ac_field_group[i])) f += n[i];
  return f;
}

/// Floats of the buffer a recompute rebuilds into (one block_saved, shared by the blocks):
/// what a block does not keep, at most; all of block_saved when some block keeps nothing.
constexpr std::int64_t block_recompute_floats(const llama_dims& d, std::uint16_t keep) {
  return total_of(block_saved_sizes(d)) - block_kept_floats(d, keep);
}

/// The keep mask of the checkpointed blocks among n_layers (ac_keep_all: none is): every
/// checkpointed block of a mode keeps the same groups.
constexpr std::uint16_t ac_checkpointed_keep(const ac_settings& s, std::int64_t n_layers, bool sequence_parallel) {
  for (std::int64_t l = 0; l < n_layers; ++l)
    if (ac_keep_mask(s, l, sequence_parallel) != ac_keep_all) return ac_keep_mask(s, l, sequence_parallel);
  return ac_keep_all;
}

/// Bytes of the shared recompute buffer (llama_model allocates it with its scratch).
constexpr std::int64_t llama_recompute_bytes(const llama_dims& d, const ac_settings& s, std::int64_t n_layers,
                                             bool sequence_parallel) {
  const std::uint16_t keep = ac_checkpointed_keep(s, n_layers, sequence_parallel);
  return keep == ac_keep_all ? 0 : 4 * block_recompute_floats(d, keep);
}

/// Bytes of the activations of blocks [first, last) (and the head's buffers when `head`)
/// under checkpointing `s`: what llama_model::make_activations allocates
/// (llama_stage_activation_bytes without checkpointing).
constexpr std::int64_t llama_stage_activation_bytes(const llama_dims& d, std::int64_t first, std::int64_t last,
                                                    bool head, const ac_settings& s, bool sequence_parallel) {
  std::int64_t f = (last - first + 1) * d.Nr() * d.D + (head ? total_of(ends_saved_sizes(d)) : 0);
  for (std::int64_t l = first; l < last; ++l) f += block_kept_floats(d, ac_keep_mask(s, l, sequence_parallel));
  return 4 * f;
}

/// Bytes llama_model holds for [B, T] on a shard under checkpointing `s`: the kept groups,
/// the residuals, the ends' buffers, the scratch and the recompute buffer
/// (llama_activation_bytes without checkpointing).
constexpr std::int64_t llama_activation_bytes(const llama_config& c, const llama_shard& sh, std::int64_t B,
                                              std::int64_t T, const ac_settings& s, bool sequence_parallel) {
  const llama_dims d = dims_of(c, sh, B, T);
  return llama_stage_activation_bytes(d, 0, c.n_layers, true, s, sequence_parallel) +
         4 * total_of(block_scratch_sizes(d)) + llama_recompute_bytes(d, s, c.n_layers, sequence_parallel);
}

/// Bytes the I half of a stage's backward keeps for its W (llama_stage_deferred_bytes) plus,
/// under checkpointing, the groups each checkpointed block's I recomputed (kept until its W).
constexpr std::int64_t llama_stage_deferred_bytes(const llama_dims& d, std::int64_t first, std::int64_t last,
                                                  bool embedding, bool head, const ac_settings& s,
                                                  bool sequence_parallel) {
  std::int64_t b = llama_stage_deferred_bytes(d, last - first, embedding, head);
  for (std::int64_t l = first; l < last; ++l) {
    const std::uint16_t keep = ac_keep_mask(s, l, sequence_parallel);
    if (keep != ac_keep_all) b += 4 * block_recompute_floats(d, keep);
  }
  return b;
}

/// The tensor-parallel collectives the recomputes of blocks [first, last) redo per batch:
/// the all-gathers in front of the column-parallel regions (attention_norm's and ffn_norm's,
/// identities without sequence parallel) and the reduction after wo (w2's output is kept).
struct ac_collectives {
  std::int64_t gathers = 0, reduces = 0;
  std::int64_t attentions = 0;  ///< attentions recomputed (context parallel's K/V move again)
};
constexpr ac_collectives ac_recompute_collectives(const ac_settings& s, std::int64_t first, std::int64_t last,
                                                  bool sequence_parallel) {
  ac_collectives c;
  for (std::int64_t l = first; l < last; ++l) {
    const std::uint16_t keep = ac_keep_mask(s, l, sequence_parallel);
    if (keep == ac_keep_all) continue;
    c.gathers += !(keep & ac_bit(ac_op::attention_norm)) + !(keep & ac_bit(ac_op::ffn_norm));
    c.reduces += !(keep & ac_bit(ac_op::wo));
    c.attentions += !(keep & ac_bit(ac_op::attention));
  }
  return c;
}

}  // namespace tessera
