// expect: tessera recipe: float8's fp8::all_gather changes what FSDP gathers and needs an fsdp or hsdp policy
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp">, float8<fp8::tensorwise, fp8::all_gather>>;
};
constexpr bool ok = recipe_traits<r>::ok;
