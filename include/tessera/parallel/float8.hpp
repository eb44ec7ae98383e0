// tessera/parallel/float8.hpp: Float8 training of the block linears as a policy of
// parallelize<...> (torchao's Float8Linear, TorchTitan's [float8] / model converters).
//
//   using P = tessera::parallelize<tessera::fsdp<"dp", tessera::mixed_precision<tessera::bf16, float>>,
//                                  tessera::float8<tessera::fp8::tensorwise, tessera::fp8::all_gather>>;
//
// Scalings (torchao's recipes; kernels/cpu/float8.hpp has each GEMM operand's cast):
//   fp8::tensorwise          one scale per tensor; input and weight e4m3, grad_output e5m2
//   fp8::rowwise             per-row scales along each GEMM's reduction dim, all e4m3,
//                           scales rounded down to powers of two
//   fp8::rowwise_with_gw_hp  rowwise, with the weight gradient's GEMM in high precision
// Options:
//   fp8::all_gather        (tensorwise, under fsdp / hsdp) the weights are cast to e4m3
//                             with the scale of the whole weight before FSDP gathers them:
//                             gathers move one byte per element (torchao's
//                             enable_fsdp_float8_all_gather; the amaxes are all-reduced
//                             once per unshard, as precompute_float8_dynamic_scale_for_fsdp)
//   fp8::auto_filter_small_kn  leave linears below torchao's size thresholds in f32
//   fp8::linears<param_role...>  convert only these block linears (default: all seven)
// The output layer is never converted (TorchTitan's filter_fqns = ["output"]). A linear
// whose dims are not multiples of 16 stays f32; one named in fp8::linears<...> is a compile
// error (recipe.hpp). The policy names no mesh axis.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <type_traits>

#include <tessera/core/float8.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/parallel/policies.hpp>

namespace tessera {

namespace fp8 {
struct tensorwise {};
struct rowwise {};
struct rowwise_with_gw_hp {};
struct all_gather {};
struct auto_filter_small_kn {};
/// The block linears to convert, by role (attention_q, attention_k, attention_v,
/// attention_o, ffn_w1, ffn_w2, ffn_w3).
template <param_role... Roles>
struct linears {};
}  // namespace fp8

inline constexpr param_role block_linear_roles[] = {param_role::attention_q, param_role::attention_k,
                                                   param_role::attention_v, param_role::attention_o,
                                                   param_role::ffn_w1,      param_role::ffn_w2,
                                                   param_role::ffn_w3};

namespace detail {
template <class S>
struct f8_scaling {
  static constexpr bool known = false;
  static constexpr f8_recipe value = f8_recipe::tensorwise;
};
template <>
struct f8_scaling<fp8::tensorwise> {
  static constexpr bool known = true;
  static constexpr f8_recipe value = f8_recipe::tensorwise;
};
template <>
struct f8_scaling<fp8::rowwise> {
  static constexpr bool known = true;
  static constexpr f8_recipe value = f8_recipe::rowwise;
};
template <>
struct f8_scaling<fp8::rowwise_with_gw_hp> {
  static constexpr bool known = true;
  static constexpr f8_recipe value = f8_recipe::rowwise_with_gw_hp;
};

template <class O>
struct f8_option {
  static constexpr int kind = -1;  // unknown
  static constexpr std::uint16_t roles = 0;
  static constexpr bool roles_ok = true;
};
template <>
struct f8_option<fp8::all_gather> {
  static constexpr int kind = 0;
  static constexpr std::uint16_t roles = 0;
  static constexpr bool roles_ok = true;
};
template <>
struct f8_option<fp8::auto_filter_small_kn> {
  static constexpr int kind = 1;
  static constexpr std::uint16_t roles = 0;
  static constexpr bool roles_ok = true;
};
template <param_role... R>
struct f8_option<fp8::linears<R...>> {
  static constexpr int kind = 2;
  static constexpr std::uint16_t roles = static_cast<std::uint16_t>((0u | ... | (1u << static_cast<unsigned>(R))));
  static constexpr bool roles_ok = sizeof...(R) > 0 && (is_block_linear(R) && ...) &&
                                   std::popcount(roles) == static_cast<int>(sizeof...(R));
};
}  // namespace detail

/// Float8 training of the block linears with scaling `Scaling` (fp8::tensorwise, fp8::rowwise,
/// fp8::rowwise_with_gw_hp) and options fp8::all_gather, fp8::auto_filter_small_kn,
/// fp8::linears<...>.
template <class Scaling, class... Options>
struct float8 {
  static_assert(detail::f8_scaling<Scaling>::known,
                "tessera::float8<Scaling>: unknown scaling; the scalings are fp8::tensorwise, fp8::rowwise and "
                "fp8::rowwise_with_gw_hp");
  static_assert(((detail::f8_option<Options>::kind >= 0) && ...),
                "tessera::float8: unknown option; the options are fp8::all_gather, fp8::auto_filter_small_kn and "
                "fp8::linears<param_role...>");
  static_assert(((int{detail::f8_option<Options>::kind == 0} + ... + 0) <= 1) &&
                    ((int{detail::f8_option<Options>::kind == 1} + ... + 0) <= 1) &&
                    ((int{detail::f8_option<Options>::kind == 2} + ... + 0) <= 1),
                "tessera::float8: an option is given twice; give each option at most once");
  static_assert((detail::f8_option<Options>::roles_ok && ...),
                "tessera::float8: fp8::linears<...> names the block linears to convert, each once: "
                "param_role::attention_q, attention_k, attention_v, attention_o, ffn_w1, ffn_w2, ffn_w3 (the output "
                "layer stays f32)");
  static constexpr f8_recipe recipe = detail::f8_scaling<Scaling>::value;
  static constexpr bool all_gather = (std::is_same_v<Options, fp8::all_gather> || ...);
  static constexpr bool auto_filter = (std::is_same_v<Options, fp8::auto_filter_small_kn> || ...);
  static_assert(!all_gather || recipe == f8_recipe::tensorwise,
                "tessera::float8: fp8::all_gather needs fp8::tensorwise scaling (the weight is cast with one scale "
                "before FSDP gathers it; rowwise scales are per row of the gathered weight); use fp8::tensorwise or "
                "drop the option");
  static_assert(!auto_filter || recipe != f8_recipe::rowwise_with_gw_hp,
                "tessera::float8: fp8::auto_filter_small_kn has no thresholds for fp8::rowwise_with_gw_hp (torchao "
                "defines them for tensorwise and rowwise only); name the linears with fp8::linears<...> instead");
  static constexpr policy_desc desc{.kind = policy_kind::float8,
                                    .axis = {},
                                    .replicate_axis = {},
                                    .fsdp = {},
                                    .tp = {},
                                    .pp = {},
                                    .ac = {},
                                    .f8 = {.on = true,
                                           .recipe = recipe,
                                           .all_gather = all_gather,
                                           .auto_filter = auto_filter,
                                           .named = (std::uint16_t{0} | ... | detail::f8_option<Options>::roles)}};
};

/// A block linear's global shape {out, in} (its weight's [rows, cols]).
constexpr std::array<std::int64_t, 2> block_linear_shape(const llama_config& c, param_role r) {
  const std::int64_t D = c.dim, hd = head_dim(c), Hq = c.n_heads * hd, Hk = c.n_kv_heads * hd, F = ffn_hidden_dim(c);
  switch (r) {
    case param_role::attention_q: return {Hq, D};
    case param_role::attention_k:
    case param_role::attention_v: return {Hk, D};
    case param_role::attention_o: return {D, Hq};
    case param_role::ffn_w1:
    case param_role::ffn_w3: return {F, D};
    case param_role::ffn_w2: return {D, F};
    default: return {0, 0};
  }
}

/// torchao's auto_filter_small_kn for a weight [out, in] (K = out, N = in in its words):
/// true when the linear is large enough to convert. Tensorwise skips out <= 4096 with
/// in <= 1024; rowwise skips in <= 2048, out <= 1024, and in <= 4096 with out <= 2048.
constexpr bool f8_large_enough(f8_recipe r, std::int64_t out, std::int64_t in) {
  if (r == f8_recipe::tensorwise) return !(out <= 4096 && in <= 1024);
  return !(in <= 2048 || out <= 1024 || (in <= 4096 && out <= 2048));
}

/// The block linears a float8 policy converts in a model: those named (all by default)
/// whose dims are multiples of 16 and, with auto_filter_small_kn, large enough.
constexpr f8_linears f8_linears_of(const llama_config& c, const f8_settings& s) {
  f8_linears f;
  if (!s.on) return f;
  f.recipe = s.recipe;
  f.weights_cast = s.all_gather;
  for (param_role r : block_linear_roles) {
    const auto bit = static_cast<std::uint16_t>(1u << static_cast<unsigned>(r));
    const auto [out, in] = block_linear_shape(c, r);
    if (s.named && !(s.named & bit)) continue;
    if (out % 16 != 0 || in % 16 != 0) continue;
    if (s.auto_filter && !f8_large_enough(s.recipe, out, in)) continue;
    f.roles = static_cast<std::uint16_t>(f.roles | bit);
  }
  return f;
}

/// The first linear named in fp8::linears<...> whose dims are not multiples of 16 (out = 0:
/// none).
struct f8_dim_problem {
  param_role role = param_role::embedding;
  std::int64_t out = 0, in = 0;
};
constexpr f8_dim_problem f8_named_dims_problem(const llama_config& c, const f8_settings& s) {
  for (param_role r : block_linear_roles) {
    if (!(s.named & (1u << static_cast<unsigned>(r)))) continue;
    const auto [out, in] = block_linear_shape(c, r);
    if (out % 16 != 0 || in % 16 != 0) return {r, out, in};
  }
  return {};
}

}  // namespace tessera
