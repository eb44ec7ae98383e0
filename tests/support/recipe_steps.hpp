// tests/support/recipe_steps.hpp: the same trainer steps of a recipe on any kernel backend and
// communicator -- parallel_llama<R, K> on a device mesh of `world` ranks, 3 steps with
// accumulation 2 and clipping, then an evaluation forward -- recording each step's loss and gradient
// norm, the evaluation's loss and, gathered
// whole, every parameter after the last: tests/parallel/test_device_runtime.cpp compares the
// host runtime with the staged backend bit for bit, tests/gpu/test_cuda_recipes.cu with
// cuda_kernels over NCCL within tolerances.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <device_llama_steps.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/train/memory_estimator.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/trainer.hpp>

namespace tessera::testing {

/// Tokens over a vocabulary of `vocab`, with structure (so the loss falls).
inline std::vector<std::int32_t> recipe_tokens(std::int32_t vocab) {
  std::vector<std::int32_t> toks(6000);
  for (std::size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<std::int32_t>((i * 131 + 7 + i / 11) % vocab);
  return toks;
}

/// After recipe_steps (as its `after`): "" when this rank keeps the rounded weights that
/// memory_estimate::kept_weights counts -- its bytes, each element rounded once by the steps'
/// forwards (AdamW writes the copies after); none on a backend that does not round its
/// operands -- and its linears multiplied their FSDP units' bf16 gathers as they are (adopted,
/// parallel/fsdp.hpp): they rounded a weight for a single GEMM exactly where a weight they
/// multiply is neither kept nor gathered in bf16 (an f32 gather), else what it did instead.
template <class R, class K>
std::string kept_weights_problem(train::parallel_llama<R, K>& pm, std::int64_t seq_len = 16) {
  constexpr parallel_spec ps = recipe_traits<R>::spec;
  std::int64_t e = 0, bytes = 0;
  bool per_gemm = false, adopts = false;  // expected: weights rounded for single GEMMs; bf16 gathers adopted
  if constexpr (rounds_operands<K>) {
    e = estimate_memory<R>(pm.mesh().shape(), 4, seq_len, pm.mesh().coords()).kept_weights;
    bytes = static_cast<std::int64_t>(sizeof(typename K::operand_type)) * e;
    for (std::int64_t i = 0; i < pm.model().n_tensors(); ++i) {
      const param_entry en = pm.model().entry(i);
      const f8_linears& f8 = pm.model().shard().float8;
      if (pm.storage_box(i).numel() == 0 || !bf16_multiplied(pm.config(), f8, en) ||
          parallel::computed_on_stored(ps, param_style(en), en.shape.is_vector() ? 1 : 2))
        continue;
      (ps.bf16_params && gemm_operand_only(pm.config(), f8, en) ? adopts : per_gemm) = true;
    }
  }
  auto& store = pm.model().kept_store();
  const std::string rank = "rank " + std::to_string(pm.mesh().rank());
  if ((store.unkept() > 0) != per_gemm)
    return rank + "'s linears rounded " + std::to_string(store.unkept()) + " weight elements for single GEMMs; " +
           (per_gemm ? "expected some (f32 gathers)" : "expected none (every weight kept or gathered in bf16)");
  if ((store.adopted_uses() > 0) != adopts)
    return rank + "'s linears multiplied bf16 gathers as they are " + std::to_string(store.adopted_uses()) +
           " times; expected " + (adopts ? "some" : "none");
  if (pm.model().kept_weight_bytes() == bytes && pm.model().kept_weight_rounds() == e) return {};
  return rank + " keeps " + std::to_string(pm.model().kept_weight_bytes()) + " bytes of rounded weights and rounded " +
         std::to_string(pm.model().kept_weight_rounds()) + " elements; the estimate: " + std::to_string(bytes) +
         " bytes, each of its " + std::to_string(e) + " elements once";
}

/// recipe_steps' default `before` and `after`: nothing.
struct no_model_hook {
  template <class M>
  void operator()(M&) const noexcept {}
};

/// This rank's record of 3 trainer steps of recipe R on backend K over communicator `c`
/// (every rank calls it; the records are the same on all ranks). `before(pm)` runs on the
/// rank's parallel_llama once it is made, `after(pm)` once everything has run.
template <class R, class K, class C, class Before = no_model_hook, class After = no_model_hook>
step_record recipe_steps(C& c, int world, std::int64_t seq_len = 16, Before&& before = {}, After&& after = {}) {
  const auto toks = recipe_tokens(static_cast<std::int32_t>(R::model::config.vocab_size));
  device_mesh<typename R::mesh> dm(typename R::mesh(world), c);
  train::parallel_llama<R, K> pm(dm);
  before(pm);
  pm.init_weights(3);
  train::batch_loader loader(toks, 4, seq_len, 1);
  train::optimizer_options opt;
  opt.lr = 3e-3, opt.max_norm = 0.5, opt.warmup = 1;
  train::basic_trainer<train::parallel_llama<R, K>> tr(pm, loader, 3, 2, opt, 0);
  step_record r;
  for (int s = 0; s < 3; ++s) {
    const auto m = tr.train_step();
    r.losses.push_back(static_cast<float>(m.loss));
    r.norms.push_back(static_cast<float>(m.grad_norm));
  }
  // An evaluation forward (no backward; under a pipeline: microbatch by microbatch, stage by
  // stage) on a batch of every data-parallel rank's rows, its loss recorded after the steps'.
  const step_batch eval(7, 4, seq_len, R::model::config.vocab_size);
  r.losses.push_back(pm.forward(eval.inputs, eval.targets, 4, seq_len, false));
  for (std::int64_t i = 0; i < pm.model().n_tensors(); ++i) {
    const std::vector<float> p = pm.full_param(i);
    r.params.insert(r.params.end(), p.begin(), p.end());
  }
  after(pm);
  return r;
}

/// Rank 0's record of recipe R on backend K, `world` thread ranks of this process (`before`
/// and `after` as recipe_steps', called on every rank's thread).
template <class R, class K, class Before = no_model_hook, class After = no_model_hook>
step_record recipe_steps_on_threads(int world, std::int64_t seq_len = 16, const Before& before = {},
                                    const After& after = {}) {
  step_record out;
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    auto r = recipe_steps<R, K>(c, world, seq_len, before, after);
    if (c.rank() == 0) out = std::move(r);
  });
  return out;
}

}  // namespace tessera::testing
