// expect: tessera recipe: more than one fsdp / hsdp policy; use one (hsdp for sharding within and replicating across)
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
// two FSDP policies on two axes (hsdp<"a", "b"> is what this means).
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"a", 2>, axis<"b", 2>>;
  using parallelize = tessera::parallelize<fsdp<"a">, fsdp<"b">>;
};
constexpr bool ok = recipe_traits<r>::ok;
