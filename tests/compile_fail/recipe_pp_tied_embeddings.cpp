// expect: tessera recipe: pipeline_parallel: the model ties its output to the embedding
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct tied {
  static constexpr llama_config config{.name = "tied", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32, .tied_embeddings = true};
};
struct r {
  using model = tied;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp">>;
};
constexpr bool ok = recipe_traits<r>::ok;
