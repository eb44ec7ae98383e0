// recipe_traits: the resolved spec of valid recipes, and check_mesh's start-up check of a
// dynamic TP axis (the static ones are tests/compile_fail/recipe_*.cpp).
#include <doctest/doctest.h>

#include <string>

#include <failure.hpp>
#include <tessera/train/recipe.hpp>

#include "recipes_tiny.hpp"

using namespace tessera;
using testing_support::failure_of;
using testing_support::has;

namespace {
struct heads6 {  // n_heads 6, n_kv_heads 2, FFN width 96 (dim 48, multiple_of 32)
  static constexpr llama_config config{.name = "heads6", .dim = 48, .n_layers = 1, .n_heads = 6, .n_kv_heads = 2,
                                       .vocab_size = 50, .multiple_of = 32};
};
struct ffn85 {  // FFN width 85: only TP 1 or 5, 17, 85 divide it; heads 4 / 4
  static constexpr llama_config config{.name = "ffn85", .dim = 32, .n_layers = 1, .n_heads = 4, .n_kv_heads = 4,
                                       .vocab_size = 50, .multiple_of = 1};
};
template <class Model>
struct dyn_tp {
  static constexpr std::string_view name = "dyn_tp";
  using model = Model;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel>>;
};
mesh_shape shape_of(std::int64_t dp, std::int64_t tp) {
  mesh_shape m;
  m.ndim = 2;
  m.size[0] = dp, m.size[1] = tp;
  return m;
}
}  // namespace

TEST_CASE("recipe_traits: a valid recipe resolves to its axes and options") {
  using R = recipe_traits<tiny_recipes::fsdp_tp_2d>;
  static_assert(R::ok);
  static_assert(R::spec.dp_shard == 0 && R::spec.tp == 1 && R::spec.dp_replicate == -1);
  static_assert(R::spec.reshard_mode == reshard::all_but_last && R::spec.sequence_parallel && R::spec.loss_parallel);
  static_assert(R::static_tp == 2);
  using H = recipe_traits<tiny_recipes::hsdp_2x2>;
  static_assert(H::spec.dp_replicate == 0 && H::spec.dp_shard == 1 && H::spec.tp == -1 && H::static_tp == 0);
  CHECK(R::name() == "recipe");
  CHECK(recipe_traits<tiny_recipes::fsdp_dyn>::name() == "tiny_fsdp");
}

TEST_CASE("recipe_traits::check_mesh: a dynamic TP size that divides passes") {
  using R = recipe_traits<dyn_tp<heads6>>;
  static_assert(R::ok && R::static_tp == 0);  // dynamic: nothing to check at compile time
  CHECK_NOTHROW(R::check_mesh(shape_of(2, 1)));
  CHECK_NOTHROW(R::check_mesh(shape_of(2, 2)));
  CHECK_NOTHROW(recipe_traits<dyn_tp<ffn85>>::check_mesh(shape_of(2, 1)));
  CHECK_NOTHROW(recipe_traits<tiny_recipes::fsdp_dyn>::check_mesh(mesh_shape{1, {5}}));  // no TP: any size
}

TEST_CASE("recipe_traits::check_mesh: a dynamic TP size that does not divide names the numbers") {
  using R = recipe_traits<dyn_tp<heads6>>;
  // TP 4: n_heads 6 fails first
  const std::string heads = failure_of<error>([] { R::check_mesh(shape_of(2, 4)); });
  CHECK(has(heads, "recipe dyn_tp: tensor_parallel<\"tp\">: n_heads (6) is not divisible by the size of axis \"tp\" (4)"));
  CHECK(has(heads, "choose a TP size that divides it"));
  // TP 3: n_heads 6 divides, n_kv_heads 2 does not
  const std::string kv = failure_of<error>([] { R::check_mesh(shape_of(2, 3)); });
  CHECK(has(kv, "n_kv_heads (2) is not divisible by the size of axis \"tp\" (3)"));
  // TP 2 on ffn85: heads divide, the FFN width 85 does not
  const std::string ffn = failure_of<error>([] { recipe_traits<dyn_tp<ffn85>>::check_mesh(shape_of(2, 2)); });
  CHECK(has(ffn, "the FFN width (85) is not divisible by the size of axis \"tp\" (2)"));
}
