// The compile-time budget (docs/layouts.md): this translation unit plans all 4096 layout
// pairs of a 3-D mesh in constant evaluation (one multi-target search per source) and
// checks every plan with static_assert; the run-time part checks that each equals the
// single-pair planner's cost.
#include <doctest/doctest.h>

#include <utility>

#include <tessera/plan/planner.hpp>

#include "all_pairs_3d.hpp"

namespace {
using namespace tessera;

template <int Src>
struct from {
  static constexpr std::array<plan_result, 64> plans =
      make_plans(all_pairs_3d::layouts[Src], all_pairs_3d::layouts, all_pairs_3d::mesh, all_pairs_3d::shape, 4);
  static constexpr bool ok = [] {
    for (std::size_t d = 0; d < 64; ++d) {
      const auto& s = all_pairs_3d::layouts[Src];
      const auto& t = all_pairs_3d::layouts[d];
      if (plans[d].error != check_transition(s, t)) return false;
      if (plans[d].error == plan_error::none && !is_valid_plan(s, t, plans[d].plan)) return false;
    }
    return true;
  }();
};

template <int... I>
constexpr bool all(std::integer_sequence<int, I...>) {
  return (from<I>::ok && ...);
}
static_assert(all(std::make_integer_sequence<int, 64>{}), "a compile-time plan is invalid");

template <int... I>
constexpr std::array<const std::array<plan_result, 64>*, 64> tables(std::integer_sequence<int, I...>) {
  return {&from<I>::plans...};
}
}  // namespace

TEST_CASE("compile-time multi-target plans equal the single-pair planner's, for all 4096 pairs") {
  const auto t = tables(std::make_integer_sequence<int, 64>{});
  int legal = 0;
  for (std::size_t s = 0; s < 64; ++s)
    for (std::size_t d = 0; d < 64; ++d) {
      const plan_result one = make_plan(all_pairs_3d::layouts[s], all_pairs_3d::layouts[d], all_pairs_3d::mesh, all_pairs_3d::shape, 4);
      const plan_result& many = (*t[s])[d];
      REQUIRE(many.error == one.error);
      if (one.error != plan_error::none) continue;
      ++legal;
      CHECK(many.time_us == doctest::Approx(one.time_us).epsilon(1e-12));
    }
  CHECK(legal == 2744);
}
