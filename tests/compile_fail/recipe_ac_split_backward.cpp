// expect: tessera recipe: activation_checkpointing cannot serve a pipeline schedule that splits backward into I and W (zero-bubble schedules); choose GPipe, 1F1B, Interleaved1F1B or LoopedBFS, or drop activation_checkpointing
// max-errors: 1
#include <tessera/parallel/activation_checkpointing.hpp>
#include <tessera/parallel/pipeline_parallel.hpp>
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "tiny6", .dim = 32, .n_layers = 6, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::zbv_zero_bubble>, stages_per_rank<2>>,
      activation_checkpointing<ac::full>>;
};
constexpr bool ok = recipe_traits<r>::ok;
