// expect: tessera recipe: a policy names an axis that is not in the mesh; use the mesh's axis names
// expect-also: text<'d', 'a', 't', 'a'>
// expect-also: text<'d', 'p'>
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
// fsdp names "data", the mesh calls the axis "dp".
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"dp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"data">>;
};
constexpr bool ok = recipe_traits<r>::ok;
