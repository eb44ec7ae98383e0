// expect: tessera recipe: float8 with tensor_parallel is not supported yet
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp">, float8<fp8::rowwise>>;
};
constexpr bool ok = recipe_traits<r>::ok;
