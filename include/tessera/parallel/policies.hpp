// tessera/parallel/policies.hpp: parallelism policies as types, resolved to one value.
//
//   using P = tessera::parallelize<
//       tessera::fsdp<"dp", tessera::reshard_after_forward<tessera::reshard::always>>,
//       tessera::tensor_parallel<"tp", tessera::sequence_parallel, tessera::loss_parallel>>;
//
// A policy names mesh axes and options; `parallelize<...>` lists them. Against a mesh the
// list resolves (constexpr) to a `parallel_spec`: which axis shards parameters (FSDP, or
// HSDP's shard axis), which replicates them (HSDP), which splits the math (TP), and the
// options. Everything downstream -- each parameter's and activation's layout, and so every
// collective -- is a function of that value (tessera/parallel/layouts.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <tessera/core/fixed_string.hpp>
#include <tessera/core/float8.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/model/llama_ac.hpp>
#include <tessera/pipeline/generators.hpp>
#include <tessera/tensor/dtype.hpp>

namespace tessera {

/// When FSDP frees the gathered parameters of a block after its forward (FSDP2's
/// reshard_after_forward): always (re-gathered for backward), never (kept from forward to
/// backward), all_but_last (the last block, whose backward comes first, stays gathered).
enum class reshard : std::uint8_t { always, never, all_but_last };

/// FSDP option: when to free gathered parameters after forward (default: always).
template <reshard R>
struct reshard_after_forward {
  static constexpr reshard value = R;
};
/// FSDP option: the dtype parameters are gathered and computed in, and the dtype gradients
/// are reduced in (FSDP2's MixedPrecisionPolicy). Master weights and optimizer states stay
/// f32 and sharded. Supported: <bf16, float> and <float, float> (the default).
template <class Param, class Reduce>
struct mixed_precision {
  using param_type = Param;
  using reduce_type = Reduce;
};
/// TP option: norms and residual stream sharded over the sequence (Megatron-SP): all-gather
/// in front of each column-parallel region and reduce-scatter after each row-parallel one
/// instead of all-reduces.
struct sequence_parallel {};
/// TP option: logits stay sharded over the vocabulary and the cross-entropy reduces its row
/// statistics across the axis (TorchTitan's loss_parallel) instead of gathering logits.
struct loss_parallel {};
/// TP option (needs sequence_parallel): async TP, TorchTitan's enable_async_tensor_parallel
/// (micro-pipelined TP). Each sequence-parallel all-gather in front of a column-parallel
/// region runs as tp - 1 ring steps, the region's GEMMs on each arrived part of the sequence
/// while the next part travels; each reduce-scatter after a row-parallel region runs as tp
/// ring steps, the GEMM of the part sent next computed while the last one travels
/// (parallel/tensor_parallel.hpp, docs/parallelism.md).
struct async_tp {};

enum class policy_kind : std::uint8_t {
  fsdp, hsdp, tensor_parallel, pipeline_parallel, activation_checkpointing, float8, context_parallel
};

/// FSDP's and HSDP's options as values.
struct fsdp_settings {
  reshard reshard_after_forward = reshard::always;
  bool bf16_params = false;       ///< mixed_precision<bf16, float>
  bool reshard_given = false;     ///< reshard_after_forward was given (pipeline_parallel refuses it)
};
/// pipeline_parallel's options as values (parallel/pipeline_parallel.hpp names the options).
struct pp_settings {
  pipeline::schedule_kind schedule = pipeline::schedule_kind::one_f_one_b;
  /// A user's table (schedule_table<F>), replacing `schedule`: a pointer to the variable that
  /// holds the function (g++ 12 refuses a function pointer inside a class-type template
  /// argument, which parallel_spec is; a pointer to a variable it takes).
  pipeline::schedule (*const* table)() = nullptr;
  int stages_per_rank = 0;   ///< 0: what the schedule needs (2 for multi-stage schedules, else 1)
  int microbatches = 0;      ///< with microbatches_set; else one per stage (pp x stages per rank)
  bool microbatches_set = false;
  int layers_per_stage = 0;  ///< 0: TorchTitan's balanced split
  int input_weight = 1;      ///< the embedding counts as this many layers in the split
  int output_weight = 1;     ///< the final norm and output count as this many layers
  int options_given = 0;     ///< bad options (unknown, twice): the policy's own static_asserts fired
};
/// tensor_parallel's options as values.
struct tp_settings {
  bool sequence_parallel = false;
  bool loss_parallel = false;
  bool async = false;  ///< async_tp
};

/// float8's options as values (parallel/float8.hpp names the options).
struct f8_settings {
  bool on = false;
  f8_recipe recipe = f8_recipe::tensorwise;
  bool all_gather = false;    ///< fp8_all_gather: FSDP gathers the Float8 weights in e4m3
  bool auto_filter = false;   ///< auto_filter_small_kn: torchao's size thresholds
  std::uint16_t named = 0;    ///< fp8::linears<...>: the roles named (bits 1 << param_role); 0: every linear
};

/// context_parallel's options as values (parallel/context_parallel.hpp names the options).
enum class cp_rotation_kind : std::uint8_t {
  allgather,  ///< K/V gathered once per attention (PyTorch's default), dK/dV reduce-scattered
  ring        ///< K/V blocks passed to rank + 1 while the current block computes
};
enum class cp_balance_kind : std::uint8_t {
  head_tail,     ///< 2 x cp chunks, rank r holding r and 2cp-1-r (even causal work)
  none,          ///< cp contiguous chunks
  per_document   ///< head-tail inside each packed document (cp_documents; every row its own split)
};
struct cp_settings {
  cp_rotation_kind rotation = cp_rotation_kind::allgather;
  cp_balance_kind balance = cp_balance_kind::head_tail;
  std::int32_t documents_eos = -1;  ///< cp_documents<Eos>: attention within each document (-1: off)
};

/// A policy as a value: its axes by name and its options.
struct policy_desc {
  policy_kind kind = policy_kind::fsdp;
  std::string_view axis;            ///< fsdp and tensor_parallel: the axis; hsdp: the shard axis
  std::string_view replicate_axis;  ///< hsdp: the replicate axis
  fsdp_settings fsdp{};             ///< fsdp, hsdp
  tp_settings tp{};                 ///< tensor_parallel
  pp_settings pp{};                 ///< pipeline_parallel
  ac_settings ac{};                 ///< activation_checkpointing (no axis)
  f8_settings f8{};                 ///< float8 (no axis)
  cp_settings cp{};                 ///< context_parallel
};

namespace detail {
/// What an option of fsdp / hsdp is (unknown types are none of these).
template <class O>
struct fsdp_option {
  static constexpr bool is_reshard = false, is_mp = false, supported = true;
};
template <reshard R>
struct fsdp_option<reshard_after_forward<R>> {
  static constexpr bool is_reshard = true, is_mp = false, supported = true;
  static constexpr void apply(fsdp_settings& s) { s.reshard_after_forward = R, s.reshard_given = true; }
};
template <class P, class R>
struct fsdp_option<mixed_precision<P, R>> {
  static constexpr bool is_reshard = false, is_mp = true;
  static constexpr bool supported = (std::is_same_v<P, tessera::bf16> || std::is_same_v<P, float>)&&std::is_same_v<R, float>;
  static constexpr void apply(fsdp_settings& s) { s.bf16_params = std::is_same_v<P, tessera::bf16>; }
};

template <class... O>
constexpr fsdp_settings fsdp_options() {
  static_assert(((fsdp_option<O>::is_reshard || fsdp_option<O>::is_mp) && ...),
                "tessera::fsdp / hsdp: unknown option; the options are reshard_after_forward<reshard::...> and "
                "mixed_precision<Param, Reduce>");
  static_assert((int{fsdp_option<O>::is_reshard} + ... + 0) <= 1 && (int{fsdp_option<O>::is_mp} + ... + 0) <= 1,
                "tessera::fsdp / hsdp: an option is given twice; give each option at most once");
  static_assert((fsdp_option<O>::supported && ...),
                "tessera::fsdp / hsdp: mixed_precision supports <tessera::bf16, float> and <float, float> "
                "(parameters in bf16 or f32, gradients reduced in f32)");
  fsdp_settings s;
  if constexpr (((fsdp_option<O>::is_reshard || fsdp_option<O>::is_mp) && ...)) (fsdp_option<O>::apply(s), ...);
  return s;
}
}  // namespace detail

/// Fully sharded data parallel over `Axis` (FSDP2): every parameter sharded over the axis
/// (after TP: dp splits the TP-local shard), gathered per block before use with the next
/// block prefetched, gradients reduce-scattered.
template <fixed_string Axis, class... Options>
struct fsdp {
  static constexpr policy_desc desc{.kind = policy_kind::fsdp,
                                    .axis = Axis.view(),
                                    .replicate_axis = {},
                                    .fsdp = detail::fsdp_options<Options...>(),
                                    .tp = {}};
};

/// Hybrid sharded data parallel: parameters sharded over `Shard`, replicated over
/// `Replicate`; gradients reduce-scattered within a replica and all-reduced across.
template <fixed_string Replicate, fixed_string Shard, class... Options>
struct hsdp {
  static constexpr policy_desc desc{.kind = policy_kind::hsdp,
                                    .axis = Shard.view(),
                                    .replicate_axis = Replicate.view(),
                                    .fsdp = detail::fsdp_options<Options...>(),
                                    .tp = {}};
};

namespace detail {
template <class O>
inline constexpr bool is_tp_option =
    std::is_same_v<O, sequence_parallel> || std::is_same_v<O, loss_parallel> || std::is_same_v<O, async_tp>;
}

/// Tensor parallel over `Axis` with TorchTitan's Llama plan: wq/wk/wv and w1/w3
/// column-wise, wo and w2 row-wise, embedding sharded over the vocabulary, output
/// column-wise; options sequence_parallel, loss_parallel and async_tp.
template <fixed_string Axis, class... Options>
struct tensor_parallel {
  static_assert((detail::is_tp_option<Options> && ...),
                "tessera::tensor_parallel: unknown option; the options are sequence_parallel, loss_parallel and "
                "async_tp");
  static_assert(!(std::is_same_v<Options, async_tp> || ...) || (std::is_same_v<Options, sequence_parallel> || ...),
                "tessera::tensor_parallel: async_tp needs sequence_parallel (it overlaps the sequence's "
                "all-gathers and reduce-scatters with the GEMMs; without it TP all-reduces); add "
                "tessera::sequence_parallel to the policy");
  static constexpr policy_desc desc{.kind = policy_kind::tensor_parallel,
                                    .axis = Axis.view(),
                                    .replicate_axis = {},
                                    .fsdp = {},
                                    .tp = {.sequence_parallel = (std::is_same_v<Options, sequence_parallel> || ...),
                                           .loss_parallel = (std::is_same_v<Options, loss_parallel> || ...),
                                           .async = (std::is_same_v<Options, async_tp> || ...)}};
};

namespace detail {
template <class P>
concept policy = requires {
  { P::desc } -> std::convertible_to<policy_desc>;
};
}  // namespace detail

/// The list of policies of a recipe.
template <class... Policies>
struct parallelize {
  static_assert((detail::policy<Policies> && ...),
                "tessera::parallelize: every argument must be a policy (fsdp<...>, hsdp<...>, tensor_parallel<...>, "
                "pipeline_parallel<...>, context_parallel<...>, activation_checkpointing<...>, float8<...>)");
  static constexpr int size = static_cast<int>(sizeof...(Policies));
  static constexpr std::array<policy_desc, sizeof...(Policies)> policies{Policies::desc...};
};

template <class T>
inline constexpr bool is_parallelize_v = false;
template <class... P>
inline constexpr bool is_parallelize_v<parallelize<P...>> = true;

/// What went wrong when policies met a mesh.
enum class policy_error : std::uint8_t {
  none,
  unknown_axis,     ///< a policy names an axis the mesh lacks
  axis_twice,       ///< two policies (or hsdp's two axes) claim one axis
  unclaimed_axis,   ///< a mesh axis no policy uses
  two_data_parallel,///< more than one fsdp / hsdp
  two_tensor_parallel,
  two_pipeline_parallel,
  two_activation_checkpointing,
  two_float8,
  two_context_parallel,
};

/// The policies resolved against a mesh: axis indices (-1: none) and options.
struct parallel_spec {
  int dp_shard = -1;      ///< FSDP's axis, or HSDP's shard axis
  int dp_replicate = -1;  ///< HSDP's replicate axis
  int tp = -1;
  int pp = -1;            ///< pipeline_parallel's axis
  int cp = -1;            ///< context_parallel's axis
  int mesh_ndim = 0;
  reshard reshard_mode = reshard::always;
  bool bf16_params = false;
  bool sequence_parallel = false;
  bool loss_parallel = false;
  bool async_tp = false;       ///< tensor_parallel's async_tp (with sequence_parallel)
  bool reshard_given = false;  ///< the fsdp / hsdp policy named reshard_after_forward
  pp_settings pipeline{};      ///< pipeline_parallel's options (when pp >= 0)
  ac_settings ac{};            ///< activation_checkpointing's mode (none without the policy)
  f8_settings float8{};        ///< float8's recipe and options (off without the policy)
  cp_settings context{};       ///< context_parallel's options (when cp >= 0)
  policy_error error = policy_error::none;
  int error_policy = -1;  ///< index of the offending policy (or mesh axis for unclaimed_axis)
  bool error_on_replicate_axis = false;  ///< unknown_axis / axis_twice: hsdp's replicate axis (else its `axis`)

  constexpr bool fsdp() const { return dp_shard >= 0; }
  /// Axes the batch's rows are split over (replicate axis first), as a mask.
  constexpr unsigned batch_mask() const {
    return (dp_shard >= 0 ? 1u << dp_shard : 0u) | (dp_replicate >= 0 ? 1u << dp_replicate : 0u);
  }
  /// Axes a step's tokens are split over: the batch axes and context parallel's sequence
  /// axis (the loss is summed, and gradients reduced, over them).
  constexpr unsigned token_mask() const { return batch_mask() | (cp >= 0 ? 1u << cp : 0u); }
};

template <std::size_t N, std::size_t P>
constexpr parallel_spec resolve_policies(const std::array<std::string_view, N>& names,
                                         const std::array<policy_desc, P>& policies) {
  parallel_spec s;
  s.mesh_ndim = static_cast<int>(N);
  bool claimed[N > 0 ? N : 1] = {};
  auto fail = [&](policy_error e, int i, bool replicate = false) {
    if (s.error == policy_error::none) s.error = e, s.error_policy = i, s.error_on_replicate_axis = replicate;
  };
  auto claim = [&](std::string_view name, int i, bool replicate = false) {
    for (std::size_t a = 0; a < N; ++a)
      if (names[a] == name) {
        if (claimed[a]) fail(policy_error::axis_twice, i, replicate);
        claimed[a] = true;
        return static_cast<int>(a);
      }
    fail(policy_error::unknown_axis, i, replicate);
    return -1;
  };
  for (std::size_t i = 0; i < P; ++i) {
    const policy_desc& p = policies[i];
    const int pi = static_cast<int>(i);
    if (p.kind == policy_kind::context_parallel) {
      if (s.cp >= 0) fail(policy_error::two_context_parallel, pi);
      s.cp = claim(p.axis, pi);
      s.context = p.cp;
    } else if (p.kind == policy_kind::float8) {
      if (s.float8.on) fail(policy_error::two_float8, pi);
      s.float8 = p.f8;
    } else if (p.kind == policy_kind::activation_checkpointing) {
      if (s.ac.any()) fail(policy_error::two_activation_checkpointing, pi);
      s.ac = p.ac;
    } else if (p.kind == policy_kind::pipeline_parallel) {
      if (s.pp >= 0) fail(policy_error::two_pipeline_parallel, pi);
      s.pp = claim(p.axis, pi);
      s.pipeline = p.pp;
    } else if (p.kind == policy_kind::tensor_parallel) {
      if (s.tp >= 0) fail(policy_error::two_tensor_parallel, pi);
      s.tp = claim(p.axis, pi);
      s.sequence_parallel = p.tp.sequence_parallel;
      s.loss_parallel = p.tp.loss_parallel;
      s.async_tp = p.tp.async;
    } else {
      if (s.dp_shard >= 0) fail(policy_error::two_data_parallel, pi);
      if (p.kind == policy_kind::hsdp) s.dp_replicate = claim(p.replicate_axis, pi, true);
      s.dp_shard = claim(p.axis, pi);
      s.reshard_mode = p.fsdp.reshard_after_forward;
      s.bf16_params = p.fsdp.bf16_params;
      s.reshard_given = p.fsdp.reshard_given;
    }
  }
  for (std::size_t a = 0; a < N; ++a)
    if (!claimed[a]) fail(policy_error::unclaimed_axis, static_cast<int>(a));
  return s;
}

constexpr std::string_view describe(policy_error e) noexcept {
  switch (e) {
    case policy_error::none: return "no error";
    case policy_error::unknown_axis: return "a policy names an axis that is not in the mesh";
    case policy_error::axis_twice: return "two policies claim the same mesh axis";
    case policy_error::unclaimed_axis: return "a mesh axis is used by no policy";
    case policy_error::two_data_parallel: return "more than one fsdp / hsdp policy";
    case policy_error::two_tensor_parallel: return "more than one tensor_parallel policy";
    case policy_error::two_pipeline_parallel: return "more than one pipeline_parallel policy";
    case policy_error::two_activation_checkpointing: return "more than one activation_checkpointing policy";
    case policy_error::two_float8: return "more than one float8 policy";
    case policy_error::two_context_parallel: return "more than one context_parallel policy";
  }
  return "?";
}

}  // namespace tessera
