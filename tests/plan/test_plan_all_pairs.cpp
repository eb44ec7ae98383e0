// The compile-time budget (docs/layouts.md): this translation unit plans all 4096 layout
// pairs of a 3-D mesh in constant evaluation (one multi-target search per source) and
// checks every plan with static_assert; the run-time part checks that each equals the
// single-pair planner's cost.
#include <doctest/doctest.h>

#include <utility>

#include <tessera/plan/planner.hpp>
#include <tessera/plan/runs.hpp>

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

TEST_CASE("fused all_to_all runs: every rank's block goes exactly to the ranks that hold it after") {
  int fused = 0;
  for (std::size_t s = 0; s < 64; ++s)
    for (std::size_t d = 0; d < 64; ++d) {
      const layout_spec& src = all_pairs_3d::layouts[s];
      const plan_result r = make_plan(src, all_pairs_3d::layouts[d], all_pairs_3d::mesh, all_pairs_3d::shape, 4);
      if (r.error != plan_error::none) continue;
      const auto ls = plan_layouts(src, r.plan);
      const plan_runs runs = runs_of(r.plan);
      for (int k = 0; k < runs.size(); ++k) {
        const step_run& run = runs[k];
        if (!run.fused()) continue;
        ++fused;
        const layout_spec& before = ls[static_cast<std::size_t>(run.begin)];
        const layout_spec& after = ls[static_cast<std::size_t>(run.end)];
        for (int i = 0; i < run.group.n; ++i) {
          CHECK(before.is_sharded(run.group[i]));
          CHECK(after.is_sharded(run.group[i]));
        }
        for (const shape_t& g : {all_pairs_3d::shape, shape_t{7, 5}}) {
          const std::int64_t n = group_size(all_pairs_3d::mesh, run.group);
          for (std::int64_t rank = 0; rank < 8; ++rank) {
            const coords_t at = coords_of(all_pairs_3d::mesh, rank);
            const box b0 = local_box(before, all_pairs_3d::mesh, g, at), b1 = local_box(after, all_pairs_3d::mesh, g, at);
            std::int64_t sent = 0, received = 0;
            for (std::int64_t q = 0; q < n; ++q) {
              const coords_t cq = group_member(all_pairs_3d::mesh, run.group, at, q);
              sent += intersect(b0, local_box(after, all_pairs_3d::mesh, g, cq)).numel();
              received += intersect(local_box(before, all_pairs_3d::mesh, g, cq), b1).numel();
            }
            INFO(s << " -> " << d << ", run " << k << ", rank " << rank);
            CHECK(sent == b0.numel());
            CHECK(received == b1.numel());
          }
        }
      }
    }
  CHECK(fused > 0);
}
