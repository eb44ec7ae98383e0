// tessera/plan/runs.hpp: how a plan executes. Steps run one by one, except that a run of
// consecutive all_to_all steps executes as one exchange over the union of their groups:
// every rank sends each rank of that group the part of its block which that rank holds
// after the run, so each element moves once, straight to its final owner, instead of once
// per step through intermediate blocks.
//
//   using P = tessera::plan_t<Src, Dst>;
//   constexpr tessera::plan_runs r = tessera::runs_of(P::value);   // also P::runs
//   r.runs[0].end - r.runs[0].begin   // > 1: steps [begin, end) run as one exchange
//
// The exchange is exact: an all_to_all moves its group's axes between dimensions without
// touching the others, so the union group's axes are sharded before and after the run and
// the blocks of the group's ranks tile the same region on both sides. It runs as one
// all_to_all where every pair of ranks moves the same number of elements, and otherwise
// as grouped point-to-point calls of the pairs that move something (as an uneven
// all_to_all step does). exchange_traffic() counts what one rank moves, exactly as the
// runtime (tensor/detail/redistribute.hpp) and the flight recorder do.
#pragma once

#include <array>
#include <cstdint>

#include <tessera/core/config.hpp>
#include <tessera/layout/layout_spec.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/plan/collective.hpp>
#include <tessera/plan/cost_model.hpp>

namespace tessera {

/// Steps [begin, end) of a plan that run together; `group` is the step's group, or for a
/// fused run of all_to_all steps the union of their groups (axes in increasing order).
struct step_run {
  int begin = 0, end = 0;
  axis_group group{};

  constexpr bool fused() const noexcept { return end - begin > 1; }
};

struct plan_runs {
  int n = 0;
  std::array<step_run, max_plan_steps> runs{};

  constexpr const step_run& operator[](int i) const { return runs[static_cast<std::size_t>(i)]; }
  constexpr int size() const noexcept { return n; }
};

/// The group of the axes in `mask`, in increasing order (a fused run's union group).
constexpr axis_group axis_group_of(unsigned mask) noexcept {
  axis_group g;
  for (int a = 0; a < max_mesh_axes; ++a)
    if (mask & (1u << a)) g.push(a);
  return g;
}

/// The plan cut into runs: each all_to_all step joins the all_to_all steps right after it;
/// every other step is a run of its own.
constexpr plan_runs runs_of(const plan_value& p) noexcept {
  plan_runs r;
  for (int i = 0; i < p.n;) {
    int j = i + 1;
    if (p[i].kind == step_kind::all_to_all)
      while (j < p.n && p[j].kind == step_kind::all_to_all) ++j;
    step_run run{i, j, p[i].group};
    if (run.fused()) {
      unsigned mask = 0;
      for (int k = i; k < j; ++k) mask |= p[k].group.mask();
      run.group = axis_group_of(mask);
    }
    r.runs[static_cast<std::size_t>(r.n++)] = run;
    i = j;
  }
  return r;
}

/// True when every pair (p, q) of a group of n ranks moves the same number of elements,
/// intersect(before(p), after(q)), from p's block before to q's block after; that number
/// is then `*per_pair`. The runtime (over the group's boxes) and exchange_traffic() (over
/// boxes it computes) decide alike through this one function.
template <class Before, class After>
constexpr bool even_pairs(std::int64_t n, Before&& before, After&& after, std::int64_t* per_pair) {
  std::int64_t first = -1;
  for (std::int64_t p = 0; p < n; ++p) {
    const box bp = before(p);
    for (std::int64_t q = 0; q < n; ++q) {
      const std::int64_t x = intersect(bp, after(q)).numel();
      if (first < 0) first = x;
      if (x != first) return false;
    }
  }
  *per_pair = first < 0 ? 0 : first;
  return true;
}

/// Whether an even exchange (every pair moves `per_pair` elements) runs on the blocks as
/// they are: `send` when each piece of block `b` that rank q of the group holds afterwards
/// (intersect(b, after(q))) lies contiguous at q x per_pair in `b`; `recv` when each piece
/// of the new block `b1` from rank p (intersect(before(p), b1)) lies so in `b1`. Otherwise
/// the block is packed, or unpacked. The runtime's exchange and exchange_copied_numel()
/// decide alike through this one function.
struct pieces_in_place {
  bool send = true, recv = true;
};
template <class Before, class After>
constexpr pieces_in_place in_place_pieces(std::int64_t n, const box& b, const box& b1, Before&& before, After&& after,
                                          std::int64_t per_pair) {
  pieces_in_place r;
  for (std::int64_t q = 0; q < n; ++q) {
    const auto sent = contiguous_at(intersect(b, after(q)), b);
    r.send = r.send && sent && *sent == q * per_pair;
    const auto got = contiguous_at(intersect(before(q), b1), b1);
    r.recv = r.recv && got && *got == q * per_pair;
  }
  return r;
}

/// even_pairs() for the exchange from `before` to `after` over the group along `g` of the
/// rank at `at`: the exchange is then one all_to_all of `*per_pair` elements per pair.
constexpr bool even_exchange(const layout_spec& before, const layout_spec& after, const axis_group& g,
                             const mesh_shape& m, const shape_t& global, const coords_t& at,
                             std::int64_t* per_pair) noexcept {
  return even_pairs(
      group_size(m, g), [&](std::int64_t p) { return local_box(before, m, global, group_member(m, g, at, p)); },
      [&](std::int64_t q) { return local_box(after, m, global, group_member(m, g, at, q)); }, per_pair);
}

/// What the rank at `at` moves in an exchange from `before` to `after` over group `g`.
struct exchange_cost {
  std::int64_t bus_bytes = 0;  ///< nccl-tests' bus bytes of the all_to_all, or the bytes sent
  int calls = 0;               ///< collective calls: 1 (even, one all_to_all) or 0 (point-to-point)
  double time_us = 0;          ///< the cost model's time: one all_to_all, or one message per peer
};

constexpr exchange_cost exchange_traffic(const layout_spec& before, const layout_spec& after, const axis_group& g,
                                         const mesh_shape& m, const shape_t& global, std::int64_t elem_bytes,
                                         const cost_model& cm, const coords_t& at) noexcept {
  exchange_cost c;
  const std::int64_t n = group_size(m, g);
  if (n <= 1) return c;
  const group_link link = link_of(cm, g);
  std::int64_t per_pair = 0;
  if (even_exchange(before, after, g, m, global, at, &per_pair)) {
    c.calls = 1;
    c.bus_bytes = per_pair * elem_bytes * (n - 1);  // S = n * per_pair elements, times (n-1)/n
    c.time_us = modelled_us(cm, link, static_cast<double>(n - 1), c.bus_bytes, coll_kind::all_to_all);
    return c;
  }
  const box mine = local_box(before, m, global, at);
  const std::int64_t self = group_index(m, g, at);
  int peers = 0;
  for (std::int64_t q = 0; q < n; ++q) {
    if (q == self) continue;
    const std::int64_t x = intersect(mine, local_box(after, m, global, group_member(m, g, at, q))).numel();
    c.bus_bytes += x * elem_bytes;
    peers += x > 0;
  }
  c.time_us = peers ? modelled_us(cm, link, static_cast<double>(peers), c.bus_bytes, coll_kind::exchange) : 0.0;
  return c;
}

/// Elements the rank at `at` copies on its own in the exchange from `before` to `after`
/// over group `g`, as the runtime's exchange (tensor/detail/redistribute.hpp) decides: an
/// even one packs its block unless every piece already lies contiguous at its place in
/// group order, and unpacks its new block likewise; an uneven one (point-to-point) packs
/// and unpacks the pieces that are not contiguous and copies its own piece.
constexpr std::int64_t exchange_copied_numel(const layout_spec& before, const layout_spec& after, const axis_group& g,
                                             const mesh_shape& m, const shape_t& global, const coords_t& at) noexcept {
  const std::int64_t n = group_size(m, g);
  if (n <= 1) return 0;
  const box b = local_box(before, m, global, at), b1 = local_box(after, m, global, at);
  auto before_of = [&](std::int64_t p) { return local_box(before, m, global, group_member(m, g, at, p)); };
  auto after_of = [&](std::int64_t q) { return local_box(after, m, global, group_member(m, g, at, q)); };
  std::int64_t per_pair = 0;
  if (even_exchange(before, after, g, m, global, at, &per_pair)) {
    const pieces_in_place direct = in_place_pieces(n, b, b1, before_of, after_of, per_pair);
    return (direct.send ? 0 : b.numel()) + (direct.recv ? 0 : b1.numel());
  }
  std::int64_t copied = intersect(b, b1).numel();  // its own piece
  const std::int64_t self = group_index(m, g, at);
  for (std::int64_t q = 0; q < n; ++q) {
    if (q == self) continue;
    const box x = intersect(b, after_of(q)), y = intersect(before_of(q), b1);
    if (x.numel() && !contiguous_at(x, b)) copied += x.numel();
    if (y.numel() && !contiguous_at(y, b1)) copied += y.numel();
  }
  return copied;
}

/// The modelled time of the local copies of run `run` of plan `p` from layout `before`
/// (cost_model::copy_GBps; 0 when copies are not counted), for the rank with the largest
/// blocks (mesh coordinates 0): a single step's own copies; a fused run's, the lesser of
/// its exchange's and its steps' own (the planner's search charges its run edges alike).
constexpr double run_copy_us(const layout_spec& before, const plan_value& p, const step_run& run, const mesh_shape& m,
                             const shape_t& global, std::int64_t elem_bytes, const cost_model& cm) noexcept {
  if (!(cm.copy_GBps > 0)) return 0;
  std::int64_t steps = 0;
  layout_spec l = before;
  for (int i = run.begin; i < run.end; ++i) {
    const layout_spec next = apply(l, p[i]);
    steps += step_copied_numel(p[i], l, next, m, global);
    l = next;
  }
  if (run.fused()) {
    const std::int64_t exchange = exchange_copied_numel(before, l, run.group, m, global, coords_t{});
    steps = exchange < steps ? exchange : steps;
  }
  return cm.copy_us(steps * elem_bytes);
}

}  // namespace tessera
