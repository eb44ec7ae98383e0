// my_recipe: how a user writes a recipe. A recipe is a struct naming a model config, a
// mesh and the policies; everything else -- every parameter's and activation's layout and
// every collective -- follows from it at compile time. This one is 3-D parallel on 8
// in-process ranks: HSDP (2 replicas x 2 shards) x tensor parallel over 2 with sequence and
// loss parallel, on a small Llama of our own. See docs/recipes.md.
//
//   my_recipe        prints the recipe's summary and trains 10 steps on 8 thread ranks
//
// It takes no arguments: --help prints the usage (exit 0), anything else is refused (exit 2).
#include <cstdio>
#include <string>
#include <random>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/trainer.hpp>

namespace {
using namespace tessera;

struct small_llama {  // any type with a constexpr llama_config
  static constexpr llama_config config{.name = "small", .dim = 128, .n_layers = 4, .n_heads = 8, .n_kv_heads = 4,
                                       .vocab_size = 1000, .multiple_of = 64};
};

struct my_recipe {
  static constexpr std::string_view name = "my_recipe";
  using model = small_llama;
  using mesh = tessera::mesh<axis<"replica", 2>, axis<"shard", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<hsdp<"replica", "shard", reshard_after_forward<reshard::all_but_last>>,
                                           tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    const std::string a = argv[1];
    if (a == "--help" || a == "-h") {
      std::printf("usage: my_recipe (no arguments): prints the recipe's summary and trains 10 steps on 8 thread "
                  "ranks; edit examples/recipe/my_recipe.cpp to change the run (docs/recipes.md)\n");
      return 0;
    }
    std::fprintf(stderr, "my_recipe: error: unexpected argument '%s'; my_recipe takes none (--help says what it "
                 "does; edit examples/recipe/my_recipe.cpp to change the run)\n", a.c_str());
    return 2;
  }
  using model_t = train::parallel_llama<my_recipe>;
  std::printf("%s", model_t::summary().c_str());
  std::vector<std::int32_t> tokens;
  std::mt19937 g(1);
  for (int i = 0; i < 20000; ++i) tokens.push_back(static_cast<std::int32_t>((i * 13 + g() % 4) % 1000));
  comm::run_threads(8, [&](comm::threads_communicator& c) {
    device_mesh<my_recipe::mesh> dm({}, c);
    model_t model(dm);
    model.init_weights(0);
    train::batch_loader loader(tokens, /*global batch*/ 8, /*seq_len*/ 64, /*seed*/ 0);
    train::basic_trainer<model_t> trainer(model, loader, /*steps*/ 10, /*accum*/ 1, train::optimizer_options{});
    for (int s = 0; s < 10; ++s) {
      const auto m = trainer.train_step();
      if (dm.rank() == 0) std::printf("step %2lld  loss %.4f  grad_norm %.4f\n", static_cast<long long>(m.step), m.loss, m.grad_norm);
    }
  });
}
