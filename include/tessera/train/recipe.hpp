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
// tensor-parallel policy; a static TP size divides n_heads, n_kv_heads and the FFN width
// (the vocabulary may split unevenly). Dynamic sizes are checked by check_mesh() at start-up
// with the same words and the numbers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <tessera/core/error.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/parallel/layouts.hpp>
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
  using mesh_type = mesh<axis<"?", 1>>;
  static constexpr parallel_spec spec{.mesh_ndim = 1};
};
template <class R>
struct recipe_parts<R, true> {
  static constexpr llama_config config = R::model::config;
  using mesh_type = typename R::mesh;
  static constexpr parallel_spec spec = resolve_policies(mesh_type::names, R::parallelize::policies);
};
constexpr bool tp_divides(const llama_config& c, std::int64_t tp) {
  return tp <= 0 || (c.n_heads % tp == 0 && c.n_kv_heads % tp == 0 && ffn_hidden_dim(c) % tp == 0);
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

  static_assert(spec.error != policy_error::unknown_axis,
                "tessera recipe: a policy names an axis that is not in the mesh; use the mesh's axis names");
  static_assert(spec.error != policy_error::axis_twice,
                "tessera recipe: two policies claim the same mesh axis; give each policy its own axis");
  static_assert(spec.error != policy_error::unclaimed_axis,
                "tessera recipe: a mesh axis is used by no policy; add a policy for it or remove it from the mesh");
  static_assert(spec.error != policy_error::two_data_parallel,
                "tessera recipe: more than one fsdp / hsdp policy; use one (hsdp for sharding within and "
                "replicating across)");
  static_assert(spec.error != policy_error::two_tensor_parallel,
                "tessera recipe: more than one tensor_parallel policy; use one");

  /// The static size of the TP axis (0: no TP or a dynamic size).
  static constexpr std::int64_t static_tp = spec.tp >= 0 && mesh_type::static_shape[spec.tp] != dyn
                                                ? mesh_type::static_shape[spec.tp]
                                                : 0;
  static_assert(static_tp == 0 || config.n_heads % static_tp == 0,
                "tessera recipe: tensor_parallel's axis size does not divide n_heads; each rank needs whole "
                "attention heads, so choose a TP size that divides n_heads");
  static_assert(static_tp == 0 || config.n_kv_heads % static_tp == 0,
                "tessera recipe: tensor_parallel's axis size does not divide n_kv_heads; each rank needs whole "
                "KV heads, so choose a TP size that divides n_kv_heads");
  static_assert(static_tp == 0 || ffn_hidden_dim(config) % static_tp == 0,
                "tessera recipe: tensor_parallel's axis size does not divide the FFN width; choose a TP size "
                "that divides ffn_hidden_dim");
  static constexpr bool ok = spec.error == policy_error::none && detail::tp_divides(config, static_tp);

  static std::string name() {
    if constexpr (requires { Recipe::name; })
      return std::string(Recipe::name);
    else
      return "recipe";
  }

  /// Start-up check of what only the run fixes (dynamic axis sizes), in the words of the
  /// static checks, with the numbers.
  static void check_mesh(const mesh_shape& m) {
    if (spec.tp < 0) return;
    const std::int64_t tp = m[spec.tp];
    const std::string axis(mesh_type::names[static_cast<std::size_t>(spec.tp)]);
    auto fail = [&](std::string_view what, std::int64_t n) {
      throw error("recipe " + name() + ": tensor_parallel<\"" + axis + "\">: " + std::string(what) + " (" +
                  std::to_string(n) + ") is not divisible by the size of axis \"" + axis + "\" (" +
                  std::to_string(tp) + "); choose a TP size that divides it");
    };
    if (config.n_heads % tp) fail("n_heads", config.n_heads);
    if (config.n_kv_heads % tp) fail("n_kv_heads", config.n_kv_heads);
    if (ffn_hidden_dim(config) % tp) fail("the FFN width", ffn_hidden_dim(config));
  }
};

}  // namespace tessera
