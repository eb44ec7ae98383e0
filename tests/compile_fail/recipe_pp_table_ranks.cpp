// expect: tessera recipe: pipeline_parallel: the schedule table has another number of ranks than the pp axis
// expect-gcc: [with int pp_size = 2; int table_ranks = 4]
// expect-clang: pp_schedule_table_for_another_pipeline<2, 4>
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
constexpr pipeline::schedule table() { return pipeline::gpipe(4, 1, 4); }
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp", schedule_table<&table>>>;
};
constexpr bool ok = recipe_traits<r>::ok;
