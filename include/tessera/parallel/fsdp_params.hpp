// tessera/parallel/fsdp_params.hpp: what the FSDP runtime (parallel/fsdp.hpp) knows of a
// parameter -- its description (param_info), the layouts and plans of its TP style under a
// parallel spec (param_layouts: which collectives can be issued and waited for later), and
// how a bf16 gather reaches a backend's GEMMs (gathered_operands) -- and the concepts of
// the models it binds.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>

#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/rounded_weights.hpp>
#include <tessera/parallel/layouts.hpp>
#include <tessera/plan/plan.hpp>
#include <tessera/tensor/dtype.hpp>

namespace tessera::parallel {

/// A parameter as the FSDP runtime sees it.
struct param_info {
  std::string name;
  tp_style style = tp_style::replicated;
  shape_t shape;           ///< global shape (rank 1 for replicated vectors, 2 otherwise)
  std::int64_t unit = 0;   ///< the FSDP unit it is gathered and reduced with
  bool local = true;       ///< held on this rank (false: another pipeline stage's; stored empty)
  /// FP8 all-gather (float8's fp8_all_gather): gathered as e4m3 codes under the scale of the
  /// whole weight (its amax all-reduced over the gather's group first), computed on their values.
  bool fp8_gather = false;
  /// Read by bf16 GEMMs only (a linear's weight): under mixed_precision<bf16, float> on a
  /// backend that rounds its GEMM operands, its bf16 gather is adopted as the operands
  /// (gathered_operands_of).
  bool gemm_operand = false;
};

/// What a gather in bf16 of a gemm_operand parameter is to a model on backend K (whose store
/// of rounded weights, kernels/rounded_weights.hpp, adopts it while the unit is gathered):
enum class gathered_operands {
  none,    ///< K multiplies f32 operands (or the gather is f32): the f32 copy, as any parameter
  values,  ///< K's operands are f32 holding bf16 values (cpu_bf16_kernels): the f32 copy is them
  codes,   ///< K's operands are bf16 codes (cuda_bf16_kernels): the unit holds the codes, no f32 copy
};
template <class K>
constexpr gathered_operands gathered_operands_of(bool bf16_gather) {
  if constexpr (rounds_operands<K>) {
    if (!bf16_gather) return gathered_operands::none;
    if constexpr (std::is_same_v<typename K::operand_type, bf16>) return gathered_operands::codes;
    if constexpr (std::is_same_v<typename K::operand_type, float>) return gathered_operands::values;
  }
  return gathered_operands::none;
}

/// Layout types and plans of a parameter of TP style S and rank R under spec P.
template <class Mesh, parallel_spec P, tp_style S, int R>
struct param_layouts {
  using types = layout_types<Mesh, P>;
  using compute = typename types::template param<S, R>::compute;
  using storage = typename types::template param<S, R>::storage;
  using grad = typename types::template param<S, R>::grad;
  static constexpr bool direct_param = computed_on_stored(P, S, R);
  static constexpr bool direct_grad = grad::spec == storage::spec;
  using param_t = std::conditional_t<P.bf16_params, bf16, float>;
  using unshard_plan = plan_t<storage, compute, param_t>;
  /// One all-gather along dim 0: with even blocks, rank k's block lands at k * block of
  /// the output, so the call can be issued on the buffers and waited for later.
  static constexpr bool async_gather = unshard_plan::size == 1 &&
                                       unshard_plan::value[0].kind == step_kind::all_gather &&
                                       unshard_plan::value[0].dim == 0;
  using reduce_plan = plan_t<grad, storage, float>;
  /// One reduce-scatter along dim 0: with even blocks, rank k's block is the k-th of the
  /// gradient buffer, so the call can be issued on it and waited for later (an overlapped
  /// reduction, sharded_params::reduce_grads).
  static constexpr bool async_reduce = reduce_plan::size == 1 &&
                                       reduce_plan::value[0].kind == step_kind::reduce_scatter &&
                                       reduce_plan::value[0].dim == 0;
};

template <class Model>
concept bindable_model = requires(Model& m, std::int64_t i, float* p) {
  m.bind(i, p, p);
  { m.param(i) } -> std::convertible_to<float*>;
  { m.grad(i) } -> std::convertible_to<float*>;
};
/// A model whose linears find their operands in a store of rounded weights on backend K.
template <class Model, class K>
concept adopting_model = rounds_operands<K> && requires(Model& m) {
  { m.kept_store() } -> std::same_as<rounded_weights<K>&>;
};

}  // namespace tessera::parallel
