// tessera/plan/detail/search.hpp: the planner's search internals (packed layouts, the
// steps out of a layout, the A* lower bound, the open list). Not for users: include
// <tessera/plan/planner.hpp>.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include <tessera/core/config.hpp>
#include <tessera/core/extents.hpp>
#include <tessera/layout/layout_spec.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/plan/collective.hpp>
#include <tessera/plan/cost_model.hpp>

namespace tessera {
namespace detail {

// The search works on layouts packed into 64 bits: for mesh axis a, byte a holds its
// state in bits 0-3 (0 replicate, 1 partial, 2 + d shard of dim d) and its position in
// d's list in bits 4-6; bits 56-57 hold the reduce op. Every step is a few bit operations
// on this word, which keeps the constant evaluation cheap.
constexpr std::uint64_t code_of(std::uint64_t k, int a) noexcept { return (k >> (8 * a)) & 15u; }
constexpr std::uint64_t pos_of(std::uint64_t k, int a) noexcept { return (k >> (8 * a + 4)) & 7u; }
constexpr std::uint64_t with_axis(std::uint64_t k, int a, std::uint64_t code, std::uint64_t pos) noexcept {
  k &= ~(std::uint64_t{0x7f} << (8 * a));
  return k | ((code | (pos << 4)) << (8 * a));
}
constexpr reduce op_of(std::uint64_t k) noexcept { return static_cast<reduce>((k >> 56) & 3u); }
constexpr std::uint64_t with_op(std::uint64_t k, reduce op) noexcept {
  return (k & ~(std::uint64_t{3} << 56)) | (static_cast<std::uint64_t>(op) << 56);
}
constexpr bool any_partial(std::uint64_t k, int A) noexcept {
  for (int a = 0; a < A; ++a)
    if (code_of(k, a) == 1) return true;
  return false;
}

constexpr std::uint64_t pack(const layout_spec& l) noexcept {
  std::uint64_t k = 0;
  for (int d = 0; d < l.rank; ++d)
    for (int i = 0; i < l.axes_of(d); ++i)
      k = with_axis(k, l.axis_at(d, i), static_cast<std::uint64_t>(2 + d), static_cast<std::uint64_t>(i));
  for (int a = 0; a < l.mesh_ndim; ++a)
    if (l.is_partial(a)) k = with_axis(k, a, 1, 0);
  return l.has_partial() ? with_op(k, l.op) : k;
}

constexpr layout_spec unpack(std::uint64_t k, int rank, int mesh_ndim) noexcept {
  layout_spec l = replicated_spec(rank, mesh_ndim);
  for (int a = 0; a < mesh_ndim; ++a) {
    const auto code = code_of(k, a);
    if (code == 1) {
      l.set_partial(a, op_of(k));
    } else if (code >= 2) {
      const auto d = static_cast<std::size_t>(code - 2);
      const auto pos = static_cast<std::size_t>(pos_of(k, a));
      l.shard[d][pos] = static_cast<std::int8_t>(a);
      if (l.nshard[d] < static_cast<std::int8_t>(pos + 1)) l.nshard[d] = static_cast<std::int8_t>(pos + 1);
    }
  }
  return l;
}

/// A packed layout's dimension lists and padded local size, computed once per node.
/// at[d] holds the axes of dim d, 4 bits per position (outermost in the low bits).
struct view {
  std::array<std::int8_t, max_tensor_rank> len{};
  std::array<std::uint32_t, max_tensor_rank> at{};
  std::array<std::int64_t, max_tensor_rank> parts{};  // product of the sizes sharding d
  std::int64_t numel = 1;                             // elements of the largest block

  constexpr int axis(int d, int i) const noexcept {
    return static_cast<int>((at[static_cast<std::size_t>(d)] >> (4 * i)) & 15u);
  }
};

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept { return (a + b - 1) / b; }

constexpr view make_view(std::uint64_t k, int R, int A, const mesh_shape& m, const shape_t& g) noexcept {
  view v;
  for (int d = 0; d < R; ++d) v.parts[static_cast<std::size_t>(d)] = 1;
  for (int a = 0; a < A; ++a) {
    const auto code = code_of(k, a);
    if (code < 2) continue;
    const auto d = static_cast<std::size_t>(code - 2);
    v.at[d] |= static_cast<std::uint32_t>(a) << (4 * pos_of(k, a));
    ++v.len[d];
    v.parts[d] *= m[a];
  }
  // ceil(ceil(n / p) / q) == ceil(n / (p q)): the padded extent ignores the split order.
  for (int d = 0; d < R; ++d) v.numel *= ceil_div(g[d], v.parts[static_cast<std::size_t>(d)]);
  return v;
}

/// A* heuristic: a lower bound on the time still needed from packed layout k to the
/// target. Rank 0 (all coordinates 0) holds [0, e_d) in every dim d; whatever of its
/// target block [0, t_d) it does not hold yet must reach it, and every collective moves at
/// least the bytes it delivers, so (target - overlap) bytes over the fastest link at the
/// smallest collective scale, plus the smallest collective latency when any
/// communication remains, never overestimate.
constexpr double lower_bound(std::uint64_t k, std::uint64_t target, const view& t, int R, int A,
                             const mesh_shape& m, const shape_t& g, std::int64_t elem_bytes, double max_gbps,
                             const cost_model& cm) noexcept {
  if (k == target) return 0;
  bool comm = false, partial = false;
  std::array<std::int64_t, max_tensor_rank> parts{1, 1, 1, 1, 1, 1, 1, 1};
  for (int a = 0; a < A; ++a) {
    const auto c = code_of(k, a);
    if (c >= 2) {
      parts[static_cast<std::size_t>(c - 2)] *= m[a];
      if (m[a] > 1 && (c != code_of(target, a) || pos_of(k, a) != pos_of(target, a))) comm = true;
    } else if (c == 1 && code_of(target, a) != 1 && m[a] > 1) {
      comm = partial = true;
    }
  }
  if (!comm) return 0;
  const double base = cm.min_base_us();
  if (partial) return base;
  std::int64_t overlap = 1;
  for (int d = 0; d < R; ++d) {
    const std::int64_t e = ceil_div(g[d], parts[static_cast<std::size_t>(d)]);
    const std::int64_t te = ceil_div(g[d], t.parts[static_cast<std::size_t>(d)]);
    overlap *= e < te ? e : te;
  }
  return base + cm.min_scale() * static_cast<double>((t.numel - overlap) * elem_bytes) / (max_gbps * 1e3);
}

/// Elements of the largest block after dim d's shard count changes from `from` to `to`.
constexpr std::int64_t numel_after(const view& v, const shape_t& g, int d, std::int64_t to) noexcept {
  const std::int64_t before = ceil_div(g[d], v.parts[static_cast<std::size_t>(d)]);
  return v.numel / before * ceil_div(g[d], to);
}

// A step packed into 64 bits: kind (3 bits), dim and to_dim (4 bits each, +1), op (2
// bits), group size (4 bits) and up to 8 axes (4 bits each) from bit 20.
constexpr std::uint64_t encode(const plan_step& s) noexcept {
  std::uint64_t c = static_cast<std::uint64_t>(s.kind) | (static_cast<std::uint64_t>(s.dim + 1) << 3) |
                    (static_cast<std::uint64_t>(s.to_dim + 1) << 7) | (static_cast<std::uint64_t>(s.op) << 11) |
                    (static_cast<std::uint64_t>(s.group.n) << 13);
  for (int i = 0; i < s.group.n; ++i) c |= static_cast<std::uint64_t>(s.group[i]) << (20 + 4 * i);
  return c;
}
constexpr plan_step decode(std::uint64_t c) noexcept {
  plan_step s;
  s.kind = static_cast<step_kind>(c & 7u);
  s.dim = static_cast<std::int8_t>(static_cast<int>((c >> 3) & 15u) - 1);
  s.to_dim = static_cast<std::int8_t>(static_cast<int>((c >> 7) & 15u) - 1);
  s.op = static_cast<reduce>((c >> 11) & 3u);
  const int n = static_cast<int>((c >> 13) & 15u);
  for (int i = 0; i < n; ++i) s.group.push(static_cast<int>((c >> (20 + 4 * i)) & 15u));
  return s;
}
constexpr std::uint64_t step_code(step_kind kind, int dim, int to_dim, reduce op) noexcept {
  return static_cast<std::uint64_t>(kind) | (static_cast<std::uint64_t>(dim + 1) << 3) |
         (static_cast<std::uint64_t>(to_dim + 1) << 7) | (static_cast<std::uint64_t>(op) << 11);
}
constexpr std::uint64_t with_group_axis(std::uint64_t c, int i, int a) noexcept {
  const std::uint64_t n = (c >> 13) & 15u;
  c &= ~(std::uint64_t{15} << 13);
  return c | ((n > static_cast<std::uint64_t>(i) ? n : static_cast<std::uint64_t>(i + 1)) << 13) |
         (static_cast<std::uint64_t>(a) << (20 + 4 * i));
}

struct edge {
  std::uint64_t key;
  std::uint64_t step;       // encode()d
  std::int64_t gsize;       // ranks in the step's group
  double gbps, hop;         // slowest link of the group
  std::int64_t numel_out;
};

struct search_node {
  std::uint64_t key = 0;
  double cost = 0;   // g: cost from the source
  double f = 0;      // g + h
  int parent = -1;
  std::uint64_t step = 0;
  bool settled = false;
  double runs_cost = 1e300;  // the cost at which the runs out of it were searched
};

/// A binary min-heap of (f, node) entries, written out by hand: the constant evaluator
/// runs it much faster than std::push_heap with a comparator. Entries are not updated in
/// place; an entry whose f is above its node's current f is stale and skipped.
struct open_entry {
  double f;
  int node;
};
struct open_list {
  std::vector<open_entry> h;
  static constexpr bool less(const open_entry& x, const open_entry& y) noexcept {
    return x.f < y.f || (x.f == y.f && x.node < y.node);
  }
  constexpr void push(open_entry e) {
    h.push_back(e);
    std::size_t i = h.size() - 1;
    while (i > 0) {
      const std::size_t up = (i - 1) / 2;
      if (!less(h[i], h[up])) break;
      const open_entry t = h[i];
      h[i] = h[up];
      h[up] = t;
      i = up;
    }
  }
  constexpr open_entry pop() {
    const open_entry top = h[0];
    h[0] = h.back();
    h.pop_back();
    std::size_t i = 0;
    const std::size_t sz = h.size();
    while (true) {
      const std::size_t l = 2 * i + 1, r = l + 1;
      std::size_t best = i;
      if (l < sz && less(h[l], h[best])) best = l;
      if (r < sz && less(h[r], h[best])) best = r;
      if (best == i) break;
      const open_entry t = h[i];
      h[i] = h[best];
      h[best] = t;
      i = best;
    }
    return top;
  }
};

inline constexpr int table_bits = 7;
inline constexpr int max_nodes = 1 << 20;

/// Which partial moves can lead towards the targets: axes whose partial state some target
/// drops (reducible), and axes some target marks partial, per reduce op (markable).
struct goal {
  std::uint8_t reducible = 0;
  std::array<std::uint8_t, 4> markable{};

  constexpr void add(const layout_spec& dst) noexcept {
    reducible = static_cast<std::uint8_t>(reducible | (~dst.partial_mask & 0xffu));
    auto& m = markable[static_cast<std::size_t>(dst.op)];
    m = static_cast<std::uint8_t>(m | dst.partial_mask);
  }
};

/// Calls f(edge) for every step out of packed layout k that can be on a least-cost path
/// to a target of `goal` (with `AllToAllOnly`, for its all_to_all steps only).
template <bool AllToAllOnly = false, class F>
constexpr void for_each_step(std::uint64_t k, const view& v, int R, int A, const goal& dst,
                             const mesh_shape& m, const shape_t& g, const cost_model& cm, F&& f) {
  auto ext = [&](int d, std::int64_t parts) { return ceil_div(g[d], parts); };
  // Shard -> replicate (all_gather) and shard(d) -> shard(j) (all_to_all) of the
  // innermost n axes of a dimension, as one collective on their flattened group.
  for (int d = 0; d < R; ++d) {
    const auto ud = static_cast<std::size_t>(d);
    std::uint64_t kg = k;
    std::int64_t gsize = 1;
    double gbps = 1e300, hop = 0;
    const int len = v.len[ud];
    for (int n = 1; n <= len; ++n) {
      const int a = v.axis(d, len - n);
      kg = with_axis(kg, a, 0, 0);
      gsize *= m[a];
      gbps = cm.GBps[static_cast<std::size_t>(a)] < gbps ? cm.GBps[static_cast<std::size_t>(a)] : gbps;
      hop = cm.hop_us[static_cast<std::size_t>(a)] > hop ? cm.hop_us[static_cast<std::size_t>(a)] : hop;
      std::uint64_t group = 0;
      for (int i = 0; i < n; ++i) group = with_group_axis(group, i, v.axis(d, len - n + i));
      const std::int64_t parts_d = v.parts[ud] / gsize;
      const std::int64_t numel_g = v.numel / ext(d, v.parts[ud]) * ext(d, parts_d);
      if constexpr (!AllToAllOnly)
        f(edge{kg, group | step_code(step_kind::all_gather, d, -1, reduce::sum), gsize, gbps, hop, numel_g});
      for (int j = 0; j < R; ++j) {
        if (j == d) continue;
        const auto uj = static_cast<std::size_t>(j);
        std::uint64_t kj = kg;
        for (int i = 0; i < n; ++i)
          kj = with_axis(kj, v.axis(d, len - n + i), static_cast<std::uint64_t>(2 + j),
                         static_cast<std::uint64_t>(v.len[uj] + i));
        const std::int64_t numel_j = numel_g / ext(j, v.parts[uj]) * ext(j, v.parts[uj] * gsize);
        f(edge{kj, group | step_code(step_kind::all_to_all, d, j, reduce::sum), gsize, gbps, hop, numel_j});
      }
    }
  }
  if constexpr (AllToAllOnly) return;
  // Partial -> replicate / shard, for partial axes the target does not keep partial:
  // every subset (all_reduce) and every ordered subset of up to 3 axes onto every dim
  // (reduce_scatter).
  std::array<int, max_mesh_axes> red{};
  int nred = 0;
  for (int a = 0; a < A; ++a)
    if (code_of(k, a) == 1 && ((dst.reducible >> a) & 1u)) red[static_cast<std::size_t>(nred++)] = a;
  const reduce op = op_of(k);
  for (unsigned mask = 1; mask < (1u << nred); ++mask) {
    std::array<int, max_mesh_axes> sub{};
    int ns = 0;
    std::int64_t gsize = 1;
    double gbps = 1e300, hop = 0;
    std::uint64_t kr = k;
    for (int i = 0; i < nred; ++i)
      if (mask & (1u << i)) {
        const int a = red[static_cast<std::size_t>(i)];
        sub[static_cast<std::size_t>(ns++)] = a;
        gsize *= m[a];
        gbps = cm.GBps[static_cast<std::size_t>(a)] < gbps ? cm.GBps[static_cast<std::size_t>(a)] : gbps;
        hop = cm.hop_us[static_cast<std::size_t>(a)] > hop ? cm.hop_us[static_cast<std::size_t>(a)] : hop;
        kr = with_axis(kr, a, 0, 0);
      }
    if (!any_partial(kr, A)) kr = with_op(kr, reduce::sum);
    std::uint64_t group = 0;
    for (int i = 0; i < ns; ++i) group = with_group_axis(group, i, sub[static_cast<std::size_t>(i)]);
    f(edge{kr, group | step_code(step_kind::all_reduce, -1, -1, op), gsize, gbps, hop, v.numel});
    if (ns > 3) continue;
    do {  // sub starts in increasing order: next_permutation visits every order once
      group = 0;
      for (int i = 0; i < ns; ++i) group = with_group_axis(group, i, sub[static_cast<std::size_t>(i)]);
      for (int d = 0; d < R; ++d) {
        const auto ud = static_cast<std::size_t>(d);
        std::uint64_t kd = kr;
        for (int i = 0; i < ns; ++i)
          kd = with_axis(kd, sub[static_cast<std::size_t>(i)], static_cast<std::uint64_t>(2 + d),
                         static_cast<std::uint64_t>(v.len[ud] + i));
        const std::int64_t numel = v.numel / ext(d, v.parts[ud]) * ext(d, v.parts[ud] * gsize);
        f(edge{kd, group | step_code(step_kind::reduce_scatter, d, -1, op), gsize, gbps, hop, numel});
      }
    } while (std::next_permutation(sub.begin(), sub.begin() + ns));
  }
  // Replicate -> shard (a local slice onto any dim: slicing onto a dim the target does not
  // use can shrink what later collectives move) and replicate -> partial (only where the
  // target is partial).
  const bool partial_now = any_partial(k, A);
  for (int a = 0; a < A; ++a) {
    if (code_of(k, a) != 0) continue;
    const std::uint64_t group = with_group_axis(0, 0, a);
    for (int d = 0; d < R; ++d) {
      const auto ud = static_cast<std::size_t>(d);
      const std::int64_t numel = v.numel / ext(d, v.parts[ud]) * ext(d, v.parts[ud] * m[a]);
      f(edge{with_axis(k, a, static_cast<std::uint64_t>(2 + d), static_cast<std::uint64_t>(v.len[ud])),
             group | step_code(step_kind::local_slice, d, -1, reduce::sum), 1, 0, 0, numel});
    }
    for (int o = 0; o < 4; ++o) {
      const auto op_o = static_cast<reduce>(o);
      if (((dst.markable[static_cast<std::size_t>(o)] >> a) & 1u) && (!partial_now || op_of(k) == op_o))
        f(edge{with_op(with_axis(k, a, 1, 0), op_o), group | step_code(step_kind::local_partial, -1, -1, op_o), 1,
               0, 0, v.numel});
    }
  }
}

/// Canonical form of a plan's local slices: in each run of consecutive local slices,
/// stable-sorted by dim (slices onto different dims commute; onto one dim their order
/// is the split order), then merged per dim into one step on the flattened group.
constexpr plan_value merge_local_slices(const plan_value& p) noexcept {
  plan_value out;
  for (int i = 0; i < p.n;) {
    if (p[i].kind != step_kind::local_slice) {
      out.push(p[i++]);
      continue;
    }
    int j = i;
    while (j < p.n && p[j].kind == step_kind::local_slice) ++j;
    for (int d = 0; d < max_tensor_rank; ++d) {
      plan_step merged;
      merged.kind = step_kind::local_slice;
      merged.dim = static_cast<std::int8_t>(d);
      for (int k = i; k < j; ++k)
        if (p[k].dim == d)
          for (int x = 0; x < p[k].group.n; ++x) merged.group.push(p[k].group[x]);
      if (merged.group.n) out.push(merged);
    }
    i = j;
  }
  return out;
}

/// Time of a search edge: the formula of cost_of (cost_model.hpp) on numbers the search
/// already has.
constexpr double edge_time(const edge& e, std::int64_t numel_in, std::int64_t elem_bytes,
                           const cost_model& cm) noexcept {
  const auto kind = static_cast<step_kind>(e.step & 7u);
  if (!is_collective(kind) || e.gsize == 1) return 0;
  const bool ar = kind == step_kind::all_reduce;
  const std::int64_t buffer = detail::buffer_numel(kind, numel_in, e.numel_out, e.gsize) * elem_bytes;
  const std::int64_t bus = buffer * (ar ? 2 : 1) * (e.gsize - 1) / e.gsize;
  return modelled_us(cm, group_link{e.gbps, e.hop}, static_cast<double>((ar ? 2 : 1) * (e.gsize - 1)), bus,
                     coll_kind_of(kind));
}

/// Elements a rank copies on its own for a search edge out of a layout of view `v` (the
/// formula of step_copied_numel, cost_model.hpp, on the views' padded extents).
constexpr std::int64_t edge_copied_numel(const edge& e, const view& v, int R, int A, const mesh_shape& m,
                                         const shape_t& g) noexcept {
  const plan_step s = decode(e.step);
  if (is_collective(s.kind) && e.gsize == 1) return 0;
  const view w = make_view(e.key, R, A, m, g);
  shape_t in = g, out = g;
  for (int d = 0; d < R; ++d) {
    in[d] = ceil_div(g[d], v.parts[static_cast<std::size_t>(d)]);
    out[d] = ceil_div(g[d], w.parts[static_cast<std::size_t>(d)]);
  }
  return copied_numel(s.kind, s.dim, s.to_dim, in, out);
}

/// The modelled time of an edge's local copies (0 when the cost model counts none).
constexpr double edge_copy_us(const edge& e, const view& v, int R, int A, const mesh_shape& m, const shape_t& g,
                              std::int64_t elem_bytes, const cost_model& cm) noexcept {
  return cm.copy_GBps > 0 ? cm.copy_us(edge_copied_numel(e, v, R, A, m, g) * elem_bytes) : 0.0;
}

}  // namespace detail

}  // namespace tessera
