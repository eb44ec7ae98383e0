// Activation checkpointing as a policy (issue 15): in every composition the loss curve is
// bit-identical to the same recipe without it (recomputation is deterministic); the
// measured peak equals the estimate (test_memory.cpp) and the measured bytes the traffic
// estimate, recomputed collectives included (test_traffic.cpp).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <tessera/comm/threads.hpp>
#include <tessera/parallel/activation_checkpoint.hpp>

#include "training_check.hpp"

using namespace tessera;
namespace tc = training_check;

namespace {
template <class Base, class Mode, class... P>
struct add_ac;
template <class Base, class Mode, class... P>
struct add_ac<Base, Mode, tessera::parallelize<P...>> {
  static constexpr std::string_view name = Base::name;
  using model = typename Base::model;
  using mesh = typename Base::mesh;
  using parallelize = tessera::parallelize<P..., activation_checkpointing<Mode>>;
};
/// `Base` with activation_checkpointing<Mode> added to its policies.
template <class Base, class Mode>
using checkpointed = add_ac<Base, Mode, typename Base::parallelize>;

/// Recipe R's curve, on tc::smallmodel: the same bits with and without checkpointing is a
/// property of each step's arithmetic, not of the model's size (the debug model's matrix took
/// 26 s).
template <class R>
std::vector<double> curve(int world, const std::vector<std::int32_t>& toks) {
  return tc::threads_curve<tc::small<R>>(world, toks, tc::bit_identity_steps);
}

template <class AC, class Base>
void check_same(const char* what, int world, const std::vector<std::int32_t>& toks) {
  static_assert(recipe_traits<AC>::spec.ac.any() && !recipe_traits<Base>::spec.ac.any());
  const auto a = curve<AC>(world, toks), b = curve<Base>(world, toks);
  REQUIRE(a.size() == b.size());
  std::printf("%-44s %d ranks: %zu-step loss %.6f -> %.6f, bit-identical to the recipe without checkpointing: %s\n",
              what, world, a.size(), a.front(), a.back(),
              std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0 ? "yes" : "NO");
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}
}  // namespace

TEST_CASE("activation checkpointing: every mode in every composition trains bit-identically to none") {
  const auto toks = tc::tokens();
  check_same<recipes::debug_2d_ac, recipes::debug_2d>("debug_2d_ac (FSDP x TP+SP, selective op)", 4, toks);
  check_same<checkpointed<recipes::debug_fsdp, ac::full>, recipes::debug_fsdp>("debug_fsdp + full", 2, toks);
  check_same<checkpointed<recipes::debug_tp, ac::selective_layer<2>>, recipes::debug_tp>(
      "debug_tp + selective_layer<2>", 2, toks);
  check_same<checkpointed<recipes::debug_hsdp, ac::selective_op<ac_op::attention, ac_op::w3>>, recipes::debug_hsdp>(
      "debug_hsdp + selective_op<attention, w3>", 4, toks);
  check_same<checkpointed<recipes::debug_pp, ac::full>, recipes::debug_pp>("debug_pp (1F1B) + full", 2, toks);
  check_same<checkpointed<recipes::debug_3d, ac::selective_op<>>, recipes::debug_3d>(
      "debug_3d (Interleaved1F1B) + selective op", 8, toks);
  // zero-bubble: I recomputes, W uses what I recomputed
  check_same<checkpointed<recipes::debug_3d_zbv, ac::full>, recipes::debug_3d_zbv>(
      "debug_3d_zbv (ZBV, I and W apart) + full", 8, toks);
}

TEST_CASE("the policy reaches the model: blocks are recomputed in backward") {
  using R = recipes::debug_2d_ac;
  const auto toks = tc::tokens();
  comm::run_threads(4, [&](comm::threads_communicator& c) {
    device_mesh<R::mesh> dm(R::mesh(4), c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(9);
    CHECK(pm.model().checkpointing().mode == ac_mode::selective_op);
    CHECK(pm.model().keep_of(0) == ac_default_ops(true));  // sequence parallel: wo's reduce-scatter kept
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, 1, 1, tc::options());
    tr.train_step();
    CHECK(pm.model().recompute_flops() > 0);
  });
}
