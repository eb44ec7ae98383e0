// Run-time use of the planner (as the plan explorer uses it) and the cost model.
#include <doctest/doctest.h>

#include <array>
#include <limits>
#include <string>
#include <string_view>

#include <tessera/layout/parse.hpp>
#include <tessera/plan/planner.hpp>
#include <tessera/plan/runs.hpp>

using namespace tessera;

namespace {
const std::array<std::string_view, 2> names{"dp", "tp"};
const mesh_shape m24{2, {2, 4}};
}  // namespace

TEST_CASE("bus bytes follow nccl-tests' factors") {
  // 8 ranks in one group; local buffers of 1 MiB.
  const mesh_shape m{1, {8}};
  const shape_t g{8 * 262144};  // f32: 8 MiB global
  const layout_spec R = parse_layout("R", std::array<std::string_view, 1>{"x"}, 1);
  const layout_spec S = parse_layout("S(0)", std::array<std::string_view, 1>{"x"}, 1);
  const layout_spec P = parse_layout("P", std::array<std::string_view, 1>{"x"}, 1);
  const std::int64_t full = 8 * 262144 * 4;
  CHECK(make_plan(S, R, m, g, 4).bus_bytes == full * 7 / 8);      // all_gather: S (n-1)/n, S gathered
  CHECK(make_plan(P, S, m, g, 4).bus_bytes == full * 7 / 8);      // reduce_scatter: S (n-1)/n, S input
  CHECK(make_plan(P, R, m, g, 4).bus_bytes == 2 * full * 7 / 8);  // all_reduce: 2 S (n-1)/n
}

TEST_CASE("illegal transitions are reported with the fix") {
  const layout_spec s0 = parse_layout("S(0),R", names, 2);
  const layout_spec p = parse_layout("P(sum),R", names, 2);
  const layout_spec pm = parse_layout("P(max),R", names, 2);
  CHECK(make_plan(s0, p, m24, {8, 8}, 4).error == plan_error::shard_to_partial);
  CHECK(make_plan(p, pm, m24, {8, 8}, 4).error == plan_error::partial_op_change);
  CHECK_THROWS_WITH_AS(plan_or_throw(s0, p, m24, {8, 8}, 4), doctest::Contains("redistribute that axis to replicate first"), error);
  // partial(sum) on dp -> partial(max) on tp is legal: reduce dp, then mark tp.
  const plan_result r = make_plan(p, parse_layout("R,P(max)", names, 2), m24, {8, 8}, 4);
  CHECK(r.error == plan_error::none);
  CHECK(r.plan.n == 2);
}

TEST_CASE("a slow axis changes the plan") {
  // Partial on both axes -> replicate. With equal links one all_reduce over (dp, tp)
  // wins; when dp crosses hosts, reduce-scatter on the fast axis first so that the slow
  // axis carries a quarter of the bytes.
  const layout_spec pp = parse_layout("P,P", names, 2);
  const layout_spec r = parse_layout("R,R", names, 2);
  const shape_t g{4096, 4096};
  const plan_result fast = make_plan(pp, r, m24, g, 2);
  REQUIRE(fast.plan.n == 1);
  const cost_model slow_dp = cost_model{}.with_axis(0, 87.7 * 0.22, 2.7);
  const plan_result slow = make_plan(pp, r, m24, g, 2, slow_dp);
  CHECK(slow.plan.n == 3);
  CHECK(slow.plan[0].kind == step_kind::reduce_scatter);
  CHECK(slow.time_us < evaluate_plan(pp, fast.plan, m24, g, 2, slow_dp).time_us);
}

TEST_CASE("merged steps on flattened groups") {
  // Gathering a dim split by (dp, tp) is one all_gather on the flattened group.
  const plan_result r = make_plan(parse_layout("S(0),S(0)", names, 2), parse_layout("R,R", names, 2), m24, {1024, 1024}, 4);
  REQUIRE(r.plan.n == 1);
  CHECK(r.plan[0].kind == step_kind::all_gather);
  CHECK(r.plan[0].group.n == 2);
}

TEST_CASE("consecutive all_to_all steps run as one exchange; its traffic per rank") {
  // [S0(dp), S1(tp)] -> [S0(tp), S1(dp)] on 2 x 2: every step is an all_to_all, and the
  // whole transition is a permutation of blocks (ranks (0,1) and (1,0) swap theirs).
  const mesh_shape m22{2, {2, 2}};
  const layout_spec from = parse_layout("S(0),S(1)", names, 2), to = parse_layout("S(1),S(0)", names, 2);
  const shape_t g{4096, 4096};  // (on a tiny tensor the planner prefers fewer, latency-bound steps)
  const plan_result r = make_plan(from, to, m22, g, 4);
  REQUIRE(r.plan.n >= 2);
  const plan_runs runs = runs_of(r.plan);
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].fused());
  CHECK(runs[0].group.mask() == 3u);
  const cost_model cm{};
  const exchange_cost keep = exchange_traffic(from, to, runs[0].group, m22, g, 4, cm, coords_t{0, 0});
  CHECK(keep.bus_bytes == 0);
  CHECK(keep.calls == 0);
  CHECK(keep.time_us == 0);
  const exchange_cost swap = exchange_traffic(from, to, runs[0].group, m22, g, 4, cm, coords_t{0, 1});
  CHECK(swap.bus_bytes == 2048 * 2048 * 4);  // its whole 2048 x 2048 block, to one peer
  CHECK(swap.calls == 0);              // point-to-point
  CHECK(swap.time_us == doctest::Approx(cm.base_us + cm.hop_us[0] + 2048.0 * 2048 * 4 / (cm.GBps[0] * 1e3)));
  // rows over (dp, tp) -> columns over (dp, tp): every pair moves a 1024 x 1024 piece, one all_to_all
  const axis_group both = runs[0].group;
  const layout_spec rows = parse_layout("{0: (dp, tp)}", names, 2), cols = parse_layout("{1: (dp, tp)}", names, 2);
  std::int64_t per_pair = 0;
  CHECK(even_exchange(rows, cols, both, m22, g, coords_t{1, 0}, &per_pair));
  CHECK(per_pair == 1024 * 1024);
  const exchange_cost even = exchange_traffic(rows, cols, both, m22, g, 4, cm, coords_t{1, 0});
  CHECK(even.calls == 1);
  CHECK(even.bus_bytes == 1024 * 1024 * 4 * 3);  // S = 4 pieces, times (n-1)/n
  CHECK_FALSE(even_exchange(from, to, both, m22, g, coords_t{0, 0}, &per_pair));
}

TEST_CASE("a tensor whose bytes overflow int64 is refused, naming its shape and the limit") {
  // 4e9 x 4e9 f32 is 6.4e19 bytes: the byte counts overflowed, edge costs went negative and
  // the search looped forever (tessera-plan hung on this shape).
  const layout_spec from = parse_layout("S(0),S(1)", names, 2), to = parse_layout("R,R", names, 2);
  const shape_t huge{4000000000, 4000000000};
  CHECK(max_plan_bytes(m24) == 0x7fffffffffffffff / 24 / 2);  // 8 ranks: max_plan_steps bounds the sum
  CHECK(max_plan_bytes(mesh_shape{2, {64, 64}}) == 0x7fffffffffffffff / 4096 / 2);
  CHECK_FALSE(plan_fits(m24, huge, 4));
  CHECK_FALSE(plan_fits(m24, shape_t{3037000499, 3037000499}, 4));  // numel fits, bytes do not
  CHECK(plan_fits(m24, shape_t{100000000, 100000000}, 4));
  CHECK(make_plan(from, to, m24, huge, 4).error == plan_error::too_large);
  CHECK(make_plans(from, std::array<layout_spec, 1>{to}, m24, huge, 4)[0].error == plan_error::too_large);
  CHECK(evaluate_plan(from, gather_first_plan(from, to), m24, huge, 4).error == plan_error::too_large);
  CHECK_THROWS_WITH_AS(plan_or_throw(from, to, m24, huge, 4),
                       "tessera::plan: shape 4000000000 x 4000000000 of 4-byte elements is too large to plan on 8 "
                       "ranks: the planner counts bytes in int64 and takes at most 192153584101141162 bytes there, "
                       "blocks padded (tessera::max_plan_bytes); plan a smaller shape",
                       error);
  // a large tensor that fits plans as before
  const plan_result big = plan_or_throw(from, to, m24, shape_t{100000000, 100000000}, 4);
  CHECK(big.bus_bytes > 0);
  CHECK(big.time_us > 0);
  // the search itself ends when edge costs are not usable: it skips an edge whose time is
  // negative or not finite instead of relaxing it for ever (a negative base latency made
  // every collective negative and the search loop)
  cost_model negative;
  negative.base_us = -100;
  int found = -1;
  const detail::search_result s =
      detail::search(from, &to, 1, &found, m24, shape_t{1024, 4096}, 4, negative, true);
  CHECK(found == -1);  // only local steps were usable: R,R is not reached
  CHECK(s.explored >= 1);
}

TEST_CASE("a cost model that no link has is refused, naming the constant") {
  // A negative base latency used to reach the search, which skipped every collective and
  // said "the search space was exhausted"; a NaN bandwidth made every edge unusable alike.
  const layout_spec from = parse_layout("S(0),S(1)", names, 2), to = parse_layout("R,R", names, 2);
  const shape_t g{1024, 4096};
  CHECK_FALSE(check_cost_model(cost_model{}));
  cost_model negative;
  negative.base_us = -100;
  CHECK(check_cost_model(negative).field == cost_model_problem::base_us);
  CHECK(make_plan(from, to, m24, g, 4, negative).error == plan_error::bad_cost_model);
  CHECK(make_plans(from, std::array<layout_spec, 1>{to}, m24, g, 4, negative)[0].error == plan_error::bad_cost_model);
  CHECK(evaluate_plan(from, gather_first_plan(from, to), m24, g, 4, negative).error == plan_error::bad_cost_model);
  CHECK_THROWS_WITH_AS(plan_or_throw(from, to, m24, g, 4, negative),
                       "tessera::plan: cost_model::base_us is -100.000000 but must be a number of "
                       "microseconds from 0 to 1e12; every constant of the cost model is a link's latency or "
                       "bandwidth (plan/cost_model.hpp)",
                       error);
  // each constant, with its axis or collective
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const cost_model no_bandwidth = cost_model{}.with_axis(1, 0.0, 0.6);
  CHECK(check_cost_model(no_bandwidth).field == cost_model_problem::GBps);
  CHECK(check_cost_model(no_bandwidth).index == 1);
  CHECK(cost_model_text(no_bandwidth, 2).find("cost_model::GBps[1] is 0.000000 but must be a number of GB/s from "
                                              "1e-6 to 1e12") == 0);
  CHECK(cost_model_text(cost_model{}.with_axis(0, nan, 0.6), 2).find("cost_model::GBps[0] is nan") == 0);
  CHECK(cost_model_text(cost_model{}.with_axis(0, 10, inf), 2).find("cost_model::hop_us[0] is inf") == 0);
  // only the mesh's axes are links: a third axis's constants do not matter on two axes
  CHECK_FALSE(check_cost_model(cost_model{}.with_axis(2, 0.0, -1.0), 2));
  CHECK(check_cost_model(cost_model{}.with_axis(2, 0.0, -1.0), 3).index == 2);
  cost_model scale;
  scale.coll_scale[static_cast<std::size_t>(coll_kind::all_reduce)] = -1;
  CHECK(cost_model_text(scale).find("cost_model::coll_scale[all_reduce] is -1.000000 but must be a number from "
                                    "1e-6 to 1e6") == 0);
  // a negative correction is a correction; a negative latency is not
  cost_model faster_reduce;
  faster_reduce.coll_base_us[static_cast<std::size_t>(coll_kind::reduce_scatter)] = -2;
  CHECK_FALSE(check_cost_model(faster_reduce));
  CHECK(make_plan(from, to, m24, g, 4, faster_reduce).error == plan_error::none);
  faster_reduce.coll_base_us[static_cast<std::size_t>(coll_kind::reduce_scatter)] = -7;
  CHECK(cost_model_text(faster_reduce).find("cost_model::coll_base_us[reduce_scatter] is -7.000000 but must be "
                                            "a number of microseconds from -1e12 to 1e12, and base_us plus it (that "
                                            "collective's latency) not negative") == 0);
}

TEST_CASE("local copies (cost_model::copy_GBps): what each step copies, and the plans it changes") {
  using detail::copied_numel;
  // all_gather onto dim 0 lands in place; onto dim 1 (dim 0 longer than 1) it unpacks
  CHECK(copied_numel(step_kind::all_gather, 0, -1, shape_t{512, 1024}, shape_t{1024, 1024}) == 0);
  CHECK(copied_numel(step_kind::all_gather, 1, -1, shape_t{1024, 512}, shape_t{1024, 1024}) == 1024 * 1024);
  CHECK(copied_numel(step_kind::all_gather, 1, -1, shape_t{1, 512}, shape_t{1, 1024}) == 0);
  // reduce_scatter packs its input when the dim it scatters is not the leading one
  CHECK(copied_numel(step_kind::reduce_scatter, 0, -1, shape_t{1024, 1024}, shape_t{512, 1024}) == 0);
  CHECK(copied_numel(step_kind::reduce_scatter, 1, -1, shape_t{1024, 1024}, shape_t{1024, 512}) == 1024 * 1024);
  // all_to_all dim 1 -> 0: pieces along dim 0 of the input are contiguous, the output unpacks
  CHECK(copied_numel(step_kind::all_to_all, 1, 0, shape_t{1024, 512}, shape_t{512, 1024}) == 512 * 1024);
  CHECK(copied_numel(step_kind::all_to_all, 0, 1, shape_t{512, 1024}, shape_t{1024, 512}) == 512 * 1024);
  CHECK(copied_numel(step_kind::all_reduce, -1, -1, shape_t{8, 8}, shape_t{8, 8}) == 0);
  CHECK(copied_numel(step_kind::local_slice, 1, -1, shape_t{8, 8}, shape_t{8, 4}) == 32);

  // S(1) -> R on 2 ranks: DTensor's model gathers dim 1 at once; when copies cost (10 GB/s
  // here) the planner moves the shard to dim 0 first and gathers there in place
  const std::array<std::string_view, 1> b{"b"};
  const mesh_shape m2{1, {2}};
  const shape_t g{1024, 1024};
  const layout_spec s1 = parse_layout("S(1)", b, 2), r = parse_layout("R", b, 2);
  const plan_result plain = make_plan(s1, r, m2, g, 4);
  REQUIRE(plain.plan.n == 1);
  CHECK(plain.plan[0].kind == step_kind::all_gather);
  cost_model copies;
  copies.copy_GBps = 10;
  const plan_result counted = make_plan(s1, r, m2, g, 4, copies);
  REQUIRE(counted.plan.n == 2);
  CHECK(counted.plan[0].kind == step_kind::all_to_all);
  CHECK(counted.plan[1].kind == step_kind::all_gather);
  CHECK(counted.plan[1].dim == 0);
  // its time: the two collectives and the all_to_all's unpacking of 2 MiB at 10 GB/s
  const double comm = evaluate_plan(s1, counted.plan, m2, g, 4).time_us;
  CHECK(counted.time_us == doctest::Approx(comm + 512.0 * 1024 * 4 / 10e3));
  // the one-step plan costs its unpacking of the whole 4 MiB output
  CHECK(evaluate_plan(s1, plain.plan, m2, g, 4, copies).time_us ==
        doctest::Approx(plain.time_us + 1024.0 * 1024 * 4 / 10e3));
  // a local slice copies its output block
  const plan_result slice = make_plan(r, s1, m2, g, 4, copies);
  CHECK(slice.time_us == doctest::Approx(1024.0 * 512 * 4 / 10e3));
  CHECK(make_plan(r, s1, m2, g, 4).time_us == 0);
  // an exchange copies what the runtime's all_to_all decides on the blocks: S(0) -> S(1)
  // on 2 ranks packs its [4, 8] block (pieces are columns) and receives rows in place,
  // as the single step's rule says; the 2-D swap's exchange only copies its own piece
  // (nothing moves between ranks (0, 0): it keeps its block)
  const layout_spec r0 = parse_layout("S(0)", b, 2), r1 = parse_layout("S(1)", b, 2);
  axis_group gb;
  gb.push(0);
  CHECK(exchange_copied_numel(r0, r1, gb, m2, shape_t{8, 8}, coords_t{}) == 32);
  CHECK(copied_numel(step_kind::all_to_all, 0, 1, shape_t{4, 8}, shape_t{8, 4}) == 32);
  const layout_spec ab = parse_layout("S(0),S(1)", names, 2), ba = parse_layout("S(1),S(0)", names, 2);
  axis_group both;
  both.push(0);
  both.push(1);
  const mesh_shape m22{2, {2, 2}};
  CHECK(exchange_copied_numel(ab, ba, both, m22, shape_t{8, 8}, coords_t{}) == 16);
  // a negative or non-finite copy speed is refused by name
  copies.copy_GBps = -1;
  CHECK(cost_model_text(copies).find("cost_model::copy_GBps is -1.000000 but must be 0 (copies not counted) or a "
                                     "number of GB/s from 1e-6 to 1e12") == 0);
  CHECK(make_plan(s1, r, m2, g, 4, copies).error == plan_error::bad_cost_model);
  // tiny or huge constants are refused too: every accepted model gives finite plan times
  copies.copy_GBps = 1e-300;
  CHECK(check_cost_model(copies).field == cost_model_problem::copy_GBps);
  copies.copy_GBps = 0;
  CHECK_FALSE(check_cost_model(copies));
  CHECK(check_cost_model(cost_model{}.with_axis(0, 1e13, 0.6), 1).field == cost_model_problem::GBps);
  CHECK(check_cost_model(cost_model{}.with_axis(0, 1e-6, 1e12), 1).field == cost_model_problem::none);
}
