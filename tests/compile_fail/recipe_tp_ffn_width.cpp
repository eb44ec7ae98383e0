// expect: tessera recipe: tensor_parallel's axis size does not divide the FFN width; choose a TP size that divides ffn_hidden_dim
// expect-gcc: ffn_width = 85; long int tp_size = 2
// expect-clang: '85L % 2L == 0'
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
// TP 2: n_heads 4 and n_kv_heads 2 divide, the FFN width 85 (multiple_of 1) does not.
struct cfg {
  static constexpr llama_config config{.name = "f85", .dim = 32, .n_layers = 1, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 1};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp">>;
};
constexpr bool ok = recipe_traits<r>::ok;
