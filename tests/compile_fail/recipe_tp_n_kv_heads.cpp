// expect: tessera recipe: tensor_parallel's axis size does not divide n_kv_heads; each rank needs whole KV heads
// expect-gcc: n_kv_heads = 2; long int tp_size = 4
// expect-clang: '2L % 4L == 0'
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
// TP 4: n_heads 4 and the FFN width 96 divide, n_kv_heads 2 does not.
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"tp", 4>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel>>;
};
constexpr bool ok = recipe_traits<r>::ok;
