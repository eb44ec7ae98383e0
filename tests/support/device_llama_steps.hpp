// tests/support/device_llama_steps.hpp: the same training steps on llama_model (the host)
// and on device_llama<K> (any kernel backend): tests/model/test_device_llama.cpp compares
// them bit for bit with K = cpu_kernels, tests/gpu/test_cuda_llama.cu within tolerances with
// K = cuda_kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/grad_norm.hpp>
#include <tessera/model/device_llama.hpp>
#include <tessera/model/llama.hpp>

namespace tessera::testing {

/// What a run of `steps` steps gives: the loss and gradient norm of each step, and the
/// parameter arena after the last.
struct step_record {
  std::vector<float> losses, norms, params;
};

/// Deterministic ids for step s: inputs [B, T] and targets (the next id; every 7th ignored).
struct step_batch {
  std::vector<std::int32_t> inputs, targets;
  step_batch(std::int64_t s, std::int64_t B, std::int64_t T, std::int64_t V) {
    for (std::int64_t i = 0; i < B * T; ++i) {
      const auto x = static_cast<std::int32_t>((i * 37 + s * 101 + 11) % V);
      inputs.push_back(x);
      targets.push_back(i % 7 == 3 ? -1 : static_cast<std::int32_t>((x * 5 + 3) % V));
    }
  }
};

inline constexpr float test_max_norm = 1.0f;

/// `steps` steps of `m`: zero_grad, forward, backward, then `optimize(step)` (clipping to
/// test_max_norm, returning the norm, and AdamW); the losses and norms of each step.
template <class Model, class Optimize>
step_record run_steps(Model& m, const llama_config& c, std::int64_t B, std::int64_t T, int steps, Optimize&& optimize) {
  step_record r;
  for (int s = 0; s < steps; ++s) {
    const step_batch b(s, B, T, c.vocab_size);
    m.zero_grad();
    r.losses.push_back(m.forward(b.inputs, b.targets, B, T));
    m.backward();
    r.norms.push_back(optimize(s + 1));
  }
  return r;
}

/// llama_model on the host: forward, backward, clipping, AdamW; `f8` the Float8 linears.
inline step_record host_steps(const llama_config& c, std::int64_t B, std::int64_t T, int steps,
                              const cpu::adamw_config& opt, const f8_linears& f8 = {}, const ac_settings& ac = {}) {
  llama_shard shard = llama_shard::whole(c);
  shard.float8 = f8;
  llama_model m(c, shard);
  m.set_checkpointing(ac);
  m.init_weights(7);
  const std::size_t n = m.params().size();
  std::vector<float> mom(n), var(n);
  step_record r = run_steps(m, c, B, T, steps, [&](std::int64_t step) {
    const float norm = cpu::clip_grad_norm(m.grads().data(), n, test_max_norm);
    cpu::adamw_update(m.params().data(), m.grads().data(), mom.data(), var.data(), n, step, opt);
    return norm;
  });
  r.params.assign(m.params().data(), m.params().data() + n);
  return r;
}

/// The same on device_llama<K>.
template <class K>
step_record device_steps(const llama_config& c, std::int64_t B, std::int64_t T, int steps,
                         const cpu::adamw_config& opt, const f8_linears& f8 = {}, const ac_settings& ac = {}) {
  device_llama<K> m(c, f8);
  m.set_checkpointing(ac);
  m.init_weights(7);
  step_record r = run_steps(m, c, B, T, steps, [&](std::int64_t step) {
    const float norm = m.clip_grad_norm(test_max_norm);
    m.adamw_step(step, opt);
    return norm;
  });
  r.params.resize(static_cast<std::size_t>(m.arena_size()));
  m.store_params(r.params);
  return r;
}

/// Prints each step's loss and gradient norm of `ref` and `got` with their relative
/// differences, and the largest parameter difference; returns the steps beyond `tol`.
inline int report_steps(const step_record& ref, const step_record& got, double tol) {
  if (got.losses.size() != ref.losses.size() || got.norms.size() != ref.norms.size()) {
    std::printf("  the tested run recorded %zu losses and %zu gradient norms, the reference %zu and %zu\n",
                got.losses.size(), got.norms.size(), ref.losses.size(), ref.norms.size());
    return 1;
  }
  int bad = 0;
  std::printf("  step, loss reference / tested (relative difference), grad norm reference / tested\n");
  for (std::size_t s = 0; s < ref.losses.size(); ++s) {
    const double dl = std::fabs(ref.losses[s] - got.losses[s]) / std::fabs(ref.losses[s]);
    // a loss after the steps (recipe_steps' evaluation forward) has no gradient norm
    const bool step = s < ref.norms.size();
    const double dn = step ? std::fabs(ref.norms[s] - got.norms[s]) / std::fabs(ref.norms[s]) : 0.0;
    const bool ok = std::isfinite(got.losses[s]) && dl <= tol && dn <= tol;
    bad += !ok;
    if (step)
      std::printf("  %2zu  %.6f / %.6f (%.1e)  %.5f / %.5f (%.1e)%s\n", s + 1, ref.losses[s], got.losses[s], dl,
                  ref.norms[s], got.norms[s], dn, ok ? "" : "  <-- beyond the tolerance");
    else
      std::printf("  eval  %.6f / %.6f (%.1e)  (a forward after the steps)%s\n", ref.losses[s], got.losses[s], dl,
                  ok ? "" : "  <-- beyond the tolerance");
  }
  double dp = 0;
  for (std::size_t i = 0; i < ref.params.size() && i < got.params.size(); ++i)
    dp = std::fmax(dp, std::fabs(ref.params[i] - got.params[i]));
  std::printf("  parameters after the last step: largest difference %.2e\n", dp);
  std::fflush(stdout);
  return bad;
}

}  // namespace tessera::testing
