// tessera/parallel/pipeline_parallel.hpp: the pipeline-parallel policy -- its options, the
// stage split of a model's layers, the recipe's schedule and the checks, all constexpr.
//
//   using P = tessera::parallelize<
//       tessera::pipeline_parallel<"pp", tessera::pp_schedule<tessera::pipeline::schedule_kind::interleaved_1f1b>,
//                                  tessera::stages_per_rank<2>, tessera::microbatches<4>>,
//       tessera::fsdp<"dp">, tessera::tensor_parallel<"tp", tessera::sequence_parallel>>;
//
// Against a model and the size of the pp axis the options resolve to a `pp_plan`: S = pp x
// v stages, each a range of the model's blocks (the first stage also holding the embedding,
// the last the final norm, the output and the loss), the schedule kind and m microbatches.
// The split is TorchTitan's (generate_llm_fqn_per_model_part): effective layers = n_layers +
// input_weight + output_weight, divided as evenly as possible with the remainder on the
// first stages; the first stage gives `input_weight` of its share to the embedding and the
// last `output_weight` to the head. `layers_per_stage<N>` fixes the share of every stage
// instead (then S x N must equal the effective layers). Stages are placed as the schedule
// says: loop (stage s on rank s mod pp) or V (ZBVZeroBubble, DualPipeV: r and S-1-r).
//
// Everything here is a constexpr function of values: the recipe's static_asserts and the
// start-up check of a dynamic pp size read the same `pp_problem` (train/recipe.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include <tessera/model/llama_config.hpp>
#include <tessera/parallel/policies.hpp>
#include <tessera/pipeline/generators.hpp>
#include <tessera/pipeline/lower.hpp>
#include <tessera/pipeline/verify.hpp>

namespace tessera {

/// pipeline_parallel option: the schedule, one of PyTorch's seven (default 1F1B).
template <pipeline::schedule_kind K>
struct pp_schedule {
  static constexpr pipeline::schedule_kind value = K;
};
/// pipeline_parallel option: a user's schedule table -- a constexpr function returning a
/// compute-only pipeline::schedule (F, B or I and W) for the recipe's pp, v and m; it is
/// verified at compile time.
template <pipeline::schedule (*F)()>
struct schedule_table {
  static constexpr pipeline::schedule (*value)() = F;
};
/// pipeline_parallel option: stages per pp rank (default: 2 for the multi-stage schedules
/// Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV; else 1).
template <int V>
struct stages_per_rank {
  static constexpr int value = V;
};
/// pipeline_parallel option: microbatches per step (default: one per stage).
template <int M>
struct microbatches {
  static constexpr int value = M;
};
/// pipeline_parallel option: every stage holds N effective layers (TorchTitan's
/// pipeline_parallel_layers_per_stage), counting the embedding and the head by their weights.
template <int N>
struct layers_per_stage {
  static constexpr int value = N;
};
/// pipeline_parallel option: how many layers the embedding (In) and the final norm with
/// the output (Out) count as in the split (TorchTitan's first/last_stage_less_layers;
/// default 1 and 1).
template <int In, int Out>
struct stage_weights {
  static constexpr int input = In, output = Out;
};

namespace detail {
template <class O>
struct pp_option {
  static constexpr int kind = -1;  // unknown
};
template <pipeline::schedule_kind K>
struct pp_option<pp_schedule<K>> {
  static constexpr int kind = 0;
  static constexpr void apply(pp_settings& s) { s.schedule = K; }
};
template <pipeline::schedule (*F)()>
struct pp_option<schedule_table<F>> {
  static constexpr int kind = 0;
  static constexpr void apply(pp_settings& s) { s.table = &schedule_table<F>::value; }
};
template <int V>
struct pp_option<stages_per_rank<V>> {
  static constexpr int kind = 1;
  static constexpr void apply(pp_settings& s) { s.stages_per_rank = V; }
};
template <int M>
struct pp_option<microbatches<M>> {
  static constexpr int kind = 2;
  static constexpr void apply(pp_settings& s) { s.microbatches = M, s.microbatches_set = true; }
};
template <int N>
struct pp_option<layers_per_stage<N>> {
  static constexpr int kind = 3;
  static constexpr void apply(pp_settings& s) { s.layers_per_stage = N; }
};
template <int In, int Out>
struct pp_option<stage_weights<In, Out>> {
  static constexpr int kind = 4;
  static constexpr void apply(pp_settings& s) { s.input_weight = In, s.output_weight = Out; }
};

template <class... O>
constexpr pp_settings pp_options() {
  static_assert(((pp_option<O>::kind >= 0) && ...),
                "tessera::pipeline_parallel: unknown option; the options are pp_schedule<K> or schedule_table<F>, "
                "stages_per_rank<V>, microbatches<M>, layers_per_stage<N> and stage_weights<In, Out>");
  constexpr int counts[5] = {((pp_option<O>::kind == 0) + ... + 0), ((pp_option<O>::kind == 1) + ... + 0),
                             ((pp_option<O>::kind == 2) + ... + 0), ((pp_option<O>::kind == 3) + ... + 0),
                             ((pp_option<O>::kind == 4) + ... + 0)};
  static_assert(counts[0] <= 1 && counts[1] <= 1 && counts[2] <= 1 && counts[3] <= 1 && counts[4] <= 1,
                "tessera::pipeline_parallel: an option is given twice (a schedule and a schedule table count as "
                "one); give each option at most once");
  pp_settings s;
  if constexpr (((pp_option<O>::kind >= 0) && ...)) (pp_option<O>::apply(s), ...);
  return s;
}
}  // namespace detail

/// Pipeline parallel over `Axis`: the model's layers split into stages that run a
/// pipeline schedule over microbatches (TorchTitan's pipelining of torch.distributed).
/// Inside a stage, fsdp / hsdp and tensor_parallel work on the other axes as without it.
template <fixed_string Axis, class... Options>
struct pipeline_parallel {
  static constexpr policy_desc desc{.kind = policy_kind::pipeline_parallel,
                                    .axis = Axis.view(),
                                    .replicate_axis = {},
                                    .fsdp = {},
                                    .tp = {},
                                    .pp = detail::pp_options<Options...>()};
};

namespace parallel {

/// True for the schedules that hold several stages per rank.
constexpr bool multi_stage(pipeline::schedule_kind k) {
  return k != pipeline::schedule_kind::gpipe && k != pipeline::schedule_kind::one_f_one_b;
}

/// What is wrong with a pipeline over a model (each has one diagnostic and one start-up
/// message, train/recipe.hpp).
enum class pp_error : std::uint8_t {
  none,
  bad_arguments,          ///< the generator rejects (pp, v, m) (pipeline::argument_problem says why)
  too_few_layers,         ///< more stages than effective layers, or a weight above a stage's share
  layers_per_stage,       ///< layers_per_stage x stages != effective layers
  tied_embeddings,        ///< the output shares the embedding's table across stages
  invalid_table,          ///< a user's table fails verify() (deadlock, missing actions, ...)
  table_shape,            ///< a user's table is for another pp, number of stages or m
  reshard_with_pp,        ///< fsdp's reshard_after_forward given together with pipeline_parallel
};

/// A pipeline resolved against a model and a pp size.
struct pp_plan {
  pp_error error = pp_error::none;
  pipeline::argument_problem why = pipeline::argument_problem::none;  ///< bad_arguments
  pipeline::problem table_problem = pipeline::problem::none;           ///< invalid_table
  pipeline::schedule_kind kind = pipeline::schedule_kind::one_f_one_b;
  bool table = false;
  int pp = 1, v = 1, stages = 1, m = 1;
  int n_layers = 0, input_weight = 1, output_weight = 1, layers_per_stage = 0;
  std::int64_t effective = 0;  ///< n_layers + input_weight + output_weight
  int table_ranks = 0;         ///< a user's table: its ranks

  /// The effective layers stage s holds (the embedding and the head counted by weight).
  constexpr int share(int s) const {
    if (layers_per_stage > 0) return layers_per_stage;
    const int base = static_cast<int>(effective / stages), extra = static_cast<int>(effective % stages);
    return base + (s < extra ? 1 : 0);
  }
  /// The first block of stage s, and one past its last.
  constexpr int first_layer(int s) const {
    if (stages == 1) return 0;
    int l = 0;
    for (int k = 0; k < s; ++k) l += blocks(k);
    return l;
  }
  constexpr int last_layer(int s) const { return first_layer(s) + blocks(s); }
  /// The stage that holds block `layer` (-1: the embedding if `embedding`, else the final
  /// norm and output).
  constexpr int stage_of(std::int64_t layer, bool embedding) const {
    if (layer < 0) return embedding ? 0 : stages - 1;
    for (int s = 0; s < stages; ++s)
      if (layer < last_layer(s)) return s;
    return stages - 1;
  }
  /// Blocks of stage s (its share less the weight of the embedding or the head it holds).
  constexpr int blocks(int s) const {
    if (stages == 1) return n_layers;
    int b = share(s) - (s == 0 ? input_weight : 0) - (s == stages - 1 ? output_weight : 0);
    return b < 0 ? 0 : b;
  }
};

/// The schedule kind's default stages per rank (TorchTitan: 1 for single-stage schedules, 2
/// for multi-stage ones).
constexpr int default_stages_per_rank(const pp_settings& o) {
  if (o.stages_per_rank > 0) return o.stages_per_rank;
  return o.table == nullptr && !multi_stage(o.schedule) ? 1 : 2;
}

/// Resolves pipeline settings against a model config and a pp size (pp >= 1); `microbatches`
/// > 0 overrides the policy's count (a run-time sweep), `reshard_given` is the fsdp policy's.
constexpr pp_plan resolve_pipeline(const llama_config& c, const pp_settings& o, int pp, bool reshard_given = false) {
  pp_plan p;
  p.kind = o.schedule;
  p.table = o.table != nullptr;
  p.pp = pp;
  p.n_layers = static_cast<int>(c.n_layers);
  p.input_weight = o.input_weight;
  p.output_weight = o.output_weight;
  p.layers_per_stage = o.layers_per_stage;
  if (p.table) {
    const pipeline::schedule t = (*o.table)();
    p.v = t.ranks > 0 ? t.stages / t.ranks : 0;
    p.m = t.microbatches;
    p.table_ranks = t.ranks;
    if (t.ranks != pp || t.stages < 1) {
      p.error = pp_error::table_shape;
      return p;
    }
    const pipeline::verify_result r = pipeline::verify(t);
    if (!r.ok) {
      p.error = pp_error::invalid_table;
      p.table_problem = r.what;
      return p;
    }
  } else {
    p.v = default_stages_per_rank(o);
    p.m = o.microbatches_set ? o.microbatches : pp * p.v;
    p.why = pipeline::argument_check(o.schedule, pp, p.v, p.m);
    if (p.why != pipeline::argument_problem::none) {
      p.error = pp_error::bad_arguments;
      return p;
    }
  }
  p.stages = pp * p.v;
  p.effective = c.n_layers + o.input_weight + o.output_weight;
  if (reshard_given) {
    p.error = pp_error::reshard_with_pp;
  } else if (c.tied_embeddings && p.stages > 1) {
    p.error = pp_error::tied_embeddings;
  } else if (o.layers_per_stage > 0) {
    if (static_cast<std::int64_t>(o.layers_per_stage) * p.stages != p.effective) p.error = pp_error::layers_per_stage;
  } else if (p.stages > 1 && (p.stages > p.effective || o.input_weight > p.effective / p.stages ||
                              o.output_weight > p.effective / p.stages || o.input_weight < 0 || o.output_weight < 0)) {
    p.error = pp_error::too_few_layers;
  }
  return p;
}

/// The recipe's compute-only schedule (the generator's, or the user's table).
constexpr pipeline::schedule pp_compute_schedule(const pp_settings& o, const pp_plan& p) {
  if (o.table) return (*o.table)();
  return pipeline::generate(p.kind, p.pp, p.v, p.m);
}

/// The schedule the runtime executes: SEND/RECV and the FSDP actions (UNSHARD before a
/// stage's first compute, REDUCE_GRAD after its last backward, RESHARD after its last
/// compute) placed by lower().
constexpr pipeline::schedule pp_lowered_schedule(const pp_settings& o, const pp_plan& p) {
  return pipeline::lower(pp_compute_schedule(o, p), pipeline::lower_options{.fsdp = true});
}

/// Why a global batch of B rows does not split into dp data-parallel ranks x m microbatches
/// ("" when it does): the start-up check of train_llama and parallel_llama::forward's.
inline std::string pp_batch_problem(std::int64_t B, std::int64_t dp, int m) {
  if (dp > 0 && m > 0 && B % (dp * m) == 0) return {};
  return "pipeline_parallel: the global batch (" + std::to_string(B) + " rows) does not split into " +
         std::to_string(dp) + " data-parallel ranks x " + std::to_string(m) +
         " microbatches; choose --batch (per data-parallel rank) as a multiple of the microbatch count (the local "
         "batch of " + std::to_string(dp > 0 ? B / dp : B) + " rows is not)";
}

/// Run-time choices for a pipeline recipe (a sweep over schedules or microbatch counts
/// without a type per point): what is set replaces the policy's option; checked as the
/// policy's values are, at start-up.
/// Where a rank stands in a recipe's pipeline as parallel_llama runs it (the estimators'
/// view): the plan, the lowered schedule, the rank's pp coordinate, and the stage's mesh --
/// the recipe's with the pp axis collapsed -- with the rank's coordinates in it. Without a
/// pipeline the mesh and coordinates are the recipe's and the rank holds every part.
struct pp_rank_view {
  bool pipelined = false;
  pp_plan plan;
  pipeline::schedule lowered;
  int me = 0;  ///< the rank's pp coordinate
  mesh_shape mesh;
  coords_t coords{};
  constexpr bool ok() const { return !pipelined || plan.error == pp_error::none; }
  /// Whether this rank runs the stage of block `layer` (-1: the embedding when `embedding`,
  /// else the final norm and output).
  constexpr bool holds(std::int64_t layer, bool embedding) const {
    return !pipelined || lowered.rank_of(plan.stage_of(layer, embedding)) == me;
  }
};
constexpr pp_rank_view pp_rank_view_of(const llama_config& c, const parallel_spec& p, const mesh_shape& m,
                                       const coords_t& at) {
  pp_rank_view v;
  v.mesh = m, v.coords = at;
  if (p.pp < 0) return v;
  const auto a = static_cast<std::size_t>(p.pp);
  v.pipelined = true;
  v.plan = resolve_pipeline(c, p.pipeline, static_cast<int>(m[p.pp]), p.reshard_given);
  if (v.plan.error != pp_error::none) return v;
  v.lowered = pp_lowered_schedule(p.pipeline, v.plan);
  v.me = static_cast<int>(at[a]);
  v.mesh.size[a] = 1, v.coords[a] = 0;
  return v;
}

struct pipeline_choice {
  bool set_schedule = false;
  pipeline::schedule_kind schedule = pipeline::schedule_kind::one_f_one_b;
  int stages_per_rank = 0;  ///< 0: the policy's
  int microbatches = 0;     ///< 0: the policy's
  constexpr bool empty() const { return !set_schedule && stages_per_rank == 0 && microbatches == 0; }
  constexpr pp_settings apply(pp_settings o) const {
    if (set_schedule) o.schedule = schedule, o.table = nullptr;
    if (stages_per_rank > 0) o.stages_per_rank = stages_per_rank;
    if (microbatches > 0) o.microbatches = microbatches, o.microbatches_set = true;
    return o;
  }
};

/// A resolved pipeline as the runtime uses it: the plan, the lowered schedule, and where
/// this rank's pp coordinate sits in it.
class pipeline_layout {
 public:
  pp_plan plan;
  pipeline::schedule lowered;  ///< with SEND/RECV and UNSHARD / RESHARD / REDUCE_GRAD
  int coord = 0;               ///< this rank's coordinate on the pp axis

  pipeline_layout() = default;
  pipeline_layout(const pp_plan& p, const pp_settings& o, int pp_coord)
      : plan(p), lowered(pp_lowered_schedule(o, p)), coord(pp_coord) {}
  /// No pipeline: one stage holding the whole model.
  static pipeline_layout single(const llama_config& c) {
    pipeline_layout l;
    l.plan.n_layers = static_cast<int>(c.n_layers);
    l.lowered.stage_rank = {0};
    return l;
  }

  int stages() const { return plan.stages; }
  int microbatches() const { return plan.m; }
  int rank_of(int stage) const { return lowered.rank_of(stage); }
  bool local(int stage) const { return rank_of(stage) == coord; }
  int first_layer(int stage) const { return plan.first_layer(stage); }
  int last_layer(int stage) const { return plan.last_layer(stage); }
  int stage_of(std::int64_t layer, bool embedding) const { return plan.stage_of(layer, embedding); }
  /// "stage 0: embedding + layers 0-0 (rank 0); ..." for logs and tessera-schedule.
  std::string describe() const {
    std::string out;
    for (int s = 0; s < plan.stages; ++s) {
      const int a = first_layer(s), b = last_layer(s);
      out += "stage " + std::to_string(s) + " (pp rank " + std::to_string(rank_of(s)) + "):";
      if (s == 0) out += " embedding";
      if (b > a) out += std::string(s == 0 ? " +" : "") + " layers " + std::to_string(a) + "-" + std::to_string(b - 1);
      if (s == plan.stages - 1) out += std::string(s == 0 || b > a ? " +" : "") + " norm, output";
      out += "\n";
    }
    return out;
  }
};

/// The sentence for a pipeline problem, with the numbers (the start-up check's words; the
/// static_asserts say the same).
inline std::string pp_message(const pp_plan& p) {
  const std::string n = std::to_string(p.n_layers), S = std::to_string(p.stages), v = std::to_string(p.v),
                    pp = std::to_string(p.pp), m = std::to_string(p.m);
  switch (p.error) {
    case pp_error::none: return {};
    case pp_error::bad_arguments:
      return std::string(pipeline::schedule_name(p.kind)) + " with pp = " + pp + ", " + v + " stages per rank and " +
             m + " microbatches: " + std::string(pipeline::check_arguments(p.kind, p.pp, p.v, p.m));
    case pp_error::too_few_layers:
      return "too few layers for the stages: " + n + " layers + input weight " + std::to_string(p.input_weight) +
             " + output weight " + std::to_string(p.output_weight) + " = " + std::to_string(p.effective) +
             " effective layers over " + S + " stages (each stage needs at least one, and at least the input and "
             "output weights); use fewer stages (pp x stages_per_rank) or smaller stage_weights";
    case pp_error::layers_per_stage:
      return "layers_per_stage<" + std::to_string(p.layers_per_stage) + "> x " + S + " stages != " +
             std::to_string(p.effective) + " effective layers (" + n + " + input and output weights); choose a "
             "count that divides them, or drop layers_per_stage for the balanced split";
    case pp_error::tied_embeddings:
      return "the model ties its output to the embedding, which sit on different stages (first and last); "
             "untie them (tied_embeddings = false) or use one stage";
    case pp_error::invalid_table:
      return "the schedule table is invalid (" + std::string(pipeline::problem_name(p.table_problem)) +
             "); run pipeline::verify() on it for the rank and step";
    case pp_error::table_shape:
      return "the schedule table is for another pipeline (it must have pp = " + pp + " ranks)";
    case pp_error::reshard_with_pp:
      return "reshard_after_forward is given with pipeline_parallel; under a pipeline a stage's parameters are "
             "gathered at the schedule's UNSHARD and freed at its RESHARD (after the stage's last backward), so "
             "drop the option";
  }
  return "?";
}

}  // namespace parallel
}  // namespace tessera
