// Property tests of the planner: for every pair of layouts over 1-D, 2-D and 3-D meshes
// and several global shapes (uneven ones too), the plan, run by a reference executor
// written from the step semantics alone, reaches exactly the target layout (which rank
// holds which global index) with the right values (partial states reduced with their
// op); its cost equals plain Dijkstra's (the A* heuristic is admissible) and never
// exceeds the gather-first order's.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <tessera/layout/print.hpp>
#include <tessera/plan/planner.hpp>

#include "layouts.hpp"  // tests/support
#include "simulate.hpp"

using namespace tessera;

namespace {

double global_value(std::int64_t flat_index) { return static_cast<double>((flat_index * 2654435761LL) % 97 - 48); }

std::int64_t global_flat(const shape_t& g, const std::array<std::int64_t, max_tensor_rank>& idx) {
  std::int64_t f = 0;
  for (int d = 0; d < g.rank; ++d) f = f * g[d] + idx[static_cast<std::size_t>(d)];
  return f;
}

double noise(std::int64_t member, std::int64_t flat, std::uint32_t seed) {
  return static_cast<double>(((member + 1) * 7919 + flat * 104729 + seed) % 11) - 5;
}

/// Rank states holding `src`: boxes from local_box, values from the global tensor, and for
/// a partial layout values whose reduction over the partial group is the global value.
std::vector<sim::rank_state> initial(const layout_spec& src, const mesh_shape& m, const shape_t& g, std::uint32_t seed) {
  axis_group pg;
  for (int a = 0; a < m.ndim; ++a)
    if (src.is_partial(a)) pg.push(a);
  const std::int64_t n = pg.n ? group_size(m, pg) : 1;
  std::vector<sim::rank_state> st(static_cast<std::size_t>(world_size(m)));
  for (std::int64_t r = 0; r < world_size(m); ++r) {
    const coords_t c = coords_of(m, r);
    auto& s = st[static_cast<std::size_t>(r)];
    s.b = local_box(src, m, g, c);
    const std::int64_t me = pg.n ? group_index(m, pg, c) : 0;
    sim::for_each_index(s.b, [&](const auto& idx) {
      const std::int64_t f = global_flat(g, idx);
      const double G = global_value(f);
      double v = G;
      if (pg.n) {
        double others = 0;
        for (std::int64_t j = 1; j < n; ++j) others += noise(j, f, seed);
        switch (src.op) {
          case reduce::sum: v = me == 0 ? G - others : noise(me, f, seed); break;
          case reduce::avg: v = me == 0 ? G * static_cast<double>(n) - others : noise(me, f, seed); break;
          case reduce::max: v = me == 0 ? G : G - 1 - std::abs(noise(me, f, seed)); break;
          case reduce::min: v = me == 0 ? G : G + 1 + std::abs(noise(me, f, seed)); break;
        }
      }
      s.v.push_back(v);
    });
  }
  return st;
}

/// Checks that the states hold exactly `dst`: each rank's box is local_box(dst) and its
/// values, reduced over dst's partial group, are the global tensor's.
std::string check_holds(const std::vector<sim::rank_state>& st, const layout_spec& dst, const mesh_shape& m, const shape_t& g) {
  axis_group pg;
  for (int a = 0; a < m.ndim; ++a)
    if (dst.is_partial(a)) pg.push(a);
  for (std::int64_t r = 0; r < world_size(m); ++r) {
    const auto& s = st[static_cast<std::size_t>(r)];
    if (!(s.b == local_box(dst, m, g, coords_of(m, r)))) return "rank " + std::to_string(r) + " holds the wrong block";
    sim::rank_state v = s;
    if (pg.n) {
      std::vector<const sim::rank_state*> members;
      for (auto q : group_ranks(m, pg, r)) members.push_back(&st[static_cast<std::size_t>(q)]);
      v = sim::reduce_all(members, dst.op);
    }
    std::size_t k = 0;
    std::string bad;
    sim::for_each_index(v.b, [&](const auto& idx) {
      const double want = global_value(global_flat(g, idx));
      if (bad.empty() && std::abs(v.v[k] - want) > 1e-9) bad = "rank " + std::to_string(r) + " holds a wrong value";
      ++k;
    });
    if (!bad.empty()) return bad;
  }
  return {};
}

struct mesh_case {
  mesh_shape m;
  std::vector<std::string_view> names;
};

int run_pairs(const mesh_case& mc, int R, const std::vector<shape_t>& shapes, double fraction, std::uint32_t seed,
              const cost_model& cm = {}) {
  std::mt19937 rng(seed);
  int cases = 0;
  for (reduce op : {reduce::sum, reduce::avg, reduce::max, reduce::min}) {
    const auto layouts = testing_layouts::all_layouts(R, mc.m.ndim, op);
    for (const auto& src : layouts)
      for (const auto& dst : layouts) {
        if (std::uniform_real_distribution<double>(0, 1)(rng) > fraction) continue;
        const shape_t& g = shapes[rng() % shapes.size()];
        const plan_result p = make_plan(src, dst, mc.m, g, 4, cm);
        const plan_error legal = check_transition(src, dst);
        REQUIRE(p.error == legal);
        if (legal != plan_error::none) continue;
        INFO("mesh ndim ", int(mc.m.ndim), " ", to_canonical_string(src, mc.names), " -> ",
             to_canonical_string(dst, mc.names));
        REQUIRE(is_valid_plan(src, dst, p.plan));
        std::vector<sim::rank_state> st = initial(src, mc.m, g, seed);
        for (int i = 0; i < p.plan.n; ++i) st = sim::run_step(st, mc.m, p.plan[i]);
        const std::string bad = check_holds(st, dst, mc.m, g);
        CHECK_MESSAGE(bad.empty(), bad);
        // least cost: equal to plain Dijkstra, never above the gather-first order
        const plan_result dj = make_plan(src, dst, mc.m, g, 4, cm, false);
        CHECK(p.time_us == doctest::Approx(dj.time_us).epsilon(1e-12));
        const plan_result gf = evaluate_plan(src, gather_first_plan(src, dst), mc.m, g, 4, cm);
        CHECK(p.time_us <= gf.time_us + 1e-9);
        ++cases;
      }
  }
  return cases;
}

}  // namespace

TEST_CASE("plans reach the target layout exactly: 1-D meshes") {
  const mesh_case mc{mesh_shape{1, {4}}, {"x"}};
  int n = 0;
  for (int R = 1; R <= 3; ++R) n += run_pairs(mc, R, {shape_t{8, 4, 4}, shape_t{5, 7, 3}, shape_t{3, 2, 9}}, 1.0, 11u + static_cast<std::uint32_t>(R));
  MESSAGE(n, " cases");
  CHECK(n > 100);
}

TEST_CASE("plans reach the target layout exactly: 2-D meshes") {
  int n = 0;
  for (const mesh_case& mc : {mesh_case{mesh_shape{2, {2, 3}}, {"dp", "tp"}}, mesh_case{mesh_shape{2, {2, 2}}, {"dp", "tp"}}}) {
    n += run_pairs(mc, 1, {shape_t{12}, shape_t{7}, shape_t{5}}, 1.0, 21);
    n += run_pairs(mc, 2, {shape_t{12, 6}, shape_t{7, 5}, shape_t{3, 13}}, 1.0, 22);
  }
  MESSAGE(n, " cases");
  CHECK(n > 1000);
}

TEST_CASE("plans reach the target layout exactly: 3-D meshes (seeded sample)") {
  int n = 0;
  const mesh_case a{mesh_shape{3, {2, 2, 2}}, {"pp", "dp", "tp"}};
  const mesh_case b{mesh_shape{3, {2, 3, 2}}, {"pp", "dp", "tp"}};
  n += run_pairs(a, 1, {shape_t{8}, shape_t{11}}, 1.0, 31);
  n += run_pairs(a, 2, {shape_t{8, 4}, shape_t{5, 9}}, 0.15, 32);
  n += run_pairs(b, 2, {shape_t{12, 6}, shape_t{7, 13}}, 0.05, 33);
  n += run_pairs(b, 3, {shape_t{6, 4, 6}, shape_t{5, 3, 7}}, 0.002, 34);
  MESSAGE(n, " cases");
  CHECK(n > 2000);
}

TEST_CASE("with local copies counted (cost_model::copy_GBps), plans stay exact and least-cost") {
  // copies as fast as the links, and ten times slower: the search, its A* bound and its
  // deferred runs must still agree with plain Dijkstra and beat the gather-first order
  int n = 0;
  for (double copy : {87.7, 8.77}) {
    cost_model cm;
    cm.copy_GBps = copy;
    n += run_pairs(mesh_case{mesh_shape{1, {4}}, {"x"}}, 2, {shape_t{8, 4}, shape_t{5, 7}}, 1.0, 41, cm);
    for (const mesh_case& mc : {mesh_case{mesh_shape{2, {2, 3}}, {"dp", "tp"}}, mesh_case{mesh_shape{2, {2, 2}}, {"dp", "tp"}}})
      n += run_pairs(mc, 2, {shape_t{12, 6}, shape_t{7, 5}, shape_t{64, 64}}, 0.5, 42, cm);
    n += run_pairs(mesh_case{mesh_shape{3, {2, 2, 2}}, {"pp", "dp", "tp"}}, 2, {shape_t{8, 4}, shape_t{16, 16}}, 0.1, 43, cm);
  }
  MESSAGE(n, " cases");
  CHECK(n > 1000);
}
