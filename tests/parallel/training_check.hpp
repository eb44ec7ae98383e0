// Shared by the threads and MPI equivalence tests: a shipped recipe trains 20 steps from
// the same init on the same data as one rank, and the loss curves must agree.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/trainer.hpp>

namespace training_check {
using namespace tessera;

inline constexpr std::int64_t steps = 20, batch = 4, seq_len = 32;
/// Relative tolerance on each step's loss. The parallel runs compute the same f32 math with
/// sums in another order (reduce-scatters of data-parallel partial gradients, TP's partial
/// GEMM outputs, loss-parallel row sums), each rounding at ~6e-8 relative; AdamW turns
/// gradient differences into update differences of the same relative size, and 20 steps
/// at lr 8e-4 keep them at that level (observed: at most 1.2e-7, a couple of f32 ulps of
/// the loss; the test prints it). 1e-5 leaves room for other BLAS builds and thread counts,
/// while a wrong collective (a missing reduction, a shard used twice) moves the loss by
/// 1e-2 or more from the first step.
inline constexpr double tolerance = 1e-5;

/// Steps of the checks that ask for the same bits (activation checkpointing against none):
/// bit-identity is a property of each step's arithmetic, so a recompute that differs shows in
/// the first step's gradients, hence in the second step's loss. Five steps take the curve
/// past the warmup (2 steps) and through AdamW's first updates; 20 would cost the parallel
/// tests' largest case 90 s instead of about 25 on CI's 2 cores, for nothing more to see.
inline constexpr std::int64_t bit_identity_steps = 5;

/// A token stream with structure (a noisy repeating pattern), so the loss falls.
inline std::vector<std::int32_t> tokens() {
  std::vector<std::int32_t> t;
  std::mt19937 g(5);
  for (int i = 0; i < 40000; ++i) t.push_back(static_cast<std::int32_t>((i * 7 + (g() % 3)) % 2048));
  return t;
}

inline train::optimizer_options options() {
  train::optimizer_options o;
  o.warmup = 2;
  return o;
}

template <class Model>
std::vector<double> curve(Model& m, const std::vector<std::int32_t>& toks, std::int64_t n = steps) {
  train::batch_loader loader(toks, batch, seq_len, 3);
  train::basic_trainer<Model> tr(m, loader, n, 1, options());
  std::vector<double> losses;
  for (std::int64_t s = 0; s < n; ++s) losses.push_back(tr.train_step().loss);
  return losses;
}

// The curves are deterministic (the same bits every run), and the test files compare
// against the same few (the AC matrix against the recipes test_training.cpp checks, Float8's
// against one rank): each is computed once per program and kept -- test_parallel's
// activation-checkpointing case took 138 s of the binary's 296 s, half of it recomputing
// the base recipes' curves.

/// `compute()`'s curve, computed the first time `key` is asked for and kept in `memo`.
template <class Key, class F>
std::vector<double> kept(std::map<Key, std::vector<double>>& memo, Key key, F&& compute) {
  if (const auto it = memo.find(key); it != memo.end()) return it->second;
  return memo.emplace(std::move(key), compute()).first->second;
}

/// One rank's 20-step curve (kept).
inline std::vector<double> serial_curve(const std::vector<std::int32_t>& toks) {
  static std::map<std::vector<std::int32_t>, std::vector<double>> memo;
  return kept(memo, toks, [&] {
    llama_model m(debugmodel::config);
    m.init_weights(9);
    return curve(m, toks);
  });
}

template <class R, class C>
std::vector<double> recipe_curve(C& c, typename R::mesh mesh, const std::vector<std::int32_t>& toks,
                                 std::int64_t n = steps) {
  device_mesh<typename R::mesh> dm(mesh, c);
  train::parallel_llama<R> pm(dm);
  pm.init_weights(9);
  return curve(pm, toks, n);
}

/// recipe_curve of n steps on `world` thread ranks: rank 0's losses (kept).
template <class R>
std::vector<double> threads_curve(int world, const std::vector<std::int32_t>& toks, std::int64_t n = steps) {
  static std::map<std::tuple<int, std::int64_t, std::vector<std::int32_t>>, std::vector<double>> memo;
  return kept(memo, std::make_tuple(world, n, toks), [&] {
    std::vector<double> got;
    comm::run_threads(world, [&](comm::threads_communicator& c) {
      auto losses = recipe_curve<R>(c, typename R::mesh(world), toks, n);
      if (c.rank() == 0) got = losses;
    });
    return got;
  });
}

/// The largest relative deviation of `b` from `a`.
inline double deviation(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = a.size() == b.size() ? 0 : 1e30;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(a[i]));
  return worst;
}

}  // namespace training_check
