// tessera/plan/detail/search_runs.hpp: the planner's search of runs of all_to_all steps
// (which the runtime fuses into one exchange, plan/runs.hpp): their edges, their cost and
// the lower bound that lets the search defer them. Not for users: include
// <tessera/plan/planner.hpp>.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <tessera/plan/detail/search.hpp>
#include <tessera/plan/runs.hpp>

namespace tessera {

namespace detail {

/// The longest run of all_to_all steps the search takes as one edge.
inline constexpr int max_run_steps = 3;

/// A run of all_to_all steps out of a layout, as the search stores it: the steps
/// (encode()d) and where it ends.
struct run_edge {
  std::uint64_t key;
  std::array<std::uint64_t, max_run_steps> steps{};
  int n = 0;
};

/// The axes of an encode()d step's group, as a bit mask.
constexpr unsigned group_mask_of(std::uint64_t c) noexcept {
  unsigned mask = 0;
  const int n = static_cast<int>((c >> 13) & 15u);
  for (int i = 0; i < n; ++i) mask |= 1u << ((c >> (20 + 4 * i)) & 15u);
  return mask;
}

/// Time of the exchange a fused run makes: one all_to_all over the axes of `mask`, of the
/// larger of the blocks at the run's two ends (edge_time()'s formula; evaluate_plan()
/// costs a fused run alike).
constexpr double exchange_time(unsigned mask, int A, std::int64_t numel_in, std::int64_t numel_out,
                               const mesh_shape& m, std::int64_t elem_bytes, const cost_model& cm) noexcept {
  edge e{0, static_cast<std::uint64_t>(step_kind::all_to_all), 1, 1e300, 0, numel_out};
  for (int a = 0; a < A; ++a)
    if (mask & (1u << a)) {
      const auto ua = static_cast<std::size_t>(a);
      e.gsize *= m[a];
      e.gbps = cm.GBps[ua] < e.gbps ? cm.GBps[ua] : e.gbps;
      e.hop = cm.hop_us[ua] > e.hop ? cm.hop_us[ua] : e.hop;
    }
  return edge_time(e, numel_in, elem_bytes, cm);
}

/// The least a run of two or more all_to_all steps out of packed layout k can cost: the
/// cheapest exchange over two of k's sharded axes from k's block (exchange_time() only grows
/// with the group and the blocks, and such a run moves at least two axes: see
/// for_each_run). Infinite with fewer than two axes of more than one rank sharded: a run
/// then ends where one step does, over the same group, at the same cost, and single steps
/// cover it.
constexpr double run_bound(std::uint64_t k, const view& v, int A, const mesh_shape& m, std::int64_t elem_bytes,
                           const cost_model& cm) noexcept {
  int moving = 0;
  for (int a = 0; a < A; ++a) moving += code_of(k, a) >= 2 && m[a] > 1;
  double cheapest = 1e300;
  if (moving < 2) return cheapest;
  for (int a = 0; a < A; ++a)
    for (int b = a + 1; b < A && code_of(k, a) >= 2; ++b)
      if (code_of(k, b) >= 2) {
        const double t = exchange_time((1u << a) | (1u << b), A, v.numel, v.numel, m, elem_bytes, cm);
        cheapest = t < cheapest ? t : cheapest;
      }
  return cheapest;
}

/// Calls f(run_edge, time) for every layout that a run of 2 to max_run_steps all_to_all
/// steps reaches from packed layout k and one step does not (the shortest run to each,
/// found breadth first; a layout reached in two or more steps and not in one has moved at
/// least two axes). The runtime executes such a run as one exchange over the union of the
/// steps' groups (plan/runs.hpp), so a run costs one all_to_all over that union group of
/// the larger of the blocks at its two ends (exchange_time()), not the sum of its steps.
///
/// What is left out cannot be on a cheaper path than the caller has:
/// - runs that cost `limit` or more (the caller passes what the best path found to its
///   targets costs, less the cost to k), and every run that extends one: a run costs at
///   least the exchange of its prefix's group from k's block;
/// - runs through a layout for which `done(key)` holds: the caller has searched (or will,
///   before it could matter) the runs out of that layout at no more than k's cost; from a
///   block no larger than k's they cost no more than from k.
template <class Done, class F>
constexpr void for_each_run(std::uint64_t k, const view& v, int R, int A, const goal& dst, const mesh_shape& m,
                            const shape_t& g, std::int64_t elem_bytes, const cost_model& cm, double limit,
                            Done&& done, F&& f) {
  // exchange_time from k's block, by group (most runs end in blocks of k's size)
  std::vector<double> from_k;
  from_k.assign(std::size_t{1} << A, -1.0);
  auto exchange = [&](unsigned mask, std::int64_t numel_out) {
    if (numel_out > v.numel) return exchange_time(mask, A, v.numel, numel_out, m, elem_bytes, cm);
    double& t = from_k[mask];
    if (t < 0) t = exchange_time(mask, A, v.numel, v.numel, m, elem_bytes, cm);
    return t;
  };
  struct item {
    run_edge run;
    unsigned mask;
    bool dead = false;        // not extended (see `done`)
    std::int64_t copied = 0;  // the steps' own copies (cost_model::copy_GBps), elements
  };
  std::vector<item> seen;
  seen.reserve(16);
  seen.push_back(item{run_edge{k, {}, 0}, 0u});
  // The keys in `seen`, open addressing (0 is empty: no key here is the replicated layout).
  int bits = 5;
  std::vector<std::uint64_t> table;
  table.assign(std::size_t{1} << bits, 0);
  auto slot = [&](std::uint64_t key) {
    const std::size_t mask = (std::size_t{1} << bits) - 1;
    std::size_t h = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - bits));
    while (table[h] != 0 && table[h] != key) h = (h + 1) & mask;
    return h;
  };
  table[slot(k)] = k;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (seen[i].run.n == max_run_steps || seen[i].dead) continue;
    const item at = seen[i];
    if (i > 0 && exchange(at.mask, v.numel) >= limit) continue;
    const view va = i == 0 ? v : make_view(at.run.key, R, A, m, g);
    for_each_step<true>(at.run.key, va, R, A, dst, m, g, cm, [&](const edge& e) {
      std::size_t h = slot(e.key);
      if (table[h] == e.key) return;
      if (2 * (seen.size() + 1) > table.size()) {
        ++bits;
        table.assign(std::size_t{1} << bits, 0);
        for (const item& s : seen) table[slot(s.run.key)] = s.run.key;
        h = slot(e.key);
      }
      table[h] = e.key;
      item next = at;
      next.run.key = e.key;
      next.run.steps[static_cast<std::size_t>(next.run.n++)] = e.step;
      next.mask |= group_mask_of(e.step);
      if (cm.copy_GBps > 0) next.copied += edge_copied_numel(e, va, R, A, m, g);
      next.dead = e.numel_out <= v.numel && done(e.key);
      seen.push_back(next);
      if (next.dead || next.run.n == 1) return;  // single steps: the caller's own edges
      // the exchange, and its copies as run_copy_us (plan/runs.hpp) charges them
      double t = exchange(next.mask, e.numel_out);
      if (cm.copy_GBps > 0) {
        const std::int64_t x =
            exchange_copied_numel(unpack(k, R, A), unpack(e.key, R, A), axis_group_of(next.mask), m, g, coords_t{});
        t += cm.copy_us((x < next.copied ? x : next.copied) * elem_bytes);
      }
      if (t < limit) f(next.run, t);
    });
  }
}

}  // namespace detail

}  // namespace tessera
