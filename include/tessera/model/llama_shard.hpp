// tessera/model/llama_shard.hpp: the part of the Llama math one rank computes, as sizes,
// and the sizes of every buffer the model keeps for backward (constexpr, no kernels).
//
// The model does not know why it computes a part: a `llama_shard` gives the counts it
// needs -- query heads, KV heads and FFN columns (with their offsets, for slicing whole
// tensors), the vocabulary rows of the embedding and output tables, and which part of each
// sequence the residual stream holds. The parallel layer derives one from its policies
// (tessera/parallel/llama_plan.hpp); `llama_shard::whole` is all of it.
//
// The buffer sizes below are what llama_model allocates, written once: the model allocates
// by them and the memory estimator adds them up.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include <tessera/core/error.hpp>
#include <tessera/core/float8.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/model/llama_config.hpp>

namespace tessera {

/// Which of a block's linears compute with Float8 operands, and how (the parallel layer's
/// float8 policy decides it: parallel/float8.hpp). The output layer is never one of them.
struct f8_linears {
  std::uint16_t roles = 0;  ///< bit 1 << param_role per linear (attention_q .. ffn_w3)
  f8_recipe recipe = f8_recipe::tensorwise;
  /// The weights reach the model already cast (FP8 all-gather: tensorwise e4m3 values with
  /// the scale of the whole weight); the linears do not cast them again.
  bool weights_cast = false;

  constexpr bool any() const { return roles != 0; }
  constexpr bool covers(param_role r) const { return ((roles >> static_cast<unsigned>(r)) & 1u) != 0; }
  /// Whether linear r's casts need every row of its input before the first GEMM: a
  /// tensorwise scale does (async TP then runs its region whole); rowwise scales are per row.
  constexpr bool needs_every_row(param_role r) const { return covers(r) && recipe == f8_recipe::tensorwise; }
  friend constexpr bool operator==(const f8_linears&, const f8_linears&) = default;
};

struct llama_shard {
  std::int64_t heads = 0;          ///< query heads computed here
  std::int64_t head_begin = 0;     ///< the first of them
  std::int64_t kv_heads = 0;       ///< KV heads computed here
  std::int64_t kv_head_begin = 0;
  std::int64_t ffn = 0;            ///< SwiGLU hidden columns computed here
  std::int64_t ffn_begin = 0;
  std::int64_t vocab = 0;          ///< rows of the embedding and output tables held here
  std::int64_t vocab_begin = 0;
  std::int64_t seq_parts = 1;      ///< the residual stream holds part `seq_index` of `seq_parts`
  std::int64_t seq_index = 0;      ///< of every sequence (balanced split; 1 part: all of it)
  /// With part of the vocabulary: finish the loss from this part's row statistics (the hooks
  /// reduce them), instead of having the hooks gather whole logits.
  bool vocab_loss = false;
  /// The linears computed with Float8 operands (none: all in f32).
  f8_linears float8{};
  /// Every batch row has its own token positions (context parallel balanced per document):
  /// RoPE tables per row, [B, T, hd / 2], instead of one [T, hd / 2] for all rows.
  bool row_positions = false;

  /// All of the math.
  static constexpr llama_shard whole(const llama_config& c) {
    llama_shard s;
    s.heads = c.n_heads, s.kv_heads = c.n_kv_heads, s.ffn = ffn_hidden_dim(c), s.vocab = c.vocab_size;
    return s;
  }
  /// True when heads, FFN columns or vocabulary are split: row-parallel outputs are partial
  /// sums that the hooks reduce.
  constexpr bool splits_math(const llama_config& c) const {
    return heads < c.n_heads || ffn < ffn_hidden_dim(c) || vocab < c.vocab_size;
  }
};

/// Why a shard does not fit a configuration ("" when it does).
inline std::string shard_problem(const llama_config& c, const llama_shard& s) {
  auto range = [](std::int64_t b, std::int64_t n, std::int64_t total) { return n > 0 && b >= 0 && b + n <= total; };
  if (!range(s.head_begin, s.heads, c.n_heads)) return "query heads out of range";
  if (!range(s.kv_head_begin, s.kv_heads, c.n_kv_heads)) return "KV heads out of range";
  if (s.heads * c.n_kv_heads != s.kv_heads * c.n_heads)
    return "query and KV heads are not split in the same proportion (each KV head must keep its query heads)";
  if (!range(s.ffn_begin, s.ffn, ffn_hidden_dim(c))) return "FFN columns out of range";
  if (!range(s.vocab_begin, s.vocab, c.vocab_size)) return "vocabulary rows out of range";
  if (s.seq_parts < 1 || s.seq_index < 0 || s.seq_index >= s.seq_parts) return "bad sequence part";
  return {};
}

/// Shape of parameter `e` in a shard: heads, KV heads, FFN columns and vocabulary rows as
/// the shard gives them (linear weights are [out, in]); norms whole.
constexpr param_shape local_param_shape(const llama_config& c, const llama_shard& s, const param_entry& e) {
  param_shape p = e.shape;
  const std::int64_t hd = head_dim(c);
  switch (e.role) {
    case param_role::attention_q: p.rows = s.heads * hd; break;
    case param_role::attention_k:
    case param_role::attention_v: p.rows = s.kv_heads * hd; break;
    case param_role::attention_o: p.cols = s.heads * hd; break;
    case param_role::ffn_w1:
    case param_role::ffn_w3: p.rows = s.ffn; break;
    case param_role::ffn_w2: p.cols = s.ffn; break;
    case param_role::embedding:
    case param_role::output: p.rows = s.vocab; break;
    default: break;
  }
  return p;
}
/// Where a shard's block of parameter `e` starts in the whole tensor: {dim, offset}
/// (dim -1: the whole tensor).
constexpr std::array<std::int64_t, 2> local_param_offset(const llama_config& c, const llama_shard& s,
                                                         const param_entry& e) {
  const std::int64_t hd = head_dim(c);
  switch (e.role) {
    case param_role::attention_q: return {0, s.head_begin * hd};
    case param_role::attention_k:
    case param_role::attention_v: return {0, s.kv_head_begin * hd};
    case param_role::attention_o: return {1, s.head_begin * hd};
    case param_role::ffn_w1:
    case param_role::ffn_w3: return {0, s.ffn_begin};
    case param_role::ffn_w2: return {1, s.ffn_begin};
    case param_role::embedding:
    case param_role::output: return {0, s.vocab_begin};
    default: return {-1, 0};
  }
}

/// Every size of a forward/backward of [B, T] tokens on a shard (names as in llama.hpp).
struct llama_dims {
  std::int64_t B = 0, T = 0;
  std::int64_t Tl = 0;       ///< residual rows per sequence
  std::int64_t D = 0, hd = 0, heads = 0, kv_heads = 0, F = 0, V = 0, Vl = 0, v0 = 0;
  bool seq_split = false;    ///< the residual holds part of each sequence (hooks gather it)
  bool split = false;        ///< heads / FFN / vocabulary split (row-parallel outputs are partial)
  bool vocab_loss = false;   ///< loss from row statistics of the local vocabulary
  bool gather_logits = false;///< part of the vocabulary and no vocab_loss: logits gathered
  float eps = 1e-5f;
  f8_linears f8{};           ///< the block linears computed with Float8 operands
  bool rope_rows = false;    ///< RoPE tables per batch row (llama_shard::row_positions)

  constexpr std::int64_t N() const { return B * T; }    ///< every token
  constexpr std::int64_t Nr() const { return B * Tl; }  ///< the residual's rows
  constexpr std::int64_t Hq() const { return heads * hd; }
  constexpr std::int64_t Hk() const { return kv_heads * hd; }
  /// Rows of the every-token copies of a residual (only when the sequence is split).
  constexpr std::int64_t full_rows() const { return seq_split ? N() : 0; }
  /// The RoPE tables' rows (T, or B x T per row), and the [B, T] the rope kernels see so
  /// that token (b, t) reads table row t, or b x T + t per row.
  constexpr std::int64_t rope_T() const { return rope_rows ? B * T : T; }
  constexpr std::int64_t rope_B() const { return rope_rows ? 1 : B; }
};

constexpr llama_dims dims_of(const llama_config& c, const llama_shard& s, std::int64_t B, std::int64_t T) {
  llama_dims d;
  d.B = B, d.T = T;
  d.seq_split = s.seq_parts > 1;
  d.Tl = d.seq_split ? split_size(T, s.seq_parts, s.seq_index) : T;
  d.D = c.dim, d.hd = head_dim(c), d.heads = s.heads, d.kv_heads = s.kv_heads, d.F = s.ffn;
  d.V = c.vocab_size, d.Vl = s.vocab, d.v0 = s.vocab_begin;
  d.split = s.splits_math(c);
  d.vocab_loss = s.vocab < c.vocab_size && s.vocab_loss;
  d.gather_logits = s.vocab < c.vocab_size && !s.vocab_loss;
  d.eps = static_cast<float>(c.norm_eps);
  d.f8 = s.float8;
  d.rope_rows = s.row_positions;
  return d;
}

/// dims_of a batch [B, T], checked: positive, and T at least the sequence parts.
inline llama_dims batch_dims_of(const llama_config& c, const llama_shard& s, std::int64_t B, std::int64_t T) {
  check(B > 0 && T > 0, "llama::forward: B and T must be positive");
  const std::int64_t P = s.seq_parts;
  check(P == 1 || T >= P, "llama::forward: the residual stream split over " + std::to_string(P) +
                              " sequence parts needs seq_len >= " + std::to_string(P) + " (got " + std::to_string(T) +
                              ")");
  return dims_of(c, s, B, T);
}

/// Floats of what one block keeps for its backward, in block_saved's field order:
/// an, rstd1, an_full, q, k, v, att, lse, mid, fn, rstd2, fn_full, h1, h3, act.
constexpr std::array<std::int64_t, 15> block_saved_sizes(const llama_dims& d) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D, full = d.full_rows();
  return {Nr * D, Nr, full * D, N * d.Hq(), N * d.Hk(), N * d.Hk(), N * d.Hq(), d.B * d.heads * d.T,
          Nr * D, Nr * D, Nr, full * D, N * d.F, N * d.F, N * d.F};
}
/// Floats of the scratch all blocks share, in block_scratch's field order:
/// proj, dres, dtmp, dfull, dgath, datt, dq, dk, dv, ffn, cos, sin, and with Float8 linears
/// f8a and f8b, the quantized operands (kernels/cpu/float8_linear.hpp's two buffers for the
/// widest linear: N x max(D, Hq, F), and max(N, D, Hq, F) x max(D, Hq, F)).
constexpr std::array<std::int64_t, 14> block_scratch_sizes(const llama_dims& d) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D;
  const std::int64_t wide = std::max({D, d.Hq(), d.F});
  const std::int64_t f8a = d.f8.any() ? N * wide : 0, f8b = d.f8.any() ? std::max(N, wide) * wide : 0;
  return {N * D, Nr * D, d.split ? Nr * D : 0, N * D, d.full_rows() * D, N * d.Hq(), N * d.Hq(), N * d.Hk(),
          N * d.Hk(), 2 * N * d.F, d.rope_T() * d.hd / 2, d.rope_T() * d.hd / 2, f8a, f8b};
}
/// Floats the ends keep, in ends_saved's field order: xf, xf_full, rstdf, logits,
/// logits_full, rowmax, stats.
constexpr std::array<std::int64_t, 7> ends_saved_sizes(const llama_dims& d) {
  const std::int64_t N = d.N(), Nr = d.Nr();
  return {Nr * d.D, d.full_rows() * d.D, Nr, N * d.Vl, d.gather_logits ? N * d.V : 0, d.vocab_loss ? N : 0,
          d.vocab_loss ? 2 * N : 0};
}

template <std::size_t K>
constexpr std::int64_t total_of(const std::array<std::int64_t, K>& a) {
  std::int64_t n = 0;
  for (std::int64_t x : a) n += x;
  return n;
}

/// What a block's input-gradient half keeps for its weight-gradient half (block_deferred,
/// llama_split_backward.hpp, same order): d_ffn, dh1 and dh3, dn2, d_att, dq, dk, dv, dn1.
constexpr std::array<std::int64_t, 8> block_deferred_sizes(const llama_dims& d) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D;
  return {N * D, 2 * N * d.F, Nr * D, N * D, N * d.Hq(), N * d.Hk(), N * d.Hk(), Nr * D};
}

/// Bytes of llama_activations for blocks [first, last) (with the head's buffers when
/// `head`): what llama_model::make_activations allocates.
constexpr std::int64_t llama_stage_activation_bytes(const llama_dims& d, std::int64_t blocks, bool head) {
  return 4 * (blocks * total_of(block_saved_sizes(d)) + (blocks + 1) * d.Nr() * d.D +
              (head ? total_of(ends_saved_sizes(d)) : 0));
}
/// Bytes the I half of a stage's backward keeps for its W: every block's block_deferred, the
/// head's dxf [Nr, D] and the embedding's gathered dres [N, D].
constexpr std::int64_t llama_stage_deferred_bytes(const llama_dims& d, std::int64_t blocks, bool embedding,
                                                  bool head) {
  return 4 * (blocks * total_of(block_deferred_sizes(d)) + (head ? d.Nr() * d.D : 0) + (embedding ? d.N() * d.D : 0));
}

/// Bytes of activations and backward scratch llama_model holds for [B, T] on a shard: every
/// block's saved tensors, the L + 1 residuals, the ends' and the shared scratch.
constexpr std::int64_t llama_activation_bytes(const llama_config& c, const llama_shard& s, std::int64_t B,
                                              std::int64_t T) {
  const llama_dims d = dims_of(c, s, B, T);
  return 4 * (c.n_layers * total_of(block_saved_sizes(d)) + (c.n_layers + 1) * d.Nr() * d.D +
              total_of(ends_saved_sizes(d)) + total_of(block_scratch_sizes(d)));
}

}  // namespace tessera
