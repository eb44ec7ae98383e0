// tessera/bench/measure.hpp: timing a layout transition on real ranks, as tessera-plan
// --run, the one-line benchmark (bench/transition.hpp) and the planner check do it. No
// dependency beyond the core.
//
//   tessera::bench::timing t = tessera::bench::time_calls(world, {.warmup = 3, .calls = 20},
//                                                          [&] { x.redistribute(y); });
//   t.median_us   // of the slowest rank's time per call (a barrier before each call)
//
// What it measures: every rank runs `warmup` untimed calls, then `calls` timed ones, each
// after a barrier; a call's time is that of its slowest rank (one all_reduce(max) of the
// per-call times after the loop, outside the timing). Median, min and max are over calls.
//
// Also here: executed_cost() (the cost model's bytes and time for a plan as the runtime
// executes it, consecutive all_to_alls as one exchange), candidate_plans() (the least-cost
// plan, the next best plans by their first step, the gather-first baseline),
// run_plan_checked() (runs a run-time plan on a known tensor and checks every element)
// and with_device_mesh() (a device_mesh for a mesh shape known only at run time).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tessera/comm/any_communicator.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/plan/planner.hpp>
#include <tessera/plan/runs.hpp>
#include <tessera/tensor/detail/redistribute.hpp>
#include <tessera/tensor/device_mesh.hpp>

namespace tessera::bench {

struct time_options {
  int warmup = 3;  ///< untimed calls first (the first creates the process groups)
  int calls = 20;  ///< timed calls; every rank must pass the same number
};

/// Times of the slowest rank per call, in microseconds.
struct timing {
  std::vector<double> per_call_us;
  double median_us = 0, min_us = 0, max_us = 0;
};

inline timing summarize(std::vector<double> per_call_us) {
  timing t;
  t.per_call_us = std::move(per_call_us);
  if (t.per_call_us.empty()) return t;
  std::vector<double> s = t.per_call_us;
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  t.median_us = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  t.min_us = s.front();
  t.max_us = s.back();
  return t;
}

/// Runs `call` warmup + calls times on this rank (collective: every rank of `world` calls
/// time_calls with the same options); returns the slowest rank's time per timed call.
template <class Call>
timing time_calls(comm::any_communicator& world, const time_options& o, Call&& call) {
  for (int i = 0; i < o.warmup; ++i) {
    world.barrier().wait();
    call();
  }
  std::vector<double> us(static_cast<std::size_t>(std::max(o.calls, 0)));
  for (auto& u : us) {
    world.barrier().wait();
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const auto t1 = std::chrono::steady_clock::now();
    u = std::chrono::duration<double, std::micro>(t1 - t0).count();
  }
  if (!us.empty()) world.all_reduce(us.data(), us.data(), us.size(), comm::dtype::f64, comm::reduce_op::max).wait();
  return summarize(std::move(us));
}

/// The cost model's view of a plan as the runtime executes it (plan/runs.hpp): steps one
/// by one, a run of consecutive all_to_alls as one exchange. Bytes are the most any rank
/// moves (nccl-tests' bus bytes, summed over the runs); time is the sum of the runs'
/// modelled times (for an exchange, its slowest rank's) and their local copies' (run_copy_us).
struct executed {
  std::int64_t bus_bytes = 0;
  double time_us = 0;
  int collectives = 0;  ///< collective calls or exchanges that communicate
};

inline executed executed_cost(const layout_spec& src, const plan_value& p, const mesh_shape& m, const shape_t& g,
                              std::int64_t elem_bytes, const cost_model& cm = {}) {
  executed e;
  const auto ls = plan_layouts(src, p);
  const plan_runs runs = runs_of(p);
  for (int k = 0; k < runs.size(); ++k) {
    const step_run& run = runs[k];
    const layout_spec& before = ls[static_cast<std::size_t>(run.begin)];
    const layout_spec& after = ls[static_cast<std::size_t>(run.end)];
    if (run.fused()) {
      exchange_cost most;
      for (std::int64_t r = 0; r < world_size(m); ++r) {
        const exchange_cost c = exchange_traffic(before, after, run.group, m, g, elem_bytes, cm, coords_of(m, r));
        if (c.bus_bytes > most.bus_bytes) most.bus_bytes = c.bus_bytes;
        if (c.time_us > most.time_us) most.time_us = c.time_us;
      }
      e.bus_bytes += most.bus_bytes;
      e.time_us += most.time_us + run_copy_us(before, p, run, m, g, elem_bytes, cm);
      e.collectives += most.bus_bytes > 0;
    } else {
      const step_cost c = cost_of(p[run.begin], before, after, m, g, elem_bytes, cm);
      e.bus_bytes += c.bus_bytes;
      e.time_us += c.time_us + run_copy_us(before, p, run, m, g, elem_bytes, cm);
      e.collectives += c.bus_bytes > 0;
    }
  }
  return e;
}

/// A plan the measurement compares, with where it comes from.
struct candidate {
  std::string role;  ///< "chosen", "gather-first", "next best (first step ...)"
  plan_value plan;
  double planner_us = 0;  ///< the planner's modelled time (evaluate_plan: a fused run as one all_to_all)
  executed model;         ///< the modelled cost as executed
};

/// The least-cost plan, then up to `next_best` other plans the search considered (for
/// each step out of the source, the least-cost plan that starts with it; the cheapest
/// distinct ones), then the gather-first baseline (when it differs from all of them).
inline std::vector<candidate> candidate_plans(const layout_spec& src, const layout_spec& dst, const mesh_shape& m,
                                              const shape_t& g, std::int64_t elem_bytes, const cost_model& cm,
                                              int next_best, const std::vector<std::string_view>& names) {
  std::vector<candidate> out;
  const plan_result best = plan_or_throw(src, dst, m, g, elem_bytes, cm);
  out.push_back({"chosen", best.plan, best.time_us, executed_cost(src, best.plan, m, g, elem_bytes, cm)});
  auto known = [&](const plan_value& p) {
    for (const candidate& c : out)
      if (c.plan == p) return true;
    return false;
  };
  if (next_best > 0) {
    std::vector<candidate> alts;
    detail::goal gl;
    gl.add(dst);
    const std::uint64_t k = detail::pack(src);
    const detail::view v = detail::make_view(k, src.rank, src.mesh_ndim, m, g);
    detail::for_each_step(k, v, src.rank, src.mesh_ndim, gl, m, g, cm, [&](const detail::edge& ed) {
      const plan_step first = detail::decode(ed.step);
      if (!can_apply(src, first)) return;
      const layout_spec mid = apply(src, first);
      const plan_result rest = make_plan(mid, dst, m, g, elem_bytes, cm);
      if (rest.error != plan_error::none || rest.plan.n + 1 > max_plan_steps) return;
      plan_value p;
      p.push(first);
      for (int i = 0; i < rest.plan.n; ++i) p.push(rest.plan[i]);
      p = detail::merge_local_slices(p);
      if (known(p)) return;
      for (const candidate& a : alts)
        if (a.plan == p) return;
      const plan_result r = evaluate_plan(src, p, m, g, elem_bytes, cm);
      alts.push_back({"next best (first step " + to_string(first, names) + ")", p, r.time_us,
                      executed_cost(src, p, m, g, elem_bytes, cm)});
    });
    std::stable_sort(alts.begin(), alts.end(),
                     [](const candidate& a, const candidate& b) { return a.planner_us < b.planner_us; });
    for (std::size_t i = 0; i < alts.size() && static_cast<int>(i) < next_best; ++i) out.push_back(alts[i]);
  }
  const plan_value gf = gather_first_plan(src, dst);
  if (!known(gf))
    out.push_back({"gather-first", gf, evaluate_plan(src, gf, m, g, elem_bytes, cm).time_us,
                   executed_cost(src, gf, m, g, elem_bytes, cm)});
  return out;
}

/// The values run_plan_checked distributes: small integers, exact in bf16 and f32, and
/// exact in sums over up to 16 ranks.
inline float check_value(const std::array<std::int64_t, max_tensor_rank>& i, int rank) {
  std::int64_t v = 0;
  for (int d = 0; d < rank; ++d) v = v * 7 + i[static_cast<std::size_t>(d)];
  return static_cast<float>(v % 13);
}

/// This rank's block of the known global tensor in layout `l` (sum-partial: the values at
/// index 0 of the partial group, zero elsewhere; avg/max/min: the values everywhere).
template <class T>
std::vector<T> known_block(const layout_spec& l, const mesh_shape& m, const shape_t& g, const coords_t& me) {
  const box b = local_box(l, m, g, me);
  std::vector<T> v(static_cast<std::size_t>(b.numel()));
  bool zero = false;
  if (l.has_partial() && l.op == reduce::sum)
    for (int a = 0; a < l.mesh_ndim; ++a) zero = zero || (l.is_partial(a) && me[static_cast<std::size_t>(a)] != 0);
  if (zero || v.empty()) return v;
  std::array<std::int64_t, max_tensor_rank> idx{};
  for (int d = 0; d < b.rank; ++d) idx[static_cast<std::size_t>(d)] = b.offset[static_cast<std::size_t>(d)];
  for (auto& x : v) {
    x = static_cast<T>(check_value(idx, g.rank));
    for (int d = b.rank - 1; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      if (++idx[u] < b.offset[u] + b.size[u]) break;
      idx[u] = b.offset[u];
    }
  }
  return v;
}

/// Runs plan `p` (src -> dst) once on the known tensor and checks this rank's result:
/// element by element against the known block where dst is not partial, else after
/// reducing the partial axes (a second run-time plan to dst with those axes replicated).
/// Returns "" or what differs (collective).
template <class T, class Mesh>
std::string run_plan_checked(device_mesh<Mesh>& dm, const layout_spec& src, const layout_spec& dst, const plan_value& p,
                             const shape_t& g) {
  const mesh_shape& m = dm.shape();
  const std::vector<T> in = known_block<T>(src, m, g, dm.coords());
  std::vector<T> out(static_cast<std::size_t>(local_box(dst, m, g, dm.coords()).numel()));
  detail::run_plan<T>(dm, src, p, g, in.data(), out.data());
  layout_spec l = dst;
  if (dst.has_partial()) {
    layout_spec full = dst;
    for (int a = 0; a < dst.mesh_ndim; ++a)
      if (dst.is_partial(a)) full.clear_partial(a);
    const plan_result r = plan_or_throw(dst, full, m, g, static_cast<std::int64_t>(sizeof(T)));
    std::vector<T> red(static_cast<std::size_t>(local_box(full, m, g, dm.coords()).numel()));
    detail::run_plan<T>(dm, dst, r.plan, g, out.data(), red.data());
    out = std::move(red);
    l = full;
  }
  const std::vector<T> want = known_block<T>(l, m, g, dm.coords());
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(static_cast<float>(out[i]) == static_cast<float>(want[i])))
      return "rank " + std::to_string(dm.rank()) + ": element " + std::to_string(i) + " of its block is " +
             std::to_string(static_cast<float>(out[i])) + ", expected " + std::to_string(static_cast<float>(want[i]));
  return {};
}

namespace detail {
template <std::size_t I>
inline constexpr char digit[2] = {static_cast<char>('0' + I), 0};
template <std::size_t I>
inline constexpr fixed_string<2> axis_name{digit<I>};
template <class Seq>
struct dyn_mesh_of;
template <std::size_t... I>
struct dyn_mesh_of<std::index_sequence<I...>> {
  using type = mesh<axis<axis_name<I>>...>;
};
}  // namespace detail

/// A mesh of N dynamic axes named "0", "1", ... (what a run-time mesh shape binds to).
template <int N>
using dynamic_mesh = typename detail::dyn_mesh_of<std::make_index_sequence<static_cast<std::size_t>(N)>>::type;

/// Calls f(device_mesh<dynamic_mesh<m.ndim>>&) with a device mesh of shape `m` over
/// `world` (whose size must be m's number of ranks).
template <class F>
void with_device_mesh(const mesh_shape& m, comm::any_communicator world, F&& f) {
  auto go = [&]<std::size_t... I>(std::index_sequence<I...>) {
    using M = dynamic_mesh<static_cast<int>(sizeof...(I))>;
    M mesh_(world_size(m), {std::pair<std::string_view, std::int64_t>{M::names[I], m[static_cast<int>(I)]}...});
    device_mesh<M> dm(mesh_, world);
    f(dm);
  };
  switch (m.ndim) {
    case 1: go(std::make_index_sequence<1>{}); break;
    case 2: go(std::make_index_sequence<2>{}); break;
    case 3: go(std::make_index_sequence<3>{}); break;
    case 4: go(std::make_index_sequence<4>{}); break;
    case 5: go(std::make_index_sequence<5>{}); break;
    case 6: go(std::make_index_sequence<6>{}); break;
    case 7: go(std::make_index_sequence<7>{}); break;
    case 8: go(std::make_index_sequence<8>{}); break;
    default: throw error("tessera::bench::with_device_mesh: a mesh needs 1 to 8 axes");
  }
}

}  // namespace tessera::bench
