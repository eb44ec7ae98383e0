// tessera/train/recipe.hpp: recipes -- a model config, a mesh and a list of policies --
// checked when the recipe is used.
//
//   struct my_recipe {
//     static constexpr std::string_view name = "my_recipe";
//     using model = tessera::debugmodel;
//     using mesh = tessera::mesh<tessera::axis<"dp", 2>, tessera::axis<"tp", 2>>;
//     using parallelize = tessera::parallelize<
//         tessera::fsdp<"dp">, tessera::tensor_parallel<"tp", tessera::sequence_parallel>>;
//   };
//   using R = tessera::recipe_traits<my_recipe>;   // every check below runs here
//
// Compile-time checks (static_assert, one message each, tested in tests/compile_fail):
// the recipe has `model`, `mesh` and `parallelize`; every policy's axis is in the mesh;
// no axis is claimed twice; every mesh axis is used; at most one data-parallel and one
// tensor-parallel policy, at most one context_parallel; a static TP size divides n_heads,
// n_kv_heads and the FFN width (the vocabulary may split unevenly); at most one float8 policy, its FP8 all-gather only
// under fsdp / hsdp, the linears it names with dims that are multiples of 16. Dynamic sizes
// are checked by check_mesh() at start-up with the same words and the numbers.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <tessera/core/diagnostic.hpp>
#include <tessera/core/error.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_params.hpp>
#include <tessera/parallel/context_parallel.hpp>
#include <tessera/parallel/float8.hpp>
#include <tessera/parallel/layouts.hpp>
#include <tessera/parallel/pipeline_parallel.hpp>
#include <tessera/parallel/policies.hpp>

namespace tessera {

namespace detail {
template <class R>
concept has_recipe_members = requires {
  R::model::config;
  typename R::mesh;
  typename R::parallelize;
};
template <class R>
constexpr bool recipe_members_ok() {
  if constexpr (has_recipe_members<R>)
    return is_mesh_v<typename R::mesh> && is_parallelize_v<typename R::parallelize>;
  else
    return false;
}
/// The recipe's parts, or harmless stand-ins when it has none (so that only the
/// static_assert on the members fires).
template <class R, bool Ok = recipe_members_ok<R>()>
struct recipe_parts {
  static constexpr llama_config config{.name = "?", .dim = 2, .n_layers = 1, .n_heads = 1, .n_kv_heads = 1,
                                       .vocab_size = 1};
  using model_type = void;
  using mesh_type = mesh<axis<"?", 1>>;
  static constexpr parallel_spec spec{.mesh_ndim = 1};
  static constexpr std::array<policy_desc, 0> policies{};
};
template <class R>
struct recipe_parts<R, true> {
  static constexpr llama_config config = R::model::config;
  using model_type = typename R::model;
  using mesh_type = typename R::mesh;
  static constexpr parallel_spec spec = resolve_policies(mesh_type::names, R::parallelize::policies);
  static constexpr auto policies = R::parallelize::policies;
};
}  // namespace detail

/// What the parallel sizes of a recipe break in its model config: one constexpr check that
/// the static_asserts (static axis sizes) and check_mesh (dynamic ones, at start-up) both
/// read, so both say the same words (parallel_words) about the same numbers.
enum class parallel_error : std::uint8_t { none, tp_n_heads, tp_n_kv_heads, tp_ffn };

struct parallel_problem {
  parallel_error error = parallel_error::none;
  std::int64_t value = 0;  ///< the size that does not divide (n_heads, n_kv_heads, FFN width)
  std::int64_t size = 0;   ///< the axis size
};

/// Tensor parallel over `tp` ranks (0: none or dynamic and not yet known) on config `c`.
constexpr parallel_problem check_parallel(const llama_config& c, std::int64_t tp) {
  if (tp <= 0) return {};
  if (c.n_heads % tp) return {parallel_error::tp_n_heads, c.n_heads, tp};
  if (c.n_kv_heads % tp) return {parallel_error::tp_n_kv_heads, c.n_kv_heads, tp};
  if (ffn_hidden_dim(c) % tp) return {parallel_error::tp_ffn, ffn_hidden_dim(c), tp};
  return {};
}
constexpr std::string_view parallel_words(parallel_error e) {
  switch (e) {
    case parallel_error::none: return "";
    case parallel_error::tp_n_heads: return "n_heads";
    case parallel_error::tp_n_kv_heads: return "n_kv_heads";
    case parallel_error::tp_ffn: return "the FFN width";
  }
  return "?";
}

/// The compile-time diagnostics of recipes. Each is instantiated only to fail, with the
/// culprit as its template arguments (core/diagnostic.hpp), so the compiler shows which
/// axis or size is wrong next to the message. Function templates, not classes: a failed
/// one still returns a value, so nothing after it fails again.
namespace diagnostic {
template <class Axis, class MeshAxes>
constexpr bool policy_axis_not_in_mesh() {
  static_assert(always_false<Axis>, "tessera recipe: a policy names an axis that is not in the mesh; use the mesh's "
                                    "axis names (the axis and the mesh's axes are the template arguments above)");
  return false;
}
template <class Axis>
constexpr bool axis_claimed_twice() {
  static_assert(always_false<Axis>, "tessera recipe: two policies claim the same mesh axis; give each policy its own "
                                    "axis (the axis is the template argument above)");
  return false;
}
template <class Axis>
constexpr bool mesh_axis_unused() {
  static_assert(always_false<Axis>, "tessera recipe: a mesh axis is used by no policy; add a policy for it or remove "
                                    "it from the mesh (the axis is the template argument above)");
  return false;
}
template <int Policy>
constexpr bool two_data_parallel() {
  static_assert(Policy < 0, "tessera recipe: more than one fsdp / hsdp policy; use one (hsdp for sharding within and "
                            "replicating across)");
  return false;
}
template <int Policy>
constexpr bool two_tensor_parallel() {
  static_assert(Policy < 0, "tessera recipe: more than one tensor_parallel policy; use one");
  return false;
}
template <std::int64_t n_heads, std::int64_t tp_size>
constexpr bool tp_size_must_divide_n_heads() {
  static_assert(n_heads % tp_size == 0, "tessera recipe: tensor_parallel's axis size does not divide n_heads; each "
                                        "rank needs whole attention heads, so choose a TP size that divides n_heads");
  return false;
}
template <std::int64_t n_kv_heads, std::int64_t tp_size>
constexpr bool tp_size_must_divide_n_kv_heads() {
  static_assert(n_kv_heads % tp_size == 0, "tessera recipe: tensor_parallel's axis size does not divide n_kv_heads; "
                                           "each rank needs whole KV heads, so choose a TP size that divides n_kv_heads");
  return false;
}
template <std::int64_t ffn_width, std::int64_t tp_size>
constexpr bool tp_size_must_divide_ffn_width() {
  static_assert(ffn_width % tp_size == 0, "tessera recipe: tensor_parallel's axis size does not divide the FFN width; "
                                          "choose a TP size that divides ffn_hidden_dim");
  return false;
}
template <int Policy>
constexpr bool two_pipeline_parallel() {
  static_assert(Policy < 0, "tessera recipe: more than one pipeline_parallel policy; use one");
  return false;
}
template <int Policy>
constexpr bool two_activation_checkpointing() {
  static_assert(Policy < 0, "tessera recipe: more than one activation_checkpointing policy; use one");
  return false;
}
// pipeline_parallel (parallel/pipeline_parallel.hpp): the numbers are the template arguments.
template <pipeline::schedule_kind Schedule, int stages_per_rank>
constexpr bool pp_v_schedule_needs_2_stages_per_rank() {
  static_assert(stages_per_rank == 2, "tessera recipe: pipeline_parallel: V-shaped schedules (ZBVZeroBubble, "
                                      "DualPipeV) hold exactly 2 stages per rank; use stages_per_rank<2>");
  return false;
}
template <int stages_per_rank>
constexpr bool pp_stages_per_rank_out_of_range() {
  static_assert(stages_per_rank < 0, "tessera recipe: pipeline_parallel: stages_per_rank must be between 1 and 16");
  return false;
}
template <int microbatches>
constexpr bool pp_microbatches_below_1() {
  static_assert(microbatches >= 1, "tessera recipe: pipeline_parallel: microbatches must be at least 1");
  return false;
}
template <int n_layers, std::int64_t effective_layers, int stages>
constexpr bool pp_too_few_layers_for_the_stages() {
  static_assert(stages < 0, "tessera recipe: pipeline_parallel: too few layers for the stages (n_layers + input and "
                            "output weights must give every stage at least one effective layer, and at least the "
                            "weights); use fewer stages (pp x stages_per_rank) or smaller stage_weights");
  return false;
}
template <int layers_per_stage, int stages, std::int64_t effective_layers>
constexpr bool pp_layers_per_stage_does_not_fit() {
  static_assert(stages < 0, "tessera recipe: pipeline_parallel: layers_per_stage x stages is not the number of "
                            "effective layers (n_layers + input and output weights); choose a count that divides "
                            "them, or drop layers_per_stage for the balanced split");
  return false;
}
template <int stages>
constexpr bool pp_tied_embeddings() {
  static_assert(stages < 2, "tessera recipe: pipeline_parallel: the model ties its output to the embedding, which "
                            "sit on different stages (first and last); untie them (tied_embeddings = false) or use "
                            "one stage");
  return false;
}
template <pipeline::problem What>
constexpr bool pp_invalid_schedule_table() {
  static_assert(What == pipeline::problem::none, "tessera recipe: pipeline_parallel: the schedule table is invalid "
                                                 "(the template argument says why: deadlock, missing, ...); run "
                                                 "pipeline::verify() on it for the rank and step");
  return false;
}
template <int pp_size, int table_ranks>
constexpr bool pp_schedule_table_for_another_pipeline() {
  static_assert(pp_size == table_ranks, "tessera recipe: pipeline_parallel: the schedule table has another number "
                                        "of ranks than the pp axis; generate it for the recipe's pp size");
  return false;
}
template <int Policy>
constexpr bool two_context_parallel() {
  static_assert(Policy < 0, "tessera recipe: more than one context_parallel policy; use one");
  return false;
}
template <int Policy>
constexpr bool two_float8() {
  static_assert(Policy < 0, "tessera recipe: more than one float8 policy; use one");
  return false;
}
template <int Policy>
constexpr bool fp8_all_gather_without_fsdp() {
  static_assert(Policy < 0, "tessera recipe: float8's fp8::all_gather changes what FSDP gathers and needs an "
                            "fsdp or hsdp policy; add one or drop the option");
  return false;
}
template <param_role Linear, std::int64_t Out, std::int64_t In>
constexpr bool float8_linear_dims_not_multiple_of_16() {
  static_assert(Out < 0, "tessera recipe: float8: a linear named in fp8::linears<...> has a dim that is not a multiple "
                         "of 16, which FP8 GEMMs need (the role and its [out, in] are the template arguments above); "
                         "leave it out of the list");
  return false;
}
template <int stages>
constexpr bool pp_reshard_after_forward_given() {
  static_assert(stages < 0, "tessera recipe: pipeline_parallel with fsdp's reshard_after_forward: under a pipeline "
                            "a stage's parameters are gathered at the schedule's UNSHARD and freed at its RESHARD; "
                            "drop the option");
  return false;
}
}  // namespace diagnostic

namespace detail {
/// The one pipeline diagnostic of a pipeline resolved at compile time (none: nothing).
template <parallel::pp_plan P>
constexpr bool report_pipeline() {
  using parallel::pp_error;
  if constexpr (P.error == pp_error::bad_arguments) {
    if constexpr (P.why == pipeline::argument_problem::v_shape_needs_exactly_2_stages_per_rank)
      (void)diagnostic::pp_v_schedule_needs_2_stages_per_rank<P.kind, P.v>();
    else if constexpr (P.why == pipeline::argument_problem::microbatches_below_1)
      (void)diagnostic::pp_microbatches_below_1<P.m>();
    else
      (void)diagnostic::pp_stages_per_rank_out_of_range<P.v>();
  } else if constexpr (P.error == pp_error::too_few_layers) {
    (void)diagnostic::pp_too_few_layers_for_the_stages<P.n_layers, P.effective, P.stages>();
  } else if constexpr (P.error == pp_error::layers_per_stage) {
    (void)diagnostic::pp_layers_per_stage_does_not_fit<P.layers_per_stage, P.stages, P.effective>();
  } else if constexpr (P.error == pp_error::tied_embeddings) {
    (void)diagnostic::pp_tied_embeddings<P.stages>();
  } else if constexpr (P.error == pp_error::invalid_table) {
    (void)diagnostic::pp_invalid_schedule_table<P.table_problem>();
  } else if constexpr (P.error == pp_error::table_shape) {
    (void)diagnostic::pp_schedule_table_for_another_pipeline<P.pp, P.table_ranks>();
  } else if constexpr (P.error == pp_error::reshard_with_pp) {
    (void)diagnostic::pp_reshard_after_forward_given<P.stages>();
  }
  return P.error == pp_error::none;
}

/// Instantiates the one diagnostic for a recipe's error (none: nothing) and says whether
/// the recipe is fine.
template <class Parts>
constexpr bool report_recipe() {
  using Mesh = typename Parts::mesh_type;
  constexpr parallel_spec S = Parts::spec;
  if constexpr (config_problem(Parts::config) != config_error::none) {  // the model first: the rest reads it
    (void)config_is_valid<config_problem(Parts::config), typename Parts::model_type>();
    return false;
  } else if constexpr (S.error == policy_error::unknown_axis || S.error == policy_error::axis_twice) {
    constexpr const policy_desc& p = Parts::policies[static_cast<std::size_t>(S.error_policy)];
    constexpr std::string_view name = S.error_on_replicate_axis ? p.replicate_axis : p.axis;
    using axis = diagnostic::text_t<diagnostic::buffer_of<name.size()>(name)>;
    if constexpr (S.error == policy_error::unknown_axis) {
      constexpr std::span<const std::string_view> names(Mesh::names);
      using mesh_axes = diagnostic::text_t<diagnostic::joined<diagnostic::joined_size(names)>(names)>;
      (void)diagnostic::policy_axis_not_in_mesh<axis, mesh_axes>();
    } else {
      (void)diagnostic::axis_claimed_twice<axis>();
    }
    return false;
  } else if constexpr (S.error == policy_error::unclaimed_axis) {
    constexpr std::string_view name = Mesh::names[static_cast<std::size_t>(S.error_policy)];
    (void)diagnostic::mesh_axis_unused<diagnostic::text_t<diagnostic::buffer_of<name.size()>(name)>>();
    return false;
  } else if constexpr (S.error == policy_error::two_data_parallel) {
    (void)diagnostic::two_data_parallel<S.error_policy>();
    return false;
  } else if constexpr (S.error == policy_error::two_tensor_parallel) {
    (void)diagnostic::two_tensor_parallel<S.error_policy>();
    return false;
  } else if constexpr (S.error == policy_error::two_pipeline_parallel) {
    (void)diagnostic::two_pipeline_parallel<S.error_policy>();
    return false;
  } else if constexpr (S.error == policy_error::two_activation_checkpointing) {
    (void)diagnostic::two_activation_checkpointing<S.error_policy>();
    return false;
  } else if constexpr (S.error == policy_error::two_context_parallel) {
    (void)diagnostic::two_context_parallel<S.error_policy>();
    return false;
  } else if constexpr (S.error == policy_error::two_float8) {
    (void)diagnostic::two_float8<S.error_policy>();
    return false;
  } else if constexpr (S.float8.all_gather && S.dp_shard < 0) {
    (void)diagnostic::fp8_all_gather_without_fsdp<S.mesh_ndim>();
    return false;
  } else if constexpr (f8_named_dims_problem(Parts::config, S.float8).out != 0) {
    constexpr f8_dim_problem P = f8_named_dims_problem(Parts::config, S.float8);
    (void)diagnostic::float8_linear_dims_not_multiple_of_16<P.role, P.out, P.in>();
    return false;
  } else if constexpr (S.pp >= 0 && Mesh::static_shape[S.pp] != dyn &&
                       parallel::resolve_pipeline(Parts::config, S.pipeline, static_cast<int>(Mesh::static_shape[S.pp]),
                                                  S.reshard_given)
                               .error != parallel::pp_error::none) {
    return report_pipeline<parallel::resolve_pipeline(Parts::config, S.pipeline,
                                                      static_cast<int>(Mesh::static_shape[S.pp]), S.reshard_given)>();
  } else {
    constexpr std::int64_t tp = S.tp >= 0 && Mesh::static_shape[S.tp] != dyn ? Mesh::static_shape[S.tp] : 0;
    constexpr parallel_problem P = check_parallel(Parts::config, tp);
    if constexpr (P.error == parallel_error::tp_n_heads)
      (void)diagnostic::tp_size_must_divide_n_heads<P.value, P.size>();
    else if constexpr (P.error == parallel_error::tp_n_kv_heads)
      (void)diagnostic::tp_size_must_divide_n_kv_heads<P.value, P.size>();
    else if constexpr (P.error == parallel_error::tp_ffn)
      (void)diagnostic::tp_size_must_divide_ffn_width<P.value, P.size>();
    return P.error == parallel_error::none;
  }
}
}  // namespace detail

template <class Recipe>
struct recipe_traits {
  static_assert(detail::recipe_members_ok<Recipe>(),
                "tessera recipe: a recipe needs `using model = <config type>`, `using mesh = tessera::mesh<...>` and "
                "`using parallelize = tessera::parallelize<...>`");
  using parts = detail::recipe_parts<Recipe>;
  using mesh_type = typename parts::mesh_type;
  static constexpr llama_config config = parts::config;
  static constexpr parallel_spec spec = parts::spec;

  /// The static size of the TP axis (0: no TP or a dynamic size).
  static constexpr std::int64_t static_tp = spec.tp >= 0 && mesh_type::static_shape[spec.tp] != dyn
                                                ? mesh_type::static_shape[spec.tp]
                                                : 0;
  /// True when the recipe is fine; otherwise the one diagnostic of its first mistake fired.
  static constexpr bool ok = detail::report_recipe<parts>();
  static_assert(ok || !ok);  // evaluates `ok`, so forming recipe_traits<R> runs every check

  static std::string name() {
    if constexpr (requires { Recipe::name; })
      return std::string(Recipe::name);
    else
      return "recipe";
  }

  /// The pipeline over a pp axis of size `pp` (a run-time size or the static one), with
  /// run-time choices applied; throws the static checks' words with
  /// the numbers when it does not fit.
  static parallel::pp_plan pipeline(int pp, const parallel::pipeline_choice& choice = {}) {
    const pp_settings o = pipeline_settings(choice);
    const parallel::pp_plan p = parallel::resolve_pipeline(config, o, pp, spec.reshard_given);
    if (p.error != parallel::pp_error::none)
      throw error("recipe " + name() + ": pipeline_parallel<\"" +
                  std::string(mesh_type::names[static_cast<std::size_t>(spec.pp)]) + "\">: " + parallel::pp_message(p));
    return p;
  }

  /// The policy's pipeline settings with run-time choices applied.
  static constexpr pp_settings pipeline_settings(const parallel::pipeline_choice& choice = {}) {
    return choice.apply(spec.pipeline);
  }

  /// Start-up check of what only the run fixes (dynamic axis sizes): check_parallel, in
  /// the words of the static checks, with the numbers.
  static void check_mesh(const mesh_shape& m) {
    if (spec.pp >= 0) (void)pipeline(static_cast<int>(m[spec.pp]));
    if (spec.tp < 0) return;
    const std::int64_t tp = m[spec.tp];
    const parallel_problem p = check_parallel(config, tp);
    if (p.error == parallel_error::none) return;
    const std::string axis(mesh_type::names[static_cast<std::size_t>(spec.tp)]);
    throw error("recipe " + name() + ": tensor_parallel<\"" + axis + "\">: " + std::string(parallel_words(p.error)) +
                " (" + std::to_string(p.value) + ") is not divisible by the size of axis \"" + axis + "\" (" +
                std::to_string(tp) + "); choose a TP size that divides it");
  }
};

}  // namespace tessera
