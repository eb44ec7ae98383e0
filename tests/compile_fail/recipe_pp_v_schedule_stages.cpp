// expect: tessera recipe: pipeline_parallel: V-shaped schedules (ZBVZeroBubble, DualPipeV) hold exactly 2 stages per rank; use stages_per_rank<2>
// expect-also: pp_v_schedule_needs_2_stages_per_rank
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
// ZBVZeroBubble with 1 stage per rank.
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::zbv_zero_bubble>, stages_per_rank<1>>>;
};
constexpr bool ok = recipe_traits<r>::ok;
