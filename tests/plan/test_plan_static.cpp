// Compile-time tests of plans as types.
#include <doctest/doctest.h>

#include <type_traits>

#include <tessera/core/extents.hpp>
#include <tessera/layout/layout.hpp>
#include <tessera/plan/plan.hpp>

using namespace tessera;

namespace {
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using S0S1 = layout_t<M, 2, shard<0>, shard<1>>;
using S1S0 = layout_t<M, 2, shard<1>, shard<0>>;
using E = extents<1024, 4096>;

// [S(0), S(1)] -> [S(1), S(0)]: DTensor's greedy order gathers dim 0 on dp and then moves
// tp; tessera must never hold the whole tensor on a rank on the way.
using Swap = plan_t<S0S1, S1S0, float, E>;
constexpr bool never_whole() {
  for (int i = 0; i <= Swap::size; ++i)
    if (max_local_numel(Swap::layouts[static_cast<std::size_t>(i)], M::static_shape, E::nominal_shape(0)) == 1024 * 4096)
      return false;
  return true;
}
static_assert(never_whole());
static_assert(Swap::layouts[static_cast<std::size_t>(Swap::size)] == S1S0::spec);
static_assert(Swap::result.time_us <
              evaluate_plan(S0S1::spec, gather_first_plan(S0S1::spec, S1S0::spec), M::static_shape, shape_t{1024, 4096}, 4).time_us);

// Partial -> shard is one reduce_scatter.
using P = layout_t<M, 2, partial<>, replicate>;
using RS = plan_t<P, layout_t<M, 2, shard<0>, replicate>, float, E>;
static_assert(RS::size == 1 && RS::step<0>::kind == step_kind::reduce_scatter);
static_assert(RS::step<0>::value.group == M::group<"dp">() && RS::step<0>::value.dim == 0);

// Replicate -> shard is local; the plan type says so.
using Slice = plan_t<replicated_t<M, 2>, S0S1, float, E>;
static_assert(Slice::is_local && Slice::size == 2);

// Partial over both axes -> replicate: one all_reduce on the flattened group (dp, tp)
// moves fewer bytes than two all_reduces in a row.
using PP = layout_t<M, 2, partial<>, partial<>>;
using AR = plan_t<PP, replicated_t<M, 2>, float, E>;
static_assert(AR::size == 1 && AR::step<0>::kind == step_kind::all_reduce && AR::step<0>::value.group.n == 2);

// FSDP over TP ((tp, dp) on dim 0) from plain TP: one local slice, the dp axis innermost.
using TP = layout_t<M, 2, replicate, shard<0>>;
using FSDPxTP = layout_t<M, 2, dim<0, "tp", "dp">>;
using Fs = plan_t<TP, FSDPxTP, float, E>;
static_assert(Fs::is_local && Fs::size == 1 && Fs::step<0>::value.group == M::group<"dp">());

// Identity: no steps.
static_assert(plan_t<S0S1, S0S1>::size == 0);

// Dynamic extents and dynamic mesh sizes still give a plan at compile time.
using MD = mesh<axis<"dp">, axis<"tp", 2>>;
using D = plan_t<layout_t<MD, 2, shard<0>, replicate>, layout_t<MD, 2, replicate, shard<0>>>;
static_assert(D::size >= 1);
}  // namespace

TEST_CASE("plan types print their steps and evaluate actual sizes at run time") {
  CHECK(RS::str() == "reduce_scatter(dp) sum dim 0\n");
  MD m(8);  // dp = 4
  const plan_result r = D::evaluate(m.shape(), shape_t{1000, 10});
  CHECK(r.bus_bytes > 0);
  CHECK(r.time_us > 0);
}
