// Start-up cost of a recipe: parallel_llama<R>::init_weights (TorchTitan's initialization of
// each rank's blocks) against what every rank did before 2026-12-07 -- each whole tensor drawn
// on one thread, then its block kept (init_param + set_full) -- on thread ranks of this process
// (docs/performance.md, "Start-up"). The model: two blocks of Llama 3 8B's shape with a
// 16,384-token vocabulary (570 M parameters), so that a row takes seconds, not minutes.
//   bench_init [--ranks=2] plus Google Benchmark flags (the pipeline's
// rows: 1 or 2 ranks)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>

namespace {
using namespace tessera;

struct two_8b_blocks {
  static constexpr llama_config config = [] {
    llama_config c = llama3_8b::config;
    c.name = "two_8b_blocks", c.n_layers = 2, c.vocab_size = 16384;
    return c;
  }();
};
struct fsdp_run {  // TorchTitan's 8B recipe: FSDP over every rank
  static constexpr std::string_view name = "fsdp_two_8b_blocks";
  using model = two_8b_blocks;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">>;
};
struct tp_run {  // tensor parallel: column blocks of wo and w2, row blocks of the rest
  static constexpr std::string_view name = "tp_two_8b_blocks";
  using model = two_8b_blocks;
  using mesh = tessera::mesh<axis<"tp">>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp">>;
};

struct pp_run {  // a pipeline of one block a rank: each rank holds one stage's tensors
  static constexpr std::string_view name = "pp_two_8b_blocks";
  using model = two_8b_blocks;
  using mesh = tessera::mesh<axis<"pp">>;
  using parallelize =
      tessera::parallelize<pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::one_f_one_b>, microbatches<2>>>;
};

int g_ranks = 2;

/// One row: every rank initializes its parameters, `blocks` (init_weights) or the whole
/// tensors one after another (before); the time is the slowest rank's, as a job waits for it.
template <class R>
void BM_init(benchmark::State& st, bool blocks) {
  for (auto _ : st) {
    comm::run_threads(g_ranks, [&](comm::threads_communicator& c) {
      device_mesh<typename R::mesh> dm(typename R::mesh(g_ranks), c);
      train::parallel_llama<R> pm(dm);
      c.barrier().wait();
      if (blocks) {
        pm.init_weights(0);
      } else {
        std::vector<float> full;
        for (std::int64_t i = 0; i < pm.model().n_tensors(); ++i) {
          full.resize(static_cast<std::size_t>(pm.model().entry(i).shape.numel()));
          init_param(pm.config(), i, 0, full.data());
          pm.set_full(i, full.data());
        }
      }
      c.barrier().wait();
    });
  }
  st.counters["ranks"] = g_ranks;
  st.counters["params"] = static_cast<double>(param_count(two_8b_blocks::config));
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--ranks=", 8) == 0) g_ranks = std::stoi(argv[i] + 8);
    else rest.push_back(argv[i]);
  }
  for (const bool blocks : {false, true}) {
    const char* how = blocks ? "blocks" : "whole_tensors_before";
    for (auto* b : {benchmark::RegisterBenchmark((std::string("init/fsdp/") + how).c_str(), BM_init<fsdp_run>, blocks),
                    benchmark::RegisterBenchmark((std::string("init/tp/") + how).c_str(), BM_init<tp_run>, blocks)})
      b->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
    if (g_ranks <= 2)  // a stage of one or two blocks a rank
      benchmark::RegisterBenchmark((std::string("init/pp/") + how).c_str(), BM_init<pp_run>, blocks)
          ->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
