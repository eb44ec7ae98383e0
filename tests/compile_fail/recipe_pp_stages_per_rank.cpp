// expect: tessera recipe: pipeline_parallel: stages_per_rank must be between 1 and 16
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::interleaved_1f1b>, stages_per_rank<17>>>;
};
constexpr bool ok = recipe_traits<r>::ok;
