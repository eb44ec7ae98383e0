// expect: tessera recipe: pipeline_parallel: the schedule table is invalid
// expect-also: problem::deadlock
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
// A user's table for 2 ranks and 2 microbatches that deadlocks: rank 0 waits for the
// gradient of microbatch 0 before it sends microbatch 1, rank 1 waits for microbatch 1
// before it sends that gradient.
constexpr pipeline::schedule table() {
  using pipeline::action, pipeline::op;
  pipeline::schedule s = pipeline::make_empty(2, 2, 2, pipeline::placement::loop);
  s.stage_rank = {0, 1};
  s.actions[0] = {action{op::F, 0, 0}, action{op::B, 0, 0}, action{op::F, 0, 1}, action{op::B, 0, 1}};
  s.actions[1] = {action{op::F, 1, 0}, action{op::F, 1, 1}, action{op::B, 1, 0}, action{op::B, 1, 1}};
  return s;
}
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp", schedule_table<&table>>>;
};
constexpr bool ok = recipe_traits<r>::ok;
