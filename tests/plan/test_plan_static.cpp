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

// The nested swap on 2 x 2 (issue 21): consecutive all_to_alls run as one exchange
// (plan/runs.hpp), and the search costs them so. Step by step the three all_to_alls cost
// more than gather + all_to_all + slice; as the one exchange they execute as, less: the
// planner must pick them (the old step-by-step search picked the gather, measured 7-110x
// slower).
using M22 = mesh<axis<"a", 2>, axis<"b", 2>>;
using N01 = layout_t<M22, 2, shard<0>, shard<1>>;
using N10 = layout_t<M22, 2, shard<1>, shard<0>>;
using NSwap = plan_t<N01, N10, float, extents<1024, 1024>>;
static_assert(NSwap::size == 3 && NSwap::runs.size() == 1 && NSwap::runs[0].fused());
static_assert(NSwap::step<0>::kind == step_kind::all_to_all && NSwap::step<1>::kind == step_kind::all_to_all &&
              NSwap::step<2>::kind == step_kind::all_to_all);
constexpr double step_by_step(const layout_spec& src, const plan_value& p, const mesh_shape& m, const shape_t& g) {
  double t = 0;
  layout_spec l = src;
  for (int i = 0; i < p.n; ++i) {
    const layout_spec next = apply(l, p[i]);
    t += cost_of(p[i], l, next, m, g, 4, cost_model{}).time_us;
    l = next;
  }
  return t;
}
constexpr plan_value gather_swap() {  // the old choice: all_gather(a) dim 0, all_to_all(b) 1 -> 0, slice(a) dim 1
  plan_value p;
  plan_step s;
  s.kind = step_kind::all_gather, s.dim = 0, s.group.push(0);
  p.push(s);
  s = plan_step{}, s.kind = step_kind::all_to_all, s.dim = 1, s.to_dim = 0, s.group.push(1);
  p.push(s);
  s = plan_step{}, s.kind = step_kind::local_slice, s.dim = 1, s.group.push(0);
  p.push(s);
  return p;
}
static_assert(is_valid_plan(N01::spec, N10::spec, gather_swap()));
static_assert(step_by_step(N01::spec, NSwap::value, M22::static_shape, shape_t{1024, 1024}) >
              step_by_step(N01::spec, gather_swap(), M22::static_shape, shape_t{1024, 1024}));
static_assert(NSwap::result.time_us <
              evaluate_plan(N01::spec, gather_swap(), M22::static_shape, shape_t{1024, 1024}, 4).time_us);
// A fused run costs one all_to_all over the union group (here (a, b)) of the larger block.
constexpr double one_all_to_all() {
  plan_step s;
  s.kind = step_kind::all_to_all, s.dim = 0, s.to_dim = 1, s.group.push(0), s.group.push(1);
  return cost_of(s, N01::spec, N10::spec, M22::static_shape, shape_t{1024, 1024}, 4, cost_model{}).time_us;
}
static_assert(NSwap::result.time_us == one_all_to_all());
}  // namespace

TEST_CASE("plan types print their steps and evaluate actual sizes at run time") {
  CHECK(RS::str() == "reduce_scatter(dp) sum dim 0\n");
  MD m(8);  // dp = 4
  const plan_result r = D::evaluate(m.shape(), shape_t{1000, 10});
  CHECK(r.bus_bytes > 0);
  CHECK(r.time_us > 0);
}
