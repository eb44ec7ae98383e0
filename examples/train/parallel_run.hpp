// train_llama's recipe mode: one rank's training loop for a shipped recipe, on the threads
// backend (ranks are threads of this process) or under mpirun (ranks are processes).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/train/hf_checkpoint.hpp>
#include <tessera/train/memory_estimator.hpp>
#include <tessera/train/metrics.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/traffic_estimator.hpp>
#include <tessera/train/trainer.hpp>

namespace train_llama_cli {
using namespace tessera;

/// What every rank needs to run (the same on all ranks).
struct run_inputs {
  std::int64_t steps = 0, batch = 0, seq_len = 0, accum = 1;
  std::uint64_t seed = 0;
  bool shuffle = true;
  train::optimizer_options opt;
  std::string init_from, save_weights, metrics, save_dtype;
  const std::vector<std::int32_t>* tokens = nullptr;
  double peak_flops = 0;
};

/// Checks that `ranks` fits recipe R's mesh, in the words a user needs.
template <class R>
typename R::mesh bind_mesh(std::int64_t ranks) {
  using M = typename R::mesh;
  try {
    return M(ranks);
  } catch (const error& e) {
    throw error("recipe " + std::string(R::name) + " cannot run on " + std::to_string(ranks) + " ranks: " + e.what() +
                "; change --ranks");
  }
}

/// The global batch: `global` when set (> 0), else `local` per data-parallel rank.
template <class R>
std::int64_t global_batch(const typename R::mesh& m, std::int64_t local, std::int64_t global) {
  std::int64_t dp = 1;
  for (int a = 0; a < R::mesh::ndim; ++a)
    if ((recipe_traits<R>::spec.batch_mask() >> a) & 1u) dp *= m.size(a);
  return global > 0 ? global : local * dp;
}

/// One rank's run of recipe R on communicator `c`; rank 0 prints and writes files.
template <class R, class C>
void run_rank(C& c, typename R::mesh mesh, const run_inputs& in) {
  device_mesh<typename R::mesh> dm(mesh, c);
  train::parallel_llama<R> pm(dm);
  const llama_config& cfg = pm.config();
  if (in.init_from.empty()) {
    pm.init_weights(in.seed);
  } else {
    std::vector<std::vector<float>> full(static_cast<std::size_t>(pm.model().n_tensors()));
    train::load_hf_checkpoint(cfg, [&](std::int64_t i) {
      auto& v = full[static_cast<std::size_t>(i)];
      v.resize(static_cast<std::size_t>(pm.model().entry(i).shape.numel()));
      return v.data();
    }, in.init_from);
    for (std::int64_t i = 0; i < pm.model().n_tensors(); ++i) pm.set_full(i, full[static_cast<std::size_t>(i)].data());
  }
  const bool lead = dm.rank() == 0;
  if (lead)
    std::printf("recipe %s: mesh %s, %s; rank 0 stores %.2f MiB of parameters and gradients\n",
                std::string(R::name).c_str(), dm.mesh().str().c_str(), c.size() == 1 ? "1 rank" : "ranks in step",
                static_cast<double>(pm.stored_bytes()) / (1 << 20));
  if (lead)
    std::printf("memory estimate for rank 0 (batch %lld x seq %lld):\n%s", static_cast<long long>(in.batch),
                static_cast<long long>(in.seq_len),
                estimate_memory<R>(dm.shape(), in.batch, in.seq_len, dm.coords()).to_string().c_str());
  if (lead)
    std::printf("%s", estimate_traffic<R>(dm.shape(), in.batch, in.seq_len, in.accum, dm.coords())
                          .to_string(R::mesh::names)
                          .c_str());
  train::batch_loader loader(*in.tokens, in.batch, in.seq_len, in.seed, in.shuffle);
  train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, in.steps, in.accum, in.opt, in.peak_flops);
  train::jsonl_writer jsonl;
  if (lead && !in.metrics.empty()) jsonl = train::jsonl_writer(in.metrics);
  for (std::int64_t s = 0; s < in.steps; ++s) {
    const auto m = tr.train_step();
    if (!lead) continue;
    std::printf("%s\n", train::progress_line(m).c_str());
    std::fflush(stdout);
    jsonl.write(m);
  }
  if (!in.save_weights.empty()) {
    std::vector<std::vector<float>> full;
    for (std::int64_t i = 0; i < pm.model().n_tensors(); ++i) full.push_back(pm.full_param(i));  // collective
    if (lead) {
      train::save_hf_checkpoint(cfg, [&](std::int64_t i) { return full[static_cast<std::size_t>(i)].data(); },
                                in.save_weights,
                                in.save_dtype == "bf16" ? train::safetensors::dtype::bf16 : train::safetensors::dtype::f32);
      std::printf("saved weights to %s\n", in.save_weights.c_str());
    }
  }
}

/// Runs recipe R on `ranks` threads.
template <class R>
void run_threads(std::int64_t ranks, const run_inputs& in) {
  const auto mesh = bind_mesh<R>(ranks);
  comm::run_threads(static_cast<int>(ranks), [&](comm::threads_communicator& c) { run_rank<R>(c, mesh, in); });
}

}  // namespace train_llama_cli
