// tessera/parallel/llama_plan.hpp: how the parallel layer splits the Llama template --
// TorchTitan's tensor-parallel plan as a map from parameter roles to styles, and the
// llama_shard (sizes) a rank computes under a parallel_spec.
//
// The model describes its parameters by role (model/llama_config.hpp) and computes what a
// llama_shard says; this header is the one place that decides both from the policies.
#pragma once

#include <cstdint>

#include <tessera/layout/local_shape.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/parallel/float8.hpp>
#include <tessera/parallel/layouts.hpp>

namespace tessera {

/// How a weight's module splits under tensor parallel, as TorchTitan's Llama plan has it:
/// wq, wk, wv, w1, w3 column-wise; wo, w2 row-wise; the embedding and the output over the
/// vocabulary; norms replicated (sequence-parallel when the policy says so).
constexpr tp_style tp_style_of(param_role r) {
  switch (r) {
    case param_role::attention_q:
    case param_role::attention_k:
    case param_role::attention_v:
    case param_role::ffn_w1:
    case param_role::ffn_w3: return tp_style::colwise;
    case param_role::attention_o:
    case param_role::ffn_w2: return tp_style::rowwise;
    case param_role::embedding:
    case param_role::output: return tp_style::vocab;
    default: return tp_style::replicated;
  }
}

/// How tensor parallel treats a parameter: its module's style; norms (vectors) are replicated.
constexpr tp_style param_style(const param_entry& e) {
  return e.shape.is_vector() ? tp_style::replicated : tp_style_of(e.role);
}

namespace parallel {

/// The part of the Llama math the rank at `coords` computes: its tp rank's heads, FFN
/// columns and vocabulary rows (balanced split), its part of the sequence under sequence
/// parallel, and loss parallel's row statistics. The whole model without TP.
constexpr llama_shard llama_shard_of(const llama_config& c, const parallel_spec& p, const mesh_shape& m,
                                     const coords_t& coords) {
  llama_shard s = llama_shard::whole(c);
  s.float8 = f8_linears_of(c, p.float8);
  s.row_positions = p.cp >= 0 && p.context.balance == cp_balance_kind::per_document;
  if (p.tp < 0) return s;
  const std::int64_t P = m[p.tp], r = coords[static_cast<std::size_t>(p.tp)];
  s.heads = c.n_heads / P, s.head_begin = r * s.heads;
  s.kv_heads = c.n_kv_heads / P, s.kv_head_begin = r * s.kv_heads;
  s.ffn = ffn_hidden_dim(c) / P, s.ffn_begin = r * s.ffn;
  s.vocab = split_size(c.vocab_size, P, r), s.vocab_begin = split_offset(c.vocab_size, P, r);
  if (p.sequence_parallel && P > 1) s.seq_parts = P, s.seq_index = r;
  s.vocab_loss = p.loss_parallel;
  return s;
}

}  // namespace parallel
}  // namespace tessera
