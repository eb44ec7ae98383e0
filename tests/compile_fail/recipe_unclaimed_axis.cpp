// expect: tessera recipe: a mesh axis is used by no policy; add a policy for it or remove it from the mesh
// expect-also: text<'t', 'p'>
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
// the mesh has a "tp" axis but no tensor_parallel policy.
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">>;
};
constexpr bool ok = recipe_traits<r>::ok;
