// tessera/plan/planner.hpp: the redistribution planner (constexpr; one planner for both
// compile time and run time).
//
// It searches the graph whose nodes are layouts and whose edges are the steps of
// collective.hpp (single axes and flattened groups of axes) for the path of least cost
// under cost_model.hpp (A* / Dijkstra; edge costs depend on the local block size of the
// layouts at both ends). A plan is costed as it executes (plan/runs.hpp): a run of
// consecutive all_to_all steps is one exchange, so the search takes such runs (up to
// detail::max_run_steps steps) as single edges costed as their exchange. Unlike DTensor's default greedy order it may slice first to
// shrink what later collectives move, reduce-scatter instead of all-reduce, move an axis
// between dimensions with an all-to-all, and merge steps of several axes into one
// collective on a flattened group when that is cheaper.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/core/config.hpp>
#include <tessera/core/error.hpp>
#include <tessera/layout/layout_spec.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/plan/collective.hpp>
#include <tessera/plan/cost_model.hpp>
#include <tessera/plan/detail/search.hpp>
#include <tessera/plan/detail/search_runs.hpp>
#include <tessera/plan/runs.hpp>

namespace tessera {

enum class plan_error : std::uint8_t {
  none,
  invalid_layout,     ///< a layout is malformed (see layout_error)
  rank_mismatch,      ///< source and target describe tensors of different rank
  mesh_mismatch,      ///< source and target are on meshes of different rank
  shard_to_partial,   ///< an axis goes from shard to partial
  partial_op_change,  ///< an axis goes from partial(op1) to partial(op2)
  too_many_steps,     ///< the plan does not fit max_plan_steps
  too_large,          ///< the tensor has more bytes than max_plan_bytes (int64 byte counts)
  bad_cost_model,     ///< a cost model constant is not finite or out of range (check_cost_model)
};

constexpr std::string_view describe(plan_error e) noexcept {
  switch (e) {
    case plan_error::none: return "no error";
    case plan_error::invalid_layout: return "a layout is malformed";
    case plan_error::rank_mismatch: return "source and target layouts describe tensors of different rank";
    case plan_error::mesh_mismatch: return "source and target layouts must be on the same mesh";
    case plan_error::shard_to_partial:
      return "shard -> partial on one axis is not a transition (DTensor forbids it too); "
             "redistribute that axis to replicate first, then to partial";
    case plan_error::partial_op_change:
      return "partial(op1) -> partial(op2) on one axis is not a transition; reduce to replicate "
             "or shard first";
    case plan_error::too_many_steps: return "the plan needs more steps than tessera::max_plan_steps";
    case plan_error::too_large:
      return "the tensor has more bytes than tessera::max_plan_bytes on this mesh (the planner counts bytes "
             "in int64); plan a smaller shape";
    case plan_error::bad_cost_model:
      return "a constant of the cost model is out of its range (tessera::check_cost_model; "
             "tessera::cost_model_text names it)";
  }
  return "?";
}

/// Why a transition between two layouts is illegal (`none` when it is legal).
constexpr plan_error check_transition(const layout_spec& src, const layout_spec& dst) noexcept {
  if (validate(src) != layout_error::none || validate(dst) != layout_error::none)
    return plan_error::invalid_layout;
  if (src.rank != dst.rank) return plan_error::rank_mismatch;
  if (src.mesh_ndim != dst.mesh_ndim) return plan_error::mesh_mismatch;
  for (int a = 0; a < src.mesh_ndim; ++a) {
    if (src.is_sharded(a) && dst.is_partial(a)) return plan_error::shard_to_partial;
    if (src.is_partial(a) && dst.is_partial(a) && src.op != dst.op) return plan_error::partial_op_change;
  }
  return plan_error::none;
}

/// The mesh axis on which check_transition found its error (-1: none, or not about an axis).
constexpr int transition_error_axis(const layout_spec& src, const layout_spec& dst) noexcept {
  if (src.mesh_ndim != dst.mesh_ndim) return -1;
  for (int a = 0; a < src.mesh_ndim; ++a) {
    if (src.is_sharded(a) && dst.is_partial(a)) return a;
    if (src.is_partial(a) && dst.is_partial(a) && src.op != dst.op) return a;
  }
  return -1;
}

namespace detail {
/// The mesh's rank count, or 0 past int64 (axes below 1 count as 1: not checked here).
constexpr std::int64_t ranks_or_zero(const mesh_shape& m) noexcept {
  std::int64_t w = 1;
  for (int a = 0; a < m.ndim; ++a) {
    const std::int64_t s = m[a] > 0 ? m[a] : 1;
    if (w > 0x7fffffffffffffff / s) return 0;
    w *= s;
  }
  return w;
}
}  // namespace detail

/// The most bytes a tensor may have for the planner on mesh `m` (0: none), counted with
/// its blocks padded (plan_fits). Its byte counts are int64: a step's bus bytes are its
/// buffer (at most the padded tensor) times 2 x (ranks - 1) before the division by the
/// group size, and a plan sums at most max_plan_steps steps of at most twice the buffer.
constexpr std::int64_t max_plan_bytes(const mesh_shape& m) noexcept {
  const std::int64_t w = detail::ranks_or_zero(m);
  return w ? 0x7fffffffffffffff / (w > max_plan_steps ? w : max_plan_steps) / 2 : 0;
}

/// True when a tensor of shape `global` with `elem_bytes`-byte elements has at most
/// max_plan_bytes(m) bytes, its blocks padded: numel + ranks x numel / (its shortest
/// extent), a bound on any buffer of a collective (a gather of blocks rounded up to the
/// group); counted without overflow. Extents below 1 are not checked here.
constexpr bool plan_fits(const mesh_shape& m, const shape_t& global, std::int64_t elem_bytes) noexcept {
  const std::int64_t limit = max_plan_bytes(m);
  const std::int64_t eb = elem_bytes > 0 ? elem_bytes : 1;
  if (eb > limit) return false;
  const std::int64_t most = limit / eb;  // elements
  std::int64_t n = 1, shortest = 0;
  for (int d = 0; d < global.rank; ++d) {
    const std::int64_t e = global[d] > 0 ? global[d] : 1;
    if (n > most / e) return false;
    n *= e;
    shortest = shortest == 0 || e < shortest ? e : shortest;
  }
  const std::int64_t w = detail::ranks_or_zero(m);  // > 0: max_plan_bytes(m) > 0
  const std::int64_t slab = shortest ? n / shortest : 1;
  return slab <= (most - n) / w;
}

namespace detail {
/// The errors of a plan's size and cost model (none: it can be searched and costed).
constexpr plan_error size_and_model_error(const mesh_shape& m, const shape_t& global, std::int64_t elem_bytes,
                                          const cost_model& cm) noexcept {
  if (!plan_fits(m, global, elem_bytes)) return plan_error::too_large;
  if (check_cost_model(cm, m.ndim)) return plan_error::bad_cost_model;
  return plan_error::none;
}
}  // namespace detail

struct plan_result {
  plan_value plan{};
  plan_error error = plan_error::none;
  double time_us = 0;           ///< modelled time of the plan
  std::int64_t bus_bytes = 0;   ///< bytes each rank moves, summed over steps
  int explored = 0;             ///< layouts the search settled (for the docs' budget)
};

/// Modelled time and traffic of a plan as it executes (plan/runs.hpp): steps one by one,
/// a run of consecutive all_to_all steps as one exchange, costed as one all_to_all over
/// the union of the steps' groups (what the search charges for it, detail::for_each_run).
constexpr plan_result evaluate_plan(const layout_spec& src, const plan_value& p, const mesh_shape& m,
                                    const shape_t& global, std::int64_t elem_bytes,
                                    const cost_model& cm = {}) noexcept {
  plan_result r;
  r.plan = p;
  r.error = detail::size_and_model_error(m, global, elem_bytes, cm);
  if (r.error != plan_error::none) return r;
  const plan_runs runs = runs_of(p);
  layout_spec l = src;
  for (int k = 0; k < runs.size(); ++k) {
    const step_run& run = runs[k];
    layout_spec next = l;
    for (int i = run.begin; i < run.end; ++i) next = apply(next, p[i]);
    plan_step s = p[run.begin];
    s.group = run.group;  // a fused run: one all_to_all over the union group
    const step_cost c = cost_of(s, l, next, m, global, elem_bytes, cm);
    r.time_us += c.time_us + run_copy_us(l, p, run, m, global, elem_bytes, cm);
    r.bus_bytes += c.bus_bytes;
    l = next;
  }
  return r;
}

namespace detail {

/// The search shared by make_plan (one target, A*) and make_plans (many targets,
/// Dijkstra until every target is settled). Returns the node list; `found[i]` is the
/// node of targets[i] or -1.
struct search_result {
  std::vector<search_node> nodes;
  std::vector<std::uint64_t> runs;  ///< the steps of run edges (see relax in search())
  int explored = 0;
};

constexpr search_result search(const layout_spec& src, const layout_spec* targets, int n_targets, int* found,
                               const mesh_shape& m, const shape_t& global, std::int64_t elem_bytes,
                               const cost_model& cm, bool use_heuristic) {
  search_result res;
  std::vector<search_node>& nodes = res.nodes;
  const int R = src.rank, A = src.mesh_ndim;
  goal gl;
  std::vector<std::uint64_t> target_keys;  // (not vector(n): clang 14 rejects it in constexpr)
  target_keys.reserve(static_cast<std::size_t>(n_targets));
  for (int t = 0; t < n_targets; ++t) {
    gl.add(targets[t]);
    target_keys.push_back(pack(targets[t]));
    found[t] = -1;
  }
  use_heuristic = use_heuristic && n_targets == 1;
  // The node of each target once reached, for the bound on what a path may still cost.
  std::vector<int> target_node;
  target_node.reserve(static_cast<std::size_t>(n_targets));
  for (int t = 0; t < n_targets; ++t) target_node.push_back(-1);
  int unreached = n_targets;
  // Open addressing from packed layout to node; doubled when half full.
  int bits = table_bits;
  std::vector<int> table(std::size_t{1} << bits, -1);
  open_list open;
  nodes.reserve(64);
  open.h.reserve(64);
  auto slot = [&](std::uint64_t key) {
    std::uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> (64 - bits);
    const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
    while (table[static_cast<std::size_t>(h)] >= 0 && nodes[static_cast<std::size_t>(table[static_cast<std::size_t>(h)])].key != key)
      h = (h + 1) & mask;
    return static_cast<std::size_t>(h);
  };
  auto find_or_add = [&](std::uint64_t key, bool& added) {
    added = false;
    std::size_t h = slot(key);
    if (table[h] >= 0) return table[h];
    if (static_cast<int>(nodes.size()) >= max_nodes) return -1;
    if (2 * (nodes.size() + 1) > table.size()) {
      ++bits;
      table.assign(std::size_t{1} << bits, -1);
      for (std::size_t i = 0; i < nodes.size(); ++i) table[slot(nodes[i].key)] = static_cast<int>(i);
      h = slot(key);
    }
    table[h] = static_cast<int>(nodes.size());
    for (int t = 0; t < n_targets; ++t)
      if (key == target_keys[static_cast<std::size_t>(t)]) {
        target_node[static_cast<std::size_t>(t)] = static_cast<int>(nodes.size());
        --unreached;
      }
    nodes.push_back(search_node{key, 0, 0, -1, 0, false});
    added = true;
    return static_cast<int>(nodes.size()) - 1;
  };

  double max_gbps = 0;
  for (int a = 0; a < A; ++a) max_gbps = cm.GBps[static_cast<std::size_t>(a)] > max_gbps ? cm.GBps[static_cast<std::size_t>(a)] : max_gbps;
  const view tv = make_view(target_keys[0], R, A, m, global);
  // Relaxes the edge of time `t` from node `from` (of cost `base`) to `key`; `step` is a
  // step (encode()d), or `run` a run of all_to_all steps, stored in res.runs and marked in
  // the step with bit 63 (offset in bits 0-31, length in bits 32-39).
  auto relax = [&](int from, double base, std::uint64_t key, double t, std::uint64_t step, const run_edge* run) {
    // (a cost that is negative or not finite would let a path get cheaper forever: such
    // an edge is not taken; make_plan refuses the tensors whose bytes could make one)
    if (!(t >= 0 && t <= 1e300)) return;
    const double c = base + t;
    bool is_new = false;
    const int idx = find_or_add(key, is_new);
    if (idx < 0) return;
    search_node& nn = nodes[static_cast<std::size_t>(idx)];
    if (!is_new && c >= nn.cost) return;
    const double h = !use_heuristic ? 0.0
                     : is_new       ? lower_bound(key, target_keys[0], tv, R, A, m, global, elem_bytes, max_gbps, cm)
                                    : nn.f - nn.cost;
    if (run) {
      step = (std::uint64_t{1} << 63) | (static_cast<std::uint64_t>(run->n) << 32) | res.runs.size();
      for (int i = 0; i < run->n; ++i) res.runs.push_back(run->steps[static_cast<std::size_t>(i)]);
    }
    nn.cost = c;
    nn.f = c + h;
    nn.parent = from;
    nn.step = step;
    nn.settled = false;  // re-open: the heuristic is admissible but need not be consistent
    open.push({nn.f, idx});
  };
  // What a path through a node of cost `base` may still cost and be the best to a target
  // not yet settled (once every target is reached): runs that cost more are skipped.
  auto limit_at = [&](double base) {
    if (unreached > 0) return 1e300;
    double worst = 0;
    for (int t = 0; t < n_targets; ++t)
      if (found[t] < 0) {
        const double c = nodes[static_cast<std::size_t>(target_node[static_cast<std::size_t>(t)])].cost;
        worst = c > worst ? c : worst;
      }
    return worst - base;
  };

  bool added = false;
  find_or_add(pack(src), added);
  open.push({0.0, 0});
  int remaining = n_targets;
  while (!open.h.empty() && remaining > 0) {
    const open_entry e = open.pop();
    if (e.node < 0) {
      // The runs of all_to_all steps out of a settled node, costed as the one exchange the
      // runtime makes of each (for_each_run). Searching them is most of the work at a node,
      // so it waits in the open list until the search comes to the least they can cost
      // (run_bound): every layout they reach is at least that far from the source (plus a
      // heuristic >= 0), so nothing cheaper is settled later than it would have been. A
      // search that settles its targets first never searches them. (A path that continues
      // a run with more all_to_alls costs more than it executes as, since the runtime fuses
      // them; the run edge to where it ends, up to max_run_steps, costs it exactly. Marking
      // run ends as states of their own would make every path exact, but doubles the
      // states.)
      const int top = -e.node - 1;
      const std::uint64_t cur_key = nodes[static_cast<std::size_t>(top)].key;
      const double cur_cost = nodes[static_cast<std::size_t>(top)].cost;
      if (!nodes[static_cast<std::size_t>(top)].settled || nodes[static_cast<std::size_t>(top)].runs_cost <= cur_cost)
        continue;  // re-opened (settles again) or searched already
      nodes[static_cast<std::size_t>(top)].runs_cost = cur_cost;
      const double limit = limit_at(cur_cost);
      if (e.f - cur_cost >= limit) continue;  // (e.f: cur_cost + run_bound())
      const view v = make_view(cur_key, R, A, m, global);
      // A layout settled at no more than this node's cost has its own runs searched (or
      // will have before they can matter).
      auto done = [&](std::uint64_t key) {
        const int z = table[slot(key)];
        return z >= 0 && nodes[static_cast<std::size_t>(z)].settled && nodes[static_cast<std::size_t>(z)].cost <= cur_cost;
      };
      for_each_run(cur_key, v, R, A, gl, m, global, elem_bytes, cm, limit, done,
                   [&](const run_edge& run, double t) { relax(top, cur_cost, run.key, t, 0, &run); });
      continue;
    }
    const int top = e.node;
    search_node& cur = nodes[static_cast<std::size_t>(top)];
    if (cur.settled || e.f > cur.f) continue;
    cur.settled = true;
    ++res.explored;
    for (int t = 0; t < n_targets; ++t)
      if (found[t] < 0 && cur.key == target_keys[static_cast<std::size_t>(t)]) {
        found[t] = top;
        --remaining;
      }
    if (remaining == 0) break;
    const std::uint64_t cur_key = cur.key;
    const double cur_cost = cur.cost;
    const view v = make_view(cur_key, R, A, m, global);
    // Every single step (an all_to_all alone is a run of one step, costed as itself) ...
    for_each_step(cur_key, v, R, A, gl, m, global, cm, [&](const edge& ed) {
      relax(top, cur_cost, ed.key, edge_time(ed, v.numel, elem_bytes, cm) + edge_copy_us(ed, v, R, A, m, global, elem_bytes, cm),
            ed.step, nullptr);
    });
    // ... and, later, the runs of two or more all_to_alls (above).
    const double bound = run_bound(cur_key, v, A, m, elem_bytes, cm);
    if (bound < 1e300 && bound < limit_at(cur_cost)) open.push({cur_cost + bound, -top - 1});
  }
  return res;
}

/// The plan that leads to node `found`, in canonical form, with its cost.
constexpr plan_result extract(const search_result& s, int found, const layout_spec& src, const mesh_shape& m,
                              const shape_t& global, std::int64_t elem_bytes, const cost_model& cm) {
  plan_result res;
  check(found >= 0, "tessera::make_plan: the search space was exhausted without reaching the target");
  auto steps_of = [&](std::uint64_t step) { return step >> 63 ? static_cast<int>((step >> 32) & 0xffu) : 1; };
  int len = 0;
  for (int i = found; s.nodes[static_cast<std::size_t>(i)].parent >= 0; i = s.nodes[static_cast<std::size_t>(i)].parent)
    len += steps_of(s.nodes[static_cast<std::size_t>(i)].step);
  if (len > max_plan_steps) {
    res.error = plan_error::too_many_steps;
    return res;
  }
  plan_value p;
  p.n = static_cast<std::int8_t>(len);
  for (int i = found, k = len; s.nodes[static_cast<std::size_t>(i)].parent >= 0; i = s.nodes[static_cast<std::size_t>(i)].parent) {
    const std::uint64_t step = s.nodes[static_cast<std::size_t>(i)].step;
    const int n = steps_of(step);
    k -= n;
    for (int j = 0; j < n; ++j)
      p.steps[static_cast<std::size_t>(k + j)] =
          decode(n == 1 && !(step >> 63) ? step : s.runs[static_cast<std::size_t>((step & 0xffffffffu) + static_cast<std::uint64_t>(j))]);
  }
  res = evaluate_plan(src, merge_local_slices(p), m, global, elem_bytes, cm);
  res.explored = s.explored;
  return res;
}

}  // namespace detail

/// The least-cost plan from `src` to `dst` for a tensor of shape `global` with elements of
/// `elem_bytes` bytes on mesh `m`. Illegal transitions return an error and an empty plan.
/// `use_heuristic = false` runs plain Dijkstra (the tests check that both agree on cost).
constexpr plan_result make_plan(const layout_spec& src, const layout_spec& dst, const mesh_shape& m,
                                const shape_t& global, std::int64_t elem_bytes,
                                const cost_model& cm = {}, bool use_heuristic = true) {
  plan_result res;
  res.error = check_transition(src, dst);
  if (res.error == plan_error::none) res.error = detail::size_and_model_error(m, global, elem_bytes, cm);
  if (res.error != plan_error::none) return res;
  int found = -1;
  const detail::search_result s = detail::search(src, &dst, 1, &found, m, global, elem_bytes, cm, use_heuristic);
  return detail::extract(s, found, src, m, global, elem_bytes, cm);
}

/// Least-cost plans from one source to many targets with one search (what choosing among
/// an op's candidate input layouts needs). Illegal pairs carry their error.
template <std::size_t N>
constexpr std::array<plan_result, N> make_plans(const layout_spec& src, const std::array<layout_spec, N>& dsts,
                                                const mesh_shape& m, const shape_t& global,
                                                std::int64_t elem_bytes, const cost_model& cm = {}) {
  std::array<plan_result, N> out{};
  std::array<layout_spec, N> legal{};
  std::array<int, N> index{};
  int n = 0;
  for (std::size_t i = 0; i < N; ++i) {
    out[i].error = check_transition(src, dsts[i]);
    if (out[i].error == plan_error::none) out[i].error = detail::size_and_model_error(m, global, elem_bytes, cm);
    if (out[i].error == plan_error::none) {
      legal[static_cast<std::size_t>(n)] = dsts[i];
      index[static_cast<std::size_t>(n++)] = static_cast<int>(i);
    }
  }
  if (n == 0) return out;
  std::array<int, N> found{};
  const detail::search_result s = detail::search(src, legal.data(), n, found.data(), m, global, elem_bytes, cm, false);
  for (int k = 0; k < n; ++k)
    out[static_cast<std::size_t>(index[static_cast<std::size_t>(k)])] =
        detail::extract(s, found[static_cast<std::size_t>(k)], src, m, global, elem_bytes, cm);
  return out;
}

/// A baseline for comparison: gather every sharded axis (innermost first), all-reduce
/// every partial axis, then slice into the target and mark the target's partial axes
/// (the order a planner without search falls back to; DTensor's greedy planner does this
/// except that it uses all_to_all for shard(i) -> shard(j) where nesting allows). Valid for
/// every legal transition; never cheaper than make_plan's.
constexpr plan_value gather_first_plan(const layout_spec& src, const layout_spec& dst) noexcept {
  plan_value p;
  layout_spec l = src;
  auto add = [&](step_kind kind, int axis, int dim, reduce op = reduce::sum) {
    plan_step s;
    s.kind = kind;
    s.group.push(axis);
    s.dim = static_cast<std::int8_t>(dim);
    s.op = op;
    l = apply(l, s);
    p.push(s);
  };
  for (int d = 0; d < l.rank; ++d)
    while (l.axes_of(d) > 0) add(step_kind::all_gather, l.axis_at(d, l.axes_of(d) - 1), d);
  for (int a = 0; a < l.mesh_ndim; ++a)
    if (l.is_partial(a) && !dst.is_partial(a)) add(step_kind::all_reduce, a, -1, l.op);
  for (int d = 0; d < dst.rank; ++d)
    for (int i = 0; i < dst.axes_of(d); ++i) add(step_kind::local_slice, dst.axis_at(d, i), d);
  for (int a = 0; a < dst.mesh_ndim; ++a)
    if (dst.is_partial(a) && !l.is_partial(a)) add(step_kind::local_partial, a, -1, dst.op);
  return p;
}

/// The refusal of a tensor too large to plan, naming its shape and the limit ("" when it fits).
inline std::string plan_size_problem(const mesh_shape& m, const shape_t& global, std::int64_t elem_bytes) {
  if (plan_fits(m, global, elem_bytes)) return {};
  std::string shape;
  for (int d = 0; d < global.rank; ++d) shape += (d ? " x " : "") + std::to_string(global[d]);
  const std::int64_t ranks = detail::ranks_or_zero(m);
  return "shape " + shape + " of " + std::to_string(elem_bytes) + "-byte elements is too large to plan on " +
         (ranks ? std::to_string(ranks) : std::string("so many")) +
         " ranks: the planner counts bytes in int64 and takes at most " + std::to_string(max_plan_bytes(m)) +
         " bytes there, blocks padded (tessera::max_plan_bytes); plan a smaller shape";
}

/// As make_plan, but throws tessera::error naming the problem for an illegal transition,
/// a tensor too large to plan or an unusable cost model.
inline plan_result plan_or_throw(const layout_spec& src, const layout_spec& dst, const mesh_shape& m,
                                 const shape_t& global, std::int64_t elem_bytes, const cost_model& cm = {}) {
  plan_result r = make_plan(src, dst, m, global, elem_bytes, cm);
  if (r.error == plan_error::too_large) throw error("tessera::plan: " + plan_size_problem(m, global, elem_bytes));
  if (r.error == plan_error::bad_cost_model) throw error("tessera::plan: " + cost_model_text(cm, m.ndim));
  check(r.error == plan_error::none, std::string("tessera::plan: ") + std::string(describe(r.error)));
  return r;
}

}  // namespace tessera
