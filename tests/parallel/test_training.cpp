// Equivalence: every shipped recipe trains 20 steps like one rank (threads backend).
// debug_fsdp trains as shipped, on the debug model; the others' meshes and policies train
// training_check::smallmodel, the debug model's shape at a tenth of its FLOPs (GQA, so TP
// splits the KV heads too): how a recipe splits the work does not depend on the model's
// size, and the ten curves on the debug model took 73 s alone, most of CI's longest test
// (docs/performance.md, "CI"). The shipped recipes' traffic and memory against the
// estimators stay on the debug model (test_traffic.cpp, test_memory.cpp).
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include <tessera/comm/threads.hpp>

#include "training_check.hpp"

using namespace tessera;
namespace tc = training_check;

namespace {
/// R's 20-step curve on `world` thread ranks against one rank's curve of R's model.
template <class R>
void check_recipe(int world, const std::vector<std::int32_t>& toks, double tolerance = tc::tolerance) {
  const auto ref = tc::serial_curve<typename R::model>(toks);
  REQUIRE(ref.back() < ref.front() - 0.3);  // the run learns: the comparison is not between flat lines
  const auto got = tc::threads_curve<R>(world, toks);
  const double dev = tc::deviation(ref, got);
  std::printf("%-10s (%s) on %2d ranks: 20-step loss curve %.4f -> %.4f, max relative deviation from one rank %.2e\n",
              std::string(R::name).c_str(), std::string(R::model::config.name).c_str(), world, got.front(),
              got.back(), dev);
  CHECK(dev <= tolerance);
}
}  // namespace

TEST_CASE("shipped recipes train like one rank for 20 steps (threads)") {
  const auto toks = tc::tokens();
  check_recipe<recipes::debug_fsdp>(2, toks);  // as shipped: the debug model
  check_recipe<tc::small<recipes::debug_fsdp>>(3, toks);  // batch 4 over 3 ranks: uneven batch shards
  check_recipe<tc::small<recipes::debug_hsdp>>(4, toks);
  check_recipe<tc::small<recipes::debug_tp>>(2, toks);
  check_recipe<tc::small<recipes::debug_2d>>(4, toks);
  check_recipe<tc::small<recipes::debug_2d_async>>(4, toks);
}

TEST_CASE("shipped pipeline recipes train like one rank for 20 steps (threads)") {
  const auto toks = tc::tokens();
  // issue 13 asks 1e-6 of the pipeline recipes (observed: 1.2e-7)
  check_recipe<tc::small<recipes::debug_pp>>(2, toks, 1e-6);
  check_recipe<tc::small<recipes::debug_3d>>(8, toks, 1e-6);
  check_recipe<tc::small<recipes::debug_3d_zbv>>(8, toks, 1e-6);
}

TEST_CASE("shipped context-parallel recipes train like one rank for 20 steps (threads)") {
  const auto toks = tc::tokens();
  // issue 14 asks 1e-6 of the loss curve
  check_recipe<tc::small<recipes::debug_cp>>(4, toks, 1e-6);
  check_recipe<tc::small<recipes::debug_4d>>(16, toks, 1e-6);
}
