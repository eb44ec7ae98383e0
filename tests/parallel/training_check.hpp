// Shared by the threads and MPI equivalence tests: a shipped recipe trains 20 steps from
// the same init on the same data as one rank, and the loss curves must agree.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string_view>
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

/// The optimizer of model M's curves: the trainer's defaults (the debug model's learning rate,
/// TorchTitan's), a 2-step warmup, and M::lr where M gives one.
template <class M = debugmodel>
train::optimizer_options options() {
  train::optimizer_options o;
  o.warmup = 2;
  if constexpr (requires { M::lr; }) o.lr = M::lr;
  return o;
}

/// n steps of `m` (a model of M's config) on `toks`: the losses.
template <class M, class Model>
std::vector<double> curve(Model& m, const std::vector<std::int32_t>& toks, std::int64_t n = steps) {
  train::batch_loader loader(toks, batch, seq_len, 3);
  train::basic_trainer<Model> tr(m, loader, n, 1, options<M>());
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

/// The debug model's shape (6 layers, the same vocabulary, every dimension a multiple of 16)
/// at a tenth of its parameters and FLOPs: dim 64, 4 heads over 2 KV heads (GQA), FFN 192.
/// The matrices whose checks do not depend on the model's size -- the same bits with and
/// without activation checkpointing, Float8 under each policy against one rank -- run on it;
/// the shipped recipes' own checks keep the debug model (test_parallel_float8 took 122 s
/// on the debug model alone on CI's 2 cores, docs/performance.md, "CI").
struct smallmodel {
  static constexpr llama_config config{.name = "small", .dim = 64, .n_layers = 6, .n_heads = 4, .n_kv_heads = 2,
                                       .vocab_size = 2048, .multiple_of = 64};
  /// At the debug model's 8e-4 its 20-step loss fell by 0.005 (8.061 -> 8.056): curves that
  /// hardly move compare nothing. At 5e-3 it falls by 0.39 (the debug model's by 0.44 at
  /// 8e-4), and Float8's distances -- from f32, and a split run's from one rank -- are the
  /// debug model's to within a factor 2 (docs/recipes.md, "Float8").
  static constexpr double lr = 5e-3;
};

/// Recipe R with its model replaced by M (mesh and policies unchanged).
template <class R, class M>
struct on_model {
  static constexpr std::string_view name = R::name;
  using model = M;
  using mesh = typename R::mesh;
  using parallelize = typename R::parallelize;
};
/// Recipe R on smallmodel.
template <class R>
using small = on_model<R, smallmodel>;

/// One rank's 20-step curve of model M (kept).
template <class M = debugmodel>
std::vector<double> serial_curve(const std::vector<std::int32_t>& toks) {
  static std::map<std::vector<std::int32_t>, std::vector<double>> memo;
  return kept(memo, toks, [&] {
    llama_model m(M::config);
    m.init_weights(9);
    return curve<M>(m, toks);
  });
}

template <class R, class C>
std::vector<double> recipe_curve(C& c, typename R::mesh mesh, const std::vector<std::int32_t>& toks,
                                 std::int64_t n = steps) {
  device_mesh<typename R::mesh> dm(mesh, c);
  train::parallel_llama<R> pm(dm);
  pm.init_weights(9);
  return curve<typename R::model>(pm, toks, n);
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
