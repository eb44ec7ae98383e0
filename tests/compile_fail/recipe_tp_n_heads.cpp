// expect: tessera recipe: tensor_parallel's axis size does not divide n_heads; each rank needs whole attention heads
// expect-gcc: n_heads = 6; long int tp_size = 4
// expect-clang: '6L % 4L == 0'
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
// TP 4: n_heads 6 fails (n_kv_heads 2 would too; n_heads is checked first, one error).
struct cfg {
  static constexpr llama_config config{.name = "h6", .dim = 96, .n_layers = 1, .n_heads = 6, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"tp", 4>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp">>;
};
constexpr bool ok = recipe_traits<r>::ok;
