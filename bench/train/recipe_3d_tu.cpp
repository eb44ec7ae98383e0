// A translation unit that compiles one 3-D recipe (debug_3d: pp x FSDP x TP) as a user's
// trainer would: the recipe's checks, the lowered schedule, parallel_llama and the trainer.
// Its compile time is measured by bench/train/compile_time.sh --tu bench/train/recipe_3d_tu.cpp.
#include <cstdio>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/trainer.hpp>

int main() {
  using R = tessera::recipes::debug_3d;
  std::vector<std::int32_t> toks(4096);
  for (std::size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<std::int32_t>(i % 2048);
  tessera::comm::run_threads(8, [&](tessera::comm::threads_communicator& c) {
    tessera::device_mesh<R::mesh> dm({}, c);
    tessera::train::parallel_llama<R> pm(dm);
    pm.init_weights(1);
    tessera::train::batch_loader loader(toks, 4, 32, 1);
    tessera::train::basic_trainer<tessera::train::parallel_llama<R>> tr(pm, loader, 1, 1, {}, 0);
    const auto m = tr.train_step();
    if (c.rank() == 0) std::printf("debug_3d: one step, loss %.4f\n", m.loss);
  });
}
