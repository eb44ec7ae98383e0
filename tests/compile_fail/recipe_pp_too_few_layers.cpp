// expect: tessera recipe: pipeline_parallel: too few layers for the stages
// expect-gcc: [with int n_layers = 2; long int effective_layers = 4; int stages = 8]
// expect-clang: pp_too_few_layers_for_the_stages<2, 4L, 8>
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
// 2 layers + 1 + 1 = 4 effective layers over 4 ranks x 2 stages.
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"pp", 4>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::interleaved_1f1b>>>;
};
constexpr bool ok = recipe_traits<r>::ok;
