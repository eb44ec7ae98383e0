// expect: tessera recipe: pipeline_parallel: layers_per_stage x stages is not the number of effective layers
// expect-gcc: [with int layers_per_stage = 3; int stages = 2; long int effective_layers = 4]
// expect-clang: pp_layers_per_stage_does_not_fit<3, 2, 4L>
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp", layers_per_stage<3>>>;
};
constexpr bool ok = recipe_traits<r>::ok;
