// tessera/plan/collective.hpp: the vocabulary of redistribution plans.
//
// A plan is a list of steps, each one collective (or one local operation) on one mesh
// axis or on a flattened group of axes (row-major in the order listed):
//
//   all_gather     (group, dim)          shard -> replicate: the group's blocks are
//                                        concatenated along dim in group order; the
//                                        group's axes are the innermost splits of dim.
//   reduce_scatter (group, dim, op)      partial -> shard: reduce over the group, keep
//                                        this rank's piece; the axes become dim's
//                                        innermost splits.
//   all_reduce     (group, op)           partial -> replicate.
//   all_to_all     (group, dim, to_dim)  shard(dim) -> shard(to_dim): the group's axes
//                                        move from the innermost splits of dim to the
//                                        innermost splits of to_dim.
//   local_slice    (group, dim)          replicate -> shard: no communication.
//   local_partial  (group, op)           replicate -> partial: no communication (sum:
//                                        group index 0 keeps the values, the others hold
//                                        zero; avg, max, min: values unchanged).
//
// Splitting over a flattened group is nested, as layouts are: the group's first axis
// splits the block, each next axis splits the piece the previous ones left. For even
// sizes that is the same as n equal parts in group order; for uneven sizes it can differ
// (2 elements over 2 x 2 ranks: 1,0,1,0, not 1,1,0,0). Gathering concatenates the
// group's blocks in group order, which undoes the nested split.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include <tessera/core/config.hpp>
#include <tessera/layout/layout_spec.hpp>
#include <tessera/layout/mesh.hpp>

namespace tessera {

enum class step_kind : std::uint8_t {
  all_gather,
  reduce_scatter,
  all_reduce,
  all_to_all,
  local_slice,
  local_partial
};

constexpr std::string_view to_string(step_kind k) noexcept {
  switch (k) {
    case step_kind::all_gather: return "all_gather";
    case step_kind::reduce_scatter: return "reduce_scatter";
    case step_kind::all_reduce: return "all_reduce";
    case step_kind::all_to_all: return "all_to_all";
    case step_kind::local_slice: return "local_slice";
    case step_kind::local_partial: return "local_partial";
  }
  return "?";
}

/// True for steps that communicate.
constexpr bool is_collective(step_kind k) noexcept {
  return k != step_kind::local_slice && k != step_kind::local_partial;
}

struct plan_step {
  step_kind kind{};
  axis_group group{};
  std::int8_t dim = -1;     ///< gathered / scattered / sliced dim; all_to_all: source dim
  std::int8_t to_dim = -1;  ///< all_to_all: the dim that gets split
  reduce op = reduce::sum;  ///< reduce_scatter, all_reduce, local_partial

  friend constexpr bool operator==(const plan_step&, const plan_step&) = default;
};

inline constexpr int max_plan_steps = 24;

/// A plan as a value: structural, so it can be a template argument.
struct plan_value {
  std::int8_t n = 0;
  std::array<plan_step, max_plan_steps> steps{};

  constexpr const plan_step& operator[](int i) const { return steps[static_cast<std::size_t>(i)]; }
  constexpr int size() const noexcept { return n; }
  constexpr void push(const plan_step& s) { steps[static_cast<std::size_t>(n++)] = s; }
  constexpr int collectives() const noexcept {
    int c = 0;
    for (int i = 0; i < n; ++i) c += is_collective((*this)[i].kind);
    return c;
  }
  friend constexpr bool operator==(const plan_value&, const plan_value&) = default;
};

/// True when `s` can be applied to layout `l` (the group's axes are where the step needs them).
constexpr bool can_apply(const layout_spec& l, const plan_step& s) noexcept {
  if (s.group.n <= 0) return false;
  for (int i = 0; i < s.group.n; ++i)
    if (s.group[i] < 0 || s.group[i] >= l.mesh_ndim) return false;
  auto tail_is_group = [&](int d) {
    if (d < 0 || d >= l.rank || l.axes_of(d) < s.group.n) return false;
    for (int i = 0; i < s.group.n; ++i)
      if (l.axis_at(d, l.axes_of(d) - s.group.n + i) != s.group[i]) return false;
    return true;
  };
  auto all = [&](auto pred) {
    for (int i = 0; i < s.group.n; ++i)
      if (!pred(s.group[i])) return false;
    return true;
  };
  switch (s.kind) {
    case step_kind::all_gather: return tail_is_group(s.dim);
    case step_kind::all_to_all:
      return tail_is_group(s.dim) && s.to_dim >= 0 && s.to_dim < l.rank && s.to_dim != s.dim;
    case step_kind::reduce_scatter:
      return s.dim >= 0 && s.dim < l.rank && l.op == s.op && all([&](int a) { return l.is_partial(a); });
    case step_kind::all_reduce: return l.op == s.op && all([&](int a) { return l.is_partial(a); });
    case step_kind::local_slice:
      return s.dim >= 0 && s.dim < l.rank && all([&](int a) { return l.is_replicated(a); });
    case step_kind::local_partial:
      return (!l.has_partial() || l.op == s.op) && all([&](int a) { return l.is_replicated(a); });
  }
  return false;
}

/// The layout after step `s` (which must be applicable).
constexpr layout_spec apply(layout_spec l, const plan_step& s) noexcept {
  switch (s.kind) {
    case step_kind::all_gather:
      for (int i = 0; i < s.group.n; ++i) l.pop_shard(s.dim);
      break;
    case step_kind::all_to_all:
      for (int i = 0; i < s.group.n; ++i) l.pop_shard(s.dim);
      for (int i = 0; i < s.group.n; ++i) l.push_shard(s.to_dim, s.group[i]);
      break;
    case step_kind::reduce_scatter:
      for (int i = 0; i < s.group.n; ++i) {
        l.clear_partial(s.group[i]);
        l.push_shard(s.dim, s.group[i]);
      }
      break;
    case step_kind::all_reduce:
      for (int i = 0; i < s.group.n; ++i) l.clear_partial(s.group[i]);
      break;
    case step_kind::local_slice:
      for (int i = 0; i < s.group.n; ++i) l.push_shard(s.dim, s.group[i]);
      break;
    case step_kind::local_partial:
      for (int i = 0; i < s.group.n; ++i) l.set_partial(s.group[i], s.op);
      break;
  }
  return l;
}

/// The layouts a plan passes through: [0] = source, [n] = destination.
constexpr std::array<layout_spec, max_plan_steps + 1> plan_layouts(const layout_spec& src,
                                                                   const plan_value& p) noexcept {
  std::array<layout_spec, max_plan_steps + 1> out{};
  out[0] = src;
  for (int i = 0; i < p.n; ++i)
    out[static_cast<std::size_t>(i + 1)] = apply(out[static_cast<std::size_t>(i)], p[i]);
  return out;
}

/// True when every step applies and the plan ends at `dst`.
constexpr bool is_valid_plan(const layout_spec& src, const layout_spec& dst, const plan_value& p) noexcept {
  layout_spec l = src;
  for (int i = 0; i < p.n; ++i) {
    if (!can_apply(l, p[i])) return false;
    l = apply(l, p[i]);
  }
  return l == dst;
}

/// "all_gather(tp) dim 1", "all_to_all(dp, tp) dim 0 -> 1", "all_reduce(dp) sum".
template <class Names>
std::string to_string(const plan_step& s, const Names& names) {
  std::string g = "(";
  for (int i = 0; i < s.group.n; ++i) {
    if (i) g += ", ";
    const auto a = static_cast<std::size_t>(s.group[i]);
    g += a < std::size(names) ? std::string(names[a]) : "axis" + std::to_string(a);
  }
  g += ")";
  std::string out = std::string(to_string(s.kind)) + g;
  switch (s.kind) {
    case step_kind::all_gather:
    case step_kind::local_slice: return out + " dim " + std::to_string(s.dim);
    case step_kind::all_to_all:
      return out + " dim " + std::to_string(s.dim) + " -> " + std::to_string(s.to_dim);
    case step_kind::reduce_scatter:
      return out + " " + std::string(to_string(s.op)) + " dim " + std::to_string(s.dim);
    case step_kind::all_reduce:
    case step_kind::local_partial: return out + " " + std::string(to_string(s.op));
  }
  return out;
}

}  // namespace tessera
