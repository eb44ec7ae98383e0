// Small recipes over a tiny Llama for the parallel tests (fast on 2 cores, every code path:
// GQA, a vocabulary that splits unevenly, FFN width divisible by 2).
#pragma once

#include <tessera/parallel/pipeline_parallel.hpp>
#include <tessera/parallel/policies.hpp>
#include <tessera/train/recipe.hpp>

namespace tiny_recipes {
using namespace tessera;

struct tiny {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                                       .vocab_size = 97, .multiple_of = 32};
};
struct fsdp_dyn {
  static constexpr std::string_view name = "tiny_fsdp";
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">>;
};
struct fsdp_never {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp", reshard_after_forward<reshard::never>>>;
};
struct hsdp_2x2 {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp_replicate", 2>, axis<"dp_shard", 2>>;
  using parallelize = tessera::parallelize<hsdp<"dp_replicate", "dp_shard">>;
};
struct tp_sp_lp {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};
struct tp_plain {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp">>;
};
struct fsdp_tp_2d {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp", reshard_after_forward<reshard::all_but_last>>,
                                           tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};
struct fsdp_tp_bf16 {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp", mixed_precision<bf16, float>>, tensor_parallel<"tp", loss_parallel>>;
};
}  // namespace tiny_recipes

// Pipeline recipes over a 6-layer tiny Llama (pp = 4 with 2 stages per rank gives 8 stages:
// the embedding alone, six stages of one block, the head alone).
namespace tiny_recipes {
struct tiny6 {
  static constexpr llama_config config{.name = "tiny6", .dim = 32, .n_layers = 6, .n_heads = 4, .n_kv_heads = 2,
                                       .vocab_size = 97, .multiple_of = 32};
};
/// A pp axis of run-time size; the schedule and microbatches chosen at run time.
struct pp_dyn {
  static constexpr std::string_view name = "tiny_pp";
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp">>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp">>;
};
/// pp = 2 x dp = 2 x tp = 2 (FSDP and TP with sequence and loss parallel inside the stages).
struct pp_3d {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::interleaved_1f1b>, stages_per_rank<2>>, fsdp<"dp">,
      tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};
/// pp = 2 x HSDP 2 x 2 with mixed precision off (the pipeline with the hybrid axes).
struct pp_hsdp {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"r", 2>, axis<"s", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::gpipe>>,
                                           hsdp<"r", "s">>;
};
/// A user's schedule table: GPipe's order written by hand for 2 ranks and 4 microbatches,
/// with rank 1 running its backwards in reverse microbatch order.
constexpr pipeline::schedule hand_table() {
  using pipeline::action, pipeline::op;
  pipeline::schedule s = pipeline::make_empty(2, 2, 4, pipeline::placement::loop);
  s.stage_rank = {0, 1};
  for (int mb = 0; mb < 4; ++mb) s.actions[0].push_back(action{op::F, 0, mb});
  for (int mb = 0; mb < 4; ++mb) s.actions[1].push_back(action{op::F, 1, mb});
  for (int mb = 3; mb >= 0; --mb) s.actions[1].push_back(action{op::B, 1, mb});
  for (int mb = 3; mb >= 0; --mb) s.actions[0].push_back(action{op::B, 0, mb});
  return s;
}
struct pp_table {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp", schedule_table<&hand_table>>>;
};
/// pp = 2 x FSDP 2 with bf16 parameters (mixed precision inside the stages).
struct pp_fsdp_bf16 {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"dp", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::one_f_one_b>>,
                                           fsdp<"dp", mixed_precision<bf16, float>>>;
};
}  // namespace tiny_recipes

// Activation checkpointing (issue 15) in each composition: plain TP (the recompute redoes
// wo's all-reduce), FSDP x TP with SP (the all-gathers), a pipeline.
#include <tessera/parallel/activation_checkpoint.hpp>
namespace tiny_recipes {
struct tp_plain_full {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp">, activation_checkpointing<ac::full>>;
};
struct fsdp_tp_2d_op {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp", reshard_after_forward<reshard::all_but_last>>,
                                           tensor_parallel<"tp", sequence_parallel, loss_parallel>,
                                           activation_checkpointing<ac::selective_op<>>>;
};
struct pp_3d_layer2 {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::interleaved_1f1b>, stages_per_rank<2>>, fsdp<"dp">,
      tensor_parallel<"tp", sequence_parallel, loss_parallel>, activation_checkpointing<ac::selective_layer<2>>>;
};
/// Zero-bubble (I and W apart) with selective op checkpointing under TP + SP.
struct pp_zbv_op {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::zbv_zero_bubble>, stages_per_rank<2>>,
      tensor_parallel<"tp", sequence_parallel, loss_parallel>, activation_checkpointing<ac::selective_op<>>>;
};
}  // namespace tiny_recipes

// Float8 (issue 15) under tensor parallel: the amaxes of TP-split operands all-reduced over
// tp; with FP8 all-gather (whose amax spans dp and tp) and checkpointing (the recompute's
// casts reduce again); under a zero-bubble pipeline (W's tensorwise weight-gradient casts
// reduce too).
#include <tessera/parallel/float8.hpp>
namespace tiny_recipes {
struct f8_2d_tw_ag_op {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize =
      tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, loss_parallel>,
                           float8<fp8::tensorwise, fp8::all_gather>, activation_checkpointing<ac::selective_op<>>>;
};
struct f8_tp_rowwise_full {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize =
      tessera::parallelize<tensor_parallel<"tp">, float8<fp8::rowwise>, activation_checkpointing<ac::full>>;
};
struct f8_pp_zbv_tp_tw {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::zbv_zero_bubble>, stages_per_rank<2>>,
      tensor_parallel<"tp", sequence_parallel, loss_parallel>, float8<fp8::tensorwise>>;
};
}  // namespace tiny_recipes

// Context parallel (issue 14): each rotation with and without head-tail balancing, over a
// cp axis of run-time size; with FSDP (over dp x cp), with FSDP x TP + SP (tp splits each
// cp part), under a pipeline, with checkpointing and with Float8.
#include <tessera/parallel/context_parallel.hpp>
namespace tiny_recipes {
template <cp_rotation_kind Rot, cp_balance_kind Bal>
struct cp_only {
  using model = tiny;
  using mesh = tessera::mesh<axis<"cp">>;
  using parallelize = tessera::parallelize<context_parallel<"cp", cp_rotation<Rot>, cp_balance<Bal>>>;
};
struct cp_fsdp_ring {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"cp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, context_parallel<"cp", cp_rotation<cp_rotate::ring>>,
                                           activation_checkpointing<ac::full>>;
};
struct cp_fsdp_tp {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"cp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, context_parallel<"cp">,
                                           tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};
struct cp_pp_ring_op {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"cp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::one_f_one_b>>,
      context_parallel<"cp", cp_rotation<cp_rotate::ring>>, activation_checkpointing<ac::selective_op<>>>;
};
struct cp_4d {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"dp", 2>, axis<"cp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::interleaved_1f1b>, stages_per_rank<2>>,
      fsdp<"dp">, context_parallel<"cp", cp_rotation<cp_rotate::ring>>,
      tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};
/// Packed documents ended by token 5 (TorchTitan's block_causal mask).
inline constexpr std::int32_t doc_eos = 5;
template <cp_rotation_kind Rot, cp_balance_kind Bal>
struct cp_docs {
  using model = tiny;
  using mesh = tessera::mesh<axis<"cp">>;
  using parallelize =
      tessera::parallelize<context_parallel<"cp", cp_rotation<Rot>, cp_balance<Bal>, cp_documents<doc_eos>>>;
};
/// MHA (the debug model: 16 query and 16 KV heads), documents balanced per document.
struct cp_docs_mha {
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"cp">>;
  using parallelize = tessera::parallelize<context_parallel<"cp", cp_rotation<cp_rotate::ring>, cp_documents<doc_eos>>>;
};
struct cp_docs_fsdp_tp {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"cp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, context_parallel<"cp", cp_documents<doc_eos>>,
                                           tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};
struct cp_docs_pp {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"cp", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::one_f_one_b>>,
                                           context_parallel<"cp", cp_rotation<cp_rotate::ring>, cp_documents<doc_eos>>>;
};
struct cp_fsdp_f8 {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"cp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, context_parallel<"cp">, float8<fp8::tensorwise, fp8::all_gather>>;
};
}  // namespace tiny_recipes

// Async TP (tensor_parallel's async_tp): the sequence-parallel gathers and reduce-scatters as
// ring steps around the regions' GEMMs, alone and with each policy it composes with.
#include <tessera/parallel/float8.hpp>
namespace tiny_recipes {
template <int Tp>
struct tp_async {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp", Tp>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel, async_tp>>;
};
struct fsdp_tp_async {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, async_tp>>;
};
/// The recompute redoes the regions in the same parts (op: some GEMMs kept, some redone).
struct fsdp_tp_async_op {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, loss_parallel, async_tp>,
                                           activation_checkpointing<ac::selective_op<>>>;
};
struct tp_async_full {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel, async_tp>,
                                           activation_checkpointing<ac::full>>;
};
/// Zero-bubble: the I half runs the rings, the W half the weight GEMMs.
struct pp_zbv_tp_async {
  using model = tiny6;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::zbv_zero_bubble>, stages_per_rank<2>>,
      tensor_parallel<"tp", sequence_parallel, loss_parallel, async_tp>>;
};
struct cp_tp_async {
  using model = tiny;
  using mesh = tessera::mesh<axis<"cp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<context_parallel<"cp", cp_rotation<cp_rotate::ring>>,
                                           tensor_parallel<"tp", sequence_parallel, loss_parallel, async_tp>>;
};
/// Float8 tensorwise on the row-parallel linears only: their regions run whole (the scale
/// needs every row), the column-parallel regions in parts.
struct tp_async_f8_rows {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize =
      tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel, async_tp>,
                           float8<fp8::tensorwise, fp8::linears<param_role::attention_o, param_role::ffn_w2>>>;
};
}  // namespace tiny_recipes

// Async TP with Float8 rowwise: per-row scales, so every region runs in parts (each part's
// casts apart, the spanning amaxes reduced once for the whole tensors); with FSDP and
// selective op checkpointing too.
namespace tiny_recipes {
struct tp_async_f8_rowwise {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize =
      tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel, async_tp>, float8<fp8::rowwise>>;
};
struct fsdp_tp_async_f8_op {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, async_tp>,
                                           float8<fp8::rowwise>, activation_checkpointing<ac::selective_op<>>>;
};
}  // namespace tiny_recipes
