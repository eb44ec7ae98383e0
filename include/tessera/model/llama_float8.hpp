// tessera/model/llama_float8.hpp: the block linears' Float8 casts, as the model runs them
// and the traffic estimator counts them (constexpr, no GEMMs).
//
// A block's seven linears (wq, wk, wv, wo, w1, w2, w3) compute with Float8 operands when
// the shard's f8_linears covers them (llama_block.hpp). Under tensor parallel the
// column-parallel linears' output features and the row-parallel ones' input features are
// split over the TP ranks; a cast whose scale groups span them max-reduces its amaxes over
// those ranks first (the hooks' reduce_amax), as torchao's amax of a sharded DTensor does.
#pragma once

#include <array>
#include <cstdint>

#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/model/llama_ac.hpp>
#include <tessera/model/llama_shard.hpp>

namespace tessera {

/// The block linears, in the order of block_weights.
inline constexpr std::array<param_role, 7> block_linears{param_role::attention_q, param_role::attention_k,
                                                        param_role::attention_v, param_role::attention_o,
                                                        param_role::ffn_w1,      param_role::ffn_w2,
                                                        param_role::ffn_w3};

/// The casts of the covered linears (FP8 all-gather: the weights arrived cast, not cast again).
constexpr cpu::f8_linear_casts f8_casts_of(const f8_linears& f) {
  cpu::f8_linear_casts c = cpu::f8_linear_casts_of(f.recipe);
  if (f.weights_cast) c.weight.reset(), c.weight_for_grad_input.reset();
  return c;
}

/// The regions around tensor parallel's layout changes (llama_block_regions.hpp), by the
/// linears they hold: q/k/v and w1/w3 behind a gather, wo and w2 in front of a reduce.
enum class tp_region : std::uint8_t { qkv, wo, w13, w2 };
inline constexpr std::array<tp_region, 4> tp_regions{tp_region::qkv, tp_region::wo, tp_region::w13, tp_region::w2};
/// The region of block linear r.
constexpr tp_region tp_region_of(param_role r) {
  switch (r) {
    case param_role::attention_o: return tp_region::wo;
    case param_role::ffn_w1:
    case param_role::ffn_w3: return tp_region::w13;
    case param_role::ffn_w2: return tp_region::w2;
    default: return tp_region::qkv;
  }
}
/// Whether async TP runs region g whole rather than in parts of the sequence: one of its
/// linears has a cast whose scale needs every row before the first GEMM (Float8 tensorwise).
/// The regions (the runtime) and the traffic estimator both ask this.
constexpr bool runs_whole(const f8_linears& f, tp_region g) {
  for (param_role r : block_linears)
    if (tp_region_of(r) == g && f.needs_every_row(r)) return true;
  return false;
}

/// Which features of linear `r` other ranks hold on this shard (tensor parallel splits the
/// heads and FFN columns: the column-parallel linears' outputs, the row-parallel ones' inputs).
constexpr cpu::f8_split f8_split_of(param_role r, const llama_dims& d) {
  if (!d.split) return cpu::f8_split::none;
  return r == param_role::attention_o || r == param_role::ffn_w2 ? cpu::f8_split::in_features
                                                                 : cpu::f8_split::out_features;
}

/// Linear r's {in, out} features on the shard (C and OC of x [N, C] -> [N, OC]).
constexpr std::array<std::int64_t, 2> block_linear_features(param_role r, const llama_dims& d) {
  switch (r) {
    case param_role::attention_q: return {d.D, d.Hq()};
    case param_role::attention_k:
    case param_role::attention_v: return {d.D, d.Hk()};
    case param_role::attention_o: return {d.Hq(), d.D};
    case param_role::ffn_w1:
    case param_role::ffn_w3: return {d.D, d.F};
    case param_role::ffn_w2: return {d.F, d.D};
    default: return {0, 0};
  }
}

/// Elements of the weights a model of `n_layers` blocks of dims d multiplies with bf16 operands
/// -- its block linears that are not Float8, and the output layer --: what its kept rounded
/// weights hold (kernels/rounded_weights.hpp; model/llama.hpp).
constexpr std::int64_t bf16_weight_elements(const llama_dims& d, std::int64_t n_layers) {
  std::int64_t block = 0;
  for (param_role r : block_linears) {
    const auto [C, OC] = block_linear_features(r, d);
    if (!d.f8.covers(r)) block += C * OC;
  }
  return n_layers * block + d.D * d.Vl;
}

/// Whether parameter e of config c is a weight the linears multiply with bf16 operands under
/// Float8 linears f8 (what kept rounded weights hold): a block linear that is not Float8, or the
/// output layer's weight (the embedding, with tied embeddings).
constexpr bool bf16_multiplied(const llama_config& c, const f8_linears& f8, const param_entry& e) {
  if (e.role == param_role::output || (e.role == param_role::embedding && c.tied_embeddings)) return true;
  for (param_role r : block_linears)
    if (e.role == r) return !f8.covers(r);
  return false;
}

/// Whether parameter e is read by bf16 GEMMs only (bf16_multiplied, and not the embedding,
/// whose rows the lookup reads in f32): an FSDP gather in bf16 of it is its operands
/// (parallel/fsdp.hpp's gemm_operand).
constexpr bool gemm_operand_only(const llama_config& c, const f8_linears& f8, const param_entry& e) {
  return bf16_multiplied(c, f8, e) && e.role != param_role::embedding;
}

/// The activation-checkpointing group a linear's output belongs to (ac_op::count: w2, whose
/// output is never recomputed: it is the next block's kept input).
constexpr ac_op ac_op_of(param_role r) {
  switch (r) {
    case param_role::attention_q: return ac_op::wq;
    case param_role::attention_k: return ac_op::wk;
    case param_role::attention_v: return ac_op::wv;
    case param_role::attention_o: return ac_op::wo;
    case param_role::ffn_w1: return ac_op::w1;
    case param_role::ffn_w3: return ac_op::w3;
    default: return ac_op::count;
  }
}

/// The amax all-reduces one Float8 GEMM of linear r makes on the shard: the two operands'
/// scale counts (0: that operand reduces nothing).
constexpr std::array<std::int64_t, 2> f8_amax_reductions(param_role r, cpu::f8_gemm g, const llama_dims& d) {
  if (!d.f8.covers(r)) return {0, 0};
  const auto [C, OC] = block_linear_features(r, d);
  const auto ops = cpu::f8_gemm_operands(g, f8_casts_of(d.f8), d.N(), C, OC, f8_split_of(r, d));
  return {ops[0].spans() ? ops[0].scales() : 0, ops[1].spans() ? ops[1].scales() : 0};
}

/// The GEMM of linear r that async TP runs on parts of the sequence in front of a reduce:
/// the row-parallel linears' output, the column-parallel ones' input gradient (the regions of
/// llama_block_regions.hpp). Those are the GEMMs whose rowwise casts span the TP ranks.
constexpr cpu::f8_gemm f8_reduce_side_gemm(param_role r) {
  return r == param_role::attention_o || r == param_role::ffn_w2 ? cpu::f8_gemm::output : cpu::f8_gemm::grad_input;
}
/// Floats of the whole tensors' amaxes async TP reduces before a region's parts, for the
/// region that needs the most (the sum of its linears' f8_amax_reductions): 0 when no region
/// runs in parts (no sequence split, or tensorwise) or none of their casts spans the ranks.
/// The TP runtime reserves this (parallel/tensor_parallel.hpp) and the memory estimator
/// counts it.
constexpr std::int64_t f8_part_amax_floats(const llama_dims& d) {
  if (!d.split || !d.seq_split || !d.f8.any()) return 0;
  std::int64_t most = 0;
  for (tp_region g : tp_regions) {
    if (runs_whole(d.f8, g)) continue;
    std::int64_t n = 0;
    for (param_role r : block_linears)
      if (tp_region_of(r) == g)
        for (std::int64_t f : f8_amax_reductions(r, f8_reduce_side_gemm(r), d)) n += f;
    most = n > most ? n : most;
  }
  return most;
}

}  // namespace tessera
