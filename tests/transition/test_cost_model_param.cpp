#include <doctest/doctest.h>

#include <tessera/comm/threads.hpp>
#include <tessera/plan/plan.hpp>
#include <tessera/tensor/dist_tensor.hpp>

using namespace tessera;

namespace {
using M = mesh<axis<"a", 2>, axis<"b", 2>>;
using AB = layout_t<M, 2, dim<0, "a">, dim<1, "b">>;
using BA = layout_t<M, 2, dim<0, "b">, dim<1, "a">>;
using E = extents<1024, 1024>;

/// A cluster whose all_to_all runs at a 25th of its links' speed (as a link profile may say).
struct slow_all_to_all {
  static constexpr cost_model value = [] {
    cost_model c;
    c.coll_scale[static_cast<std::size_t>(coll_kind::all_to_all)] = 25;
    return c;
  }();
};

// default constants: DTensor's NVLink model picks three all_to_alls, which run as one
// exchange (plan/runs.hpp; the planner costs them so)
using Default = plan_t<AB, BA, float, E>;
static_assert(Default::size == 3 && Default::value.collectives() == 3 && Default::runs.size() == 1);
static_assert(Default::value[0].kind == step_kind::all_to_all && Default::value[2].kind == step_kind::all_to_all);
// the same transition planned for the other cluster avoids the all_to_all: gather, slice
using Slow = plan_t<AB, BA, float, E, slow_all_to_all>;
static_assert(Slow::value.collectives() == 2);
static_assert(Slow::value[0].kind == step_kind::all_gather && Slow::value[1].kind == step_kind::all_gather);
// a default-constructed cost_model with explicit per-collective defaults is the old model, bit for bit
static_assert(make_plan(AB::spec, BA::spec, M::static_shape, shape_t{1024, 1024}, 4).time_us ==
              evaluate_plan(AB::spec, Default::value, M::static_shape, shape_t{1024, 1024}, 4).time_us);
}  // namespace

TEST_CASE("dist_tensor::redistribute<L, Cost> runs the plan chosen for Cost, with the same result") {
  comm::run_threads(4, [](comm::threads_communicator& c) {
    device_mesh<M> dm(M{}, c);
    const shape_t g{64, 48};
    auto x = dist_tensor<float, AB>::distribute(dm, g, [](const index_t& i) { return float(i[0] * 100 + i[1]); });
    const auto y_default = x.redistribute<BA>();
    const auto y_slow = x.redistribute<BA, slow_all_to_all>();
    REQUIRE(y_default.local().size() == y_slow.local().size());
    CHECK(std::equal(y_default.local().begin(), y_default.local().end(), y_slow.local().begin()));
    auto out = dist_tensor<float, BA>::zeros(dm, g);
    x.redistribute<slow_all_to_all>(out);
    CHECK(std::equal(out.local().begin(), out.local().end(), y_default.local().begin()));
  });
}
