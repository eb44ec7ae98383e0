// Equivalence: every shipped recipe trains 20 steps like one rank (threads backend).
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include <tessera/comm/threads.hpp>

#include "training_check.hpp"

using namespace tessera;
namespace tc = training_check;

namespace {
template <class R>
void check_recipe(int world, const std::vector<double>& ref, const std::vector<std::int32_t>& toks,
                  double tolerance = tc::tolerance) {
  const auto got = tc::threads_curve<R>(world, toks);
  const double dev = tc::deviation(ref, got);
  std::printf("%-10s on %d ranks: 20-step loss curve %.4f -> %.4f, max relative deviation from one rank %.2e\n",
              std::string(R::name).c_str(), world, got.front(), got.back(), dev);
  CHECK(dev <= tolerance);
}
}  // namespace

TEST_CASE("shipped recipes train like one rank for 20 steps (threads)") {
  const auto toks = tc::tokens();
  const auto ref = tc::serial_curve(toks);
  REQUIRE(ref.back() < ref.front() - 0.3);  // the run learns: the comparison is not between flat lines
  check_recipe<recipes::debug_fsdp>(2, ref, toks);
  check_recipe<recipes::debug_fsdp>(3, ref, toks);  // batch 4 over 3 ranks: uneven batch shards
  check_recipe<recipes::debug_hsdp>(4, ref, toks);
  check_recipe<recipes::debug_tp>(2, ref, toks);
  check_recipe<recipes::debug_2d>(4, ref, toks);
}

TEST_CASE("shipped pipeline recipes train like one rank for 20 steps (threads)") {
  const auto toks = tc::tokens();
  const auto ref = tc::serial_curve(toks);
  // issue 13 asks 1e-6 of the pipeline recipes (observed: 1.2e-7)
  check_recipe<recipes::debug_pp>(2, ref, toks, 1e-6);
  check_recipe<recipes::debug_3d>(8, ref, toks, 1e-6);
  check_recipe<recipes::debug_3d_zbv>(8, ref, toks, 1e-6);
}

TEST_CASE("shipped context-parallel recipes train like one rank for 20 steps (threads)") {
  const auto toks = tc::tokens();
  const auto ref = tc::serial_curve(toks);
  // issue 14 asks 1e-6 of the loss curve
  check_recipe<recipes::debug_cp>(4, ref, toks, 1e-6);
  check_recipe<recipes::debug_4d>(16, ref, toks, 1e-6);
}
