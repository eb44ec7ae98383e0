// tessera/parallel/activation_checkpoint.hpp: activation checkpointing as a policy of
// parallelize<...> (TorchTitan's [activation_checkpoint] mode and selective_ac_option).
//
//   using P = tessera::parallelize<tessera::fsdp<"dp">,
//                                  tessera::activation_checkpointing<tessera::ac::selective_op<>>>;
//
// Modes (model/llama_ac.hpp says what each keeps):
//   ac::full                      every block recomputed in backward from its input;
//   ac::selective_layer<N>        every N-th block fully checkpointed (N >= 1);
//   ac::selective_op<>            TorchTitan's op policy (every other matmul, the attention,
//                                 the reduce-scatters of sequence parallel kept);
//   ac::selective_op<ac_op::...>  the groups to keep, named by the op that makes them.
// The policy names no mesh axis; it composes with fsdp / hsdp, tensor_parallel and
// pipeline_parallel (not with the split backward of zero-bubble schedules: recipe.hpp
// refuses that at compile time).
#pragma once

#include <cstdint>
#include <type_traits>

#include <tessera/model/llama_ac.hpp>
#include <tessera/parallel/policies.hpp>

namespace tessera {

namespace ac {
/// Every block keeps only its input; backward reruns its forward.
struct full {};
/// Every N-th block (blocks N-1, 2N-1, ...) fully checkpointed.
template <int N>
struct selective_layer {
  static_assert(N >= 1, "tessera::ac::selective_layer<N>: N must be at least 1 (every N-th block is checkpointed; "
                        "1 checkpoints every block, as ac::full)");
};
/// Every block keeps the groups of `Ops` (none given: TorchTitan's op policy).
template <ac_op... Ops>
struct selective_op {
  static constexpr bool unique = [] {
    const ac_op o[] = {Ops..., ac_op::count};  // ac_op::count ends the list (and an empty list)
    for (std::size_t i = 0; o[i] != ac_op::count; ++i)
      for (std::size_t j = i + 1; o[j] != ac_op::count; ++j)
        if (o[i] == o[j]) return false;
    return true;
  }();
  static_assert(unique, "tessera::ac::selective_op<...>: an op is listed twice; list each op to keep once");
  static_assert(((Ops != ac_op::count) && ...), "tessera::ac::selective_op<...>: ac_op::count is not an op");
};
}  // namespace ac

namespace detail {
template <class M>
struct ac_mode_of {
  static constexpr bool known = false;
  static constexpr ac_settings value{};
};
template <>
struct ac_mode_of<ac::full> {
  static constexpr bool known = true;
  static constexpr ac_settings value{.mode = ac_mode::full};
};
template <int N>
struct ac_mode_of<ac::selective_layer<N>> {
  static constexpr bool known = true;
  static constexpr ac_settings value{.mode = ac_mode::selective_layer, .every = N};
};
template <ac_op... Ops>
struct ac_mode_of<ac::selective_op<Ops...>> {
  static constexpr bool known = true;
  static constexpr ac_settings value{.mode = ac_mode::selective_op,
                                     .ops = static_cast<std::uint16_t>((0u | ... | ac_bit(Ops))),
                                     .default_ops = sizeof...(Ops) == 0};
};
}  // namespace detail

/// Activation checkpointing of the model's blocks in `Mode` (ac::full, ac::selective_layer<N>,
/// ac::selective_op<...>).
template <class Mode>
struct activation_checkpointing {
  static_assert(detail::ac_mode_of<Mode>::known,
                "tessera::activation_checkpointing<Mode>: unknown mode; the modes are ac::full, "
                "ac::selective_layer<N> and ac::selective_op<ac_op...>");
  static_assert(sizeof(Mode) > 0);  // instantiates the mode: its own checks fire
  static constexpr policy_desc desc{.kind = policy_kind::activation_checkpointing,
                                    .axis = {},
                                    .replicate_axis = {},
                                    .fsdp = {},
                                    .tp = {},
                                    .pp = {},
                                    .ac = detail::ac_mode_of<Mode>::value};
};

}  // namespace tessera
