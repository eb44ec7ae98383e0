// expect: tessera recipe: a recipe needs `using model = <config type>`, `using mesh = tessera::mesh<...>` and `using parallelize = tessera::parallelize<...>`
// max-errors: 1
#include <tessera/train/recipe.hpp>
// `policies` instead of `parallelize`
struct r {
  using model = tessera::debugmodel;
  using mesh = tessera::mesh<tessera::axis<"dp", 2>>;
  using policies = tessera::parallelize<tessera::fsdp<"dp">>;
};
constexpr bool ok = tessera::recipe_traits<r>::ok;
