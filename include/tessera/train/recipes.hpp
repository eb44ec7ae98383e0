// tessera/train/recipes.hpp: the recipes tessera ships, and lookup by name.
//
// A recipe is a struct: a model config type, a mesh, and the policies (docs/recipes.md).
// The debug recipes train TorchTitan's debugmodel; `train_llama --recipe NAME --ranks N`
// runs any of them:
//   debug_fsdp   FSDP over every rank (dp = N)
//   debug_hsdp   HSDP: 2 replicas x N/2 shards
//   debug_tp     tensor parallel over 2 ranks with sequence and loss parallel
//   debug_2d     FSDP dp = 2 x TP tp = 2 with sequence and loss parallel (4 ranks)
//   debug_pp     pipeline pp = 2, 1F1B, 2 microbatches (2 ranks)
//   debug_3d     pp = 2 (Interleaved1F1B, 2 stages per rank) x FSDP dp = 2 x TP tp = 2 (8 ranks)
//   debug_3d_zbv the same with ZBVZeroBubble (V placement, I and W apart)
//   debug_2d_ac  debug_2d with selective op activation checkpointing (TorchTitan's op policy)
//   debug_fsdp_bf16       FSDP gathering bf16 parameters (mixed precision; the Float8 baseline)
//   debug_fsdp_float8     debug_fsdp_bf16 with Float8 rowwise block linears
//   debug_fsdp_float8_tw  debug_fsdp_bf16 with Float8 tensorwise and FP8 all-gather
//   debug_cp     FSDP dp = 2 x context parallel cp = 2 (all-gather, head-tail; 4 ranks)
//   debug_4d     pp = 2 (1F1B) x FSDP dp = 2 x CP cp = 2 (ring) x TP tp = 2 with SP and
//                loss parallel (16 ranks)
// llama3_8b_fsdp (FSDP over 8 ranks) is the paper's 8B configuration, for the memory
// estimator; it is far too large for a CPU.
#pragma once

#include <string>
#include <string_view>

#include <tessera/model/llama_config.hpp>
#include <tessera/parallel/activation_checkpoint.hpp>
#include <tessera/parallel/context_parallel.hpp>
#include <tessera/parallel/float8.hpp>
#include <tessera/parallel/pipeline_parallel.hpp>
#include <tessera/parallel/policies.hpp>

namespace tessera::recipes {

struct debug_fsdp {
  static constexpr std::string_view name = "debug_fsdp";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">>;
};

struct debug_hsdp {
  static constexpr std::string_view name = "debug_hsdp";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp_replicate", 2>, axis<"dp_shard">>;
  using parallelize = tessera::parallelize<hsdp<"dp_replicate", "dp_shard">>;
};

struct debug_tp {
  static constexpr std::string_view name = "debug_tp";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};

struct debug_2d {
  static constexpr std::string_view name = "debug_2d";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};

struct debug_pp {
  static constexpr std::string_view name = "debug_pp";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize =
      tessera::parallelize<pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::one_f_one_b>, microbatches<2>>>;
};

/// 3-D: 2 microbatches per step, so that the default batch (8 per data-parallel rank) and the
/// equivalence tests' global batch of 4 (2 per data-parallel rank) both split.
struct debug_3d {
  static constexpr std::string_view name = "debug_3d";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::interleaved_1f1b>, stages_per_rank<2>,
                        microbatches<2>>,
      fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};

struct debug_3d_zbv {
  static constexpr std::string_view name = "debug_3d_zbv";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::zbv_zero_bubble>, stages_per_rank<2>,
                        microbatches<2>>,
      fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};

struct debug_2d_ac {
  static constexpr std::string_view name = "debug_2d_ac";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, loss_parallel>,
                                           activation_checkpointing<ac::selective_op<>>>;
};

/// debug_2d with async TP (TorchTitan's enable_async_tensor_parallel): the blocks'
/// sequence-parallel gathers and reduce-scatters run as ring steps around their GEMMs.
struct debug_2d_async {
  static constexpr std::string_view name = "debug_2d_async";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize =
      tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, loss_parallel, async_tp>>;
};

/// The Float8 recipes' baseline: FSDP gathering bf16 parameters (TorchTitan's default
/// mixed_precision_param), computing in f32.
struct debug_fsdp_bf16 {
  static constexpr std::string_view name = "debug_fsdp_bf16";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp", mixed_precision<bf16, float>>>;
};

struct debug_fsdp_float8 {
  static constexpr std::string_view name = "debug_fsdp_float8";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp", mixed_precision<bf16, float>>, float8<fp8::rowwise>>;
};

struct debug_fsdp_float8_tw {
  static constexpr std::string_view name = "debug_fsdp_float8_tw";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize =
      tessera::parallelize<fsdp<"dp", mixed_precision<bf16, float>>, float8<fp8::tensorwise, fp8::all_gather>>;
};

struct debug_cp {
  static constexpr std::string_view name = "debug_cp";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"cp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, context_parallel<"cp">>;
};

struct debug_4d {
  static constexpr std::string_view name = "debug_4d";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"dp", 2>, axis<"cp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::one_f_one_b>, microbatches<2>>, fsdp<"dp">,
      context_parallel<"cp", cp_rotation<cp_rotate::ring>>, tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};

struct llama3_8b_fsdp {
  static constexpr std::string_view name = "llama3_8b_fsdp";
  using model = llama3_8b;
  using mesh = tessera::mesh<axis<"dp", 8>>;
  using parallelize = tessera::parallelize<fsdp<"dp", mixed_precision<bf16, float>>>;
};

namespace detail {
/// The recipes a CPU can run, in the order help lists them.
template <class F>
void for_each_runnable(F&& f) {
  f.template operator()<debug_fsdp>();
  f.template operator()<debug_hsdp>();
  f.template operator()<debug_tp>();
  f.template operator()<debug_2d>();
  f.template operator()<debug_pp>();
  f.template operator()<debug_3d>();
  f.template operator()<debug_3d_zbv>();
  f.template operator()<debug_2d_ac>();
  f.template operator()<debug_2d_async>();
  f.template operator()<debug_fsdp_bf16>();
  f.template operator()<debug_fsdp_float8>();
  f.template operator()<debug_fsdp_float8_tw>();
  f.template operator()<debug_cp>();
  f.template operator()<debug_4d>();
}
}  // namespace detail

/// Calls `f.template operator()<R>()` with the shipped recipe called `name` that a CPU can
/// run; returns false when there is none.
template <class F>
bool visit(std::string_view name, F&& f) {
  bool found = false;
  detail::for_each_runnable([&]<class R>() {
    if (!found && R::name == name) {
      found = true;
      f.template operator()<R>();
    }
  });
  return found;
}

/// "debug_fsdp|debug_hsdp|...": the names visit() knows.
inline std::string names() {
  std::string out;
  detail::for_each_runnable([&]<class R>() { out += (out.empty() ? "" : "|") + std::string(R::name); });
  return out;
}

}  // namespace tessera::recipes
