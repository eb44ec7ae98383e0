// expect: tessera recipe: more than one tensor_parallel policy; use one
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
// two TP policies on two axes.
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"a", 2>, axis<"b", 2>>;
  using parallelize = tessera::parallelize<tensor_parallel<"a">, tensor_parallel<"b">>;
};
constexpr bool ok = recipe_traits<r>::ok;
