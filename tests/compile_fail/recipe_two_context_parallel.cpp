// expect: tessera recipe: more than one context_parallel policy; use one
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"cp", 2>, axis<"sp", 2>>;
  using parallelize = tessera::parallelize<context_parallel<"cp">, context_parallel<"sp">>;
};
constexpr bool ok = recipe_traits<r>::ok;
