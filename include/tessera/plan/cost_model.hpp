// tessera/plan/cost_model.hpp: what a step costs.
//
// Each rank moves "bus bytes" as nccl-tests counts them (S is the local buffer size in
// bytes: the gathered output for all_gather, the input for reduce_scatter and
// all_reduce, the larger of input and output for all_to_all; n is the group size). Uneven
// shards are padded to the largest block, as the runtime does (tensor/detail/
// redistribute.hpp): all_gather's S is n times the largest input block, reduce_scatter's
// n times the largest output block (uneven all_to_all steps run unpadded, as point-to-point
// calls; the model keeps the larger padded buffer for them):
//   all_gather, reduce_scatter, all_to_all:  S * (n-1)/n
//   all_reduce:                              S * 2(n-1)/n
// and a step takes   base + hops * hop + bus_bytes / bandwidth
// with hops = n-1 (2(n-1) for all_reduce, as a ring). Defaults are DTensor's cost model
// constants (torch/distributed/tensor/_collective_utils.py): 87.7 GB/s per mesh axis,
// 0.6 us per hop, 6.6 us per collective. Give slower axes (across hosts) a lower
// bandwidth and a higher hop latency; a flattened group uses its slowest axis. Local
// steps (slices, marking partial) and collectives over a group of one rank move nothing
// and cost nothing.
//
// Local copies: `copy_GBps` (0, the default: not counted, as in DTensor's model) is the
// speed of a rank's own copies, which the runtime makes where a collective's pieces are not
// contiguous in group order (tensor/detail/redistribute.hpp): an all_gather onto a dim with
// a dim of more than one element before it unpacks its output block, a reduce_scatter so
// packs its input block, an all_to_all packs its input when the dim it splits is so and
// unpacks its output when the dim it gathers is so; a local slice or partial mark copies
// its output block. A fused run of all_to_alls is charged the lesser of what its exchange
// copies (decided as the runtime decides, on the blocks of the rank at coordinates 0:
// plan/runs.hpp, exchange_copied_numel) and its steps' own copies. Each adds
// bytes / copy_GBps. Counted for the rank with the largest blocks.
// `tessera-plan --calibrate` measures it; on CPU ranks a copy costs about what a
// collective moving the same bytes does (docs/benchmarking.md).
//
// Per collective (all_gather, reduce_scatter, all_reduce, all_to_all, and the
// point-to-point exchange of uneven all_to_alls), `coll_scale` multiplies the bandwidth
// term and `coll_base_us` adds latency: a backend's all_reduce need not run at the speed
// of its all_gather. Defaults 1 and 0 give DTensor's model exactly; a link profile
// measured by `tessera-plan --calibrate` (plan/link_profile.hpp) sets all of them:
//   time = base_us + coll_base_us[c] + hops * hop_us + coll_scale[c] * bus_bytes / bandwidth
#pragma once

#include <array>
#include <cstdint>
#include <cmath>
#include <string>
#include <string_view>

#include <tessera/core/config.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/plan/collective.hpp>

namespace tessera {

/// The collectives whose cost the model tells apart (index into cost_model::coll_*).
enum class coll_kind : std::uint8_t { all_gather, reduce_scatter, all_reduce, all_to_all, exchange };
inline constexpr int coll_kinds = 5;
/// The collectives' names, as link profiles and messages spell them.
inline constexpr std::string_view coll_kind_names[coll_kinds] = {"all_gather", "reduce_scatter", "all_reduce",
                                                                 "all_to_all", "exchange"};

constexpr coll_kind coll_kind_of(step_kind k) noexcept {
  switch (k) {
    case step_kind::all_gather: return coll_kind::all_gather;
    case step_kind::reduce_scatter: return coll_kind::reduce_scatter;
    case step_kind::all_reduce: return coll_kind::all_reduce;
    default: return coll_kind::all_to_all;
  }
}

struct cost_model {
  double base_us = 6.6;
  std::array<double, max_mesh_axes> GBps{87.7, 87.7, 87.7, 87.7, 87.7, 87.7, 87.7, 87.7};
  std::array<double, max_mesh_axes> hop_us{0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6};
  std::array<double, coll_kinds> coll_scale{1, 1, 1, 1, 1};
  std::array<double, coll_kinds> coll_base_us{0, 0, 0, 0, 0};
  double copy_GBps = 0;  ///< a rank's local copies (see above); 0: not counted

  constexpr double scale(coll_kind c) const noexcept { return coll_scale[static_cast<std::size_t>(c)]; }
  constexpr double extra_us(coll_kind c) const noexcept { return coll_base_us[static_cast<std::size_t>(c)]; }
  /// The time of copying `bytes` locally (0 when copies are not counted).
  constexpr double copy_us(std::int64_t bytes) const noexcept {
    return copy_GBps > 0 ? static_cast<double>(bytes) / (copy_GBps * 1e3) : 0.0;
  }
  /// Lower bounds over the collectives (for the search's A* heuristic).
  constexpr double min_scale() const noexcept {
    double m = coll_scale[0];
    for (double v : coll_scale) m = v < m ? v : m;
    return m;
  }
  constexpr double min_base_us() const noexcept {
    double m = coll_base_us[0];
    for (double v : coll_base_us) m = v < m ? v : m;
    return base_us + m;
  }

  /// A copy with axis `a`'s link set (e.g. an inter-host axis: 0.22 * 87.7 GB/s, 2.7 us).
  constexpr cost_model with_axis(int a, double gbps, double hop) const {
    cost_model c = *this;
    c.GBps[static_cast<std::size_t>(a)] = gbps;
    c.hop_us[static_cast<std::size_t>(a)] = hop;
    return c;
  }
};

/// The first constant of a cost model that no link has (`field == none` when all are
/// usable). Each constant lies in a range wide enough for any machine and narrow enough
/// that every plan's time is a finite number (a tensor of max_plan_bytes over the slowest
/// link still is): bandwidths (GBps, and copy_GBps unless it is 0: copies not counted) from
/// 1e-6 to 1e12 GB/s; latencies (base_us, hop_us) from 0 to 1e12 us; coll_base_us[c] from
/// -1e12 to 1e12 us with base_us + coll_base_us[c] not negative (a correction may be
/// negative, a latency may not); coll_scale[c] from 1e-6 to 1e6. NaN is in no range. Only
/// the first `axes` axes' links are checked (a mesh's axes).
struct cost_model_problem {
  enum which : std::uint8_t { none, base_us, GBps, hop_us, coll_scale, coll_base_us, copy_GBps } field = none;
  int index = -1;  ///< the axis (GBps, hop_us) or coll_kind (coll_scale, coll_base_us)
  constexpr explicit operator bool() const noexcept { return field != none; }
};

namespace detail {
constexpr bool in_range(double v, double lo, double hi) noexcept { return v >= lo && v <= hi; }  // (NaN: false)
}  // namespace detail

constexpr cost_model_problem check_cost_model(const cost_model& cm, int axes = max_mesh_axes) noexcept {
  using P = cost_model_problem;
  using detail::in_range;
  if (!in_range(cm.base_us, 0, 1e12)) return {P::base_us, -1};
  if (!(cm.copy_GBps == 0 || in_range(cm.copy_GBps, 1e-6, 1e12))) return {P::copy_GBps, -1};
  for (int a = 0; a < axes && a < max_mesh_axes; ++a) {
    const auto i = static_cast<std::size_t>(a);
    if (!in_range(cm.GBps[i], 1e-6, 1e12)) return {P::GBps, a};
    if (!in_range(cm.hop_us[i], 0, 1e12)) return {P::hop_us, a};
  }
  for (int c = 0; c < coll_kinds; ++c) {
    const auto i = static_cast<std::size_t>(c);
    if (!in_range(cm.coll_scale[i], 1e-6, 1e6)) return {P::coll_scale, c};
    if (!in_range(cm.coll_base_us[i], -1e12, 1e12) || cm.base_us + cm.coll_base_us[i] < 0) return {P::coll_base_us, c};
  }
  return {};
}

/// The constant's name, "GBps[1]" or "coll_scale[all_reduce]" ("" for none).
inline std::string cost_field_name(const cost_model_problem& p) {
  using P = cost_model_problem;
  switch (p.field) {
    case P::none: return {};
    case P::base_us: return "base_us";
    case P::copy_GBps: return "copy_GBps";
    case P::GBps: return "GBps[" + std::to_string(p.index) + "]";
    case P::hop_us: return "hop_us[" + std::to_string(p.index) + "]";
    case P::coll_scale: return "coll_scale[" + std::string(coll_kind_names[p.index]) + "]";
    case P::coll_base_us: return "coll_base_us[" + std::string(coll_kind_names[p.index]) + "]";
  }
  return {};
}

/// What must hold for the constant `p` names (see check_cost_model).
constexpr std::string_view cost_field_rule(const cost_model_problem& p) noexcept {
  using P = cost_model_problem;
  switch (p.field) {
    case P::none: return "";
    case P::base_us: return "must be a number of microseconds from 0 to 1e12";
    case P::GBps: return "must be a number of GB/s from 1e-6 to 1e12";
    case P::hop_us: return "must be a number of microseconds from 0 to 1e12";
    case P::coll_scale: return "must be a number from 1e-6 to 1e6";
    case P::coll_base_us:
      return "must be a number of microseconds from -1e12 to 1e12, and base_us plus it (that collective's latency) not "
             "negative";
    case P::copy_GBps: return "must be 0 (copies not counted) or a number of GB/s from 1e-6 to 1e12";
  }
  return "";
}

/// The refusal of an unusable cost model: "cost_model::GBps[1] is -3.000000 but must be ..."
/// ("" when it is usable). `axes`: the mesh's axis count (the links checked).
inline std::string cost_model_text(const cost_model& cm, int axes = max_mesh_axes) {
  const cost_model_problem p = check_cost_model(cm, axes);
  if (!p) return {};
  const auto i = static_cast<std::size_t>(p.index < 0 ? 0 : p.index);
  using P = cost_model_problem;
  const double v = p.field == P::base_us     ? cm.base_us
                   : p.field == P::copy_GBps ? cm.copy_GBps
                   : p.field == P::GBps  ? cm.GBps[i]
                   : p.field == P::hop_us ? cm.hop_us[i]
                   : p.field == P::coll_scale ? cm.coll_scale[i]
                                              : cm.coll_base_us[i];
  const std::string value = std::isnan(v) ? "nan" : std::isinf(v) ? (v > 0 ? "inf" : "-inf") : std::to_string(v);
  return "cost_model::" + cost_field_name(p) + " is " + value + " but " + std::string(cost_field_rule(p)) +
         "; every constant of the cost model is a link's latency or bandwidth (plan/cost_model.hpp)";
}

namespace detail {
/// Elements of the buffer S a collective over n ranks works on, from the largest input
/// and output blocks (see above).
constexpr std::int64_t buffer_numel(step_kind k, std::int64_t in, std::int64_t out, std::int64_t n) noexcept {
  if (k == step_kind::all_gather) return n * in;
  if (k == step_kind::reduce_scatter) return n * out;
  if (k == step_kind::all_to_all) return in > out ? in : out;
  return in;
}

/// Elements a rank copies on its own for one step (kind, dim, to_dim) from a block of
/// extents `in` to one of extents `out`, as the runtime runs it (see copy_GBps above).
constexpr std::int64_t copied_numel(step_kind k, int dim, int to_dim, const shape_t& in, const shape_t& out) noexcept {
  std::int64_t n_in = 1, n_out = 1;
  for (int d = 0; d < in.rank; ++d) n_in *= in[d];
  for (int d = 0; d < out.rank; ++d) n_out *= out[d];
  switch (k) {
    case step_kind::all_gather: return leading_dims_one(out, dim) ? 0 : n_out;
    case step_kind::reduce_scatter: return leading_dims_one(in, dim) ? 0 : n_in;
    case step_kind::all_to_all:
      return (leading_dims_one(in, to_dim) ? 0 : n_in) + (leading_dims_one(out, dim) ? 0 : n_out);
    case step_kind::all_reduce: return 0;
    default: return n_out;  // local_slice, local_partial
  }
}
}  // namespace detail

/// The extents of a layout's largest block (blocks padded).
constexpr shape_t padded_extents(const layout_spec& l, const mesh_shape& m, const shape_t& global) noexcept {
  shape_t e = global;
  for (int d = 0; d < global.rank; ++d) e[d] = max_local_extent(l, m, global, d);
  return e;
}

/// Elements the rank with the largest blocks copies on its own for step `s` (layouts
/// `before` -> `after`); nothing for a collective over a group of one rank.
constexpr std::int64_t step_copied_numel(const plan_step& s, const layout_spec& before, const layout_spec& after,
                                         const mesh_shape& m, const shape_t& global) noexcept {
  if (is_collective(s.kind) && group_size(m, s.group) == 1) return 0;
  return detail::copied_numel(s.kind, s.dim, s.to_dim, padded_extents(before, m, global),
                              padded_extents(after, m, global));
}

/// Traffic and modelled time of one step.
struct step_cost {
  std::int64_t bus_bytes = 0;  ///< bytes each rank moves (nccl-tests' bus bytes)
  std::int64_t buffer_bytes = 0;  ///< S above: the local buffer the collective works on
  double time_us = 0;
};

/// The slowest link of a group of axes (a flattened group uses its slowest axis).
struct group_link {
  double gbps = 1e300;
  double hop_us = 0;
};
constexpr group_link link_of(const cost_model& cm, const axis_group& g) noexcept {
  group_link l;
  for (int i = 0; i < g.n; ++i) {
    const auto a = static_cast<std::size_t>(g[i]);
    l.gbps = cm.GBps[a] < l.gbps ? cm.GBps[a] : l.gbps;
    l.hop_us = cm.hop_us[a] > l.hop_us ? cm.hop_us[a] : l.hop_us;
  }
  return l;
}
/// The modelled time of one collective (or exchange) of kind `c` of `hops` hops moving
/// `bus_bytes`.
constexpr double modelled_us(const cost_model& cm, const group_link& l, double hops, std::int64_t bus_bytes,
                             coll_kind c) noexcept {
  return cm.base_us + cm.extra_us(c) + hops * l.hop_us + cm.scale(c) * static_cast<double>(bus_bytes) / (l.gbps * 1e3);
}

/// `at`: the coordinates of one rank, to count the blocks of that rank's group only (its
/// padding); without it, the largest block of the whole mesh (an upper bound over ranks,
/// what the planner uses).
constexpr step_cost cost_of(const plan_step& s, const layout_spec& before, const layout_spec& after,
                            const mesh_shape& m, const shape_t& global, std::int64_t elem_bytes,
                            const cost_model& cm, const coords_t* at = nullptr) noexcept {
  step_cost c;
  if (!is_collective(s.kind)) {
    c.time_us = 0;
    return c;
  }
  const std::int64_t n = group_size(m, s.group);
  if (n == 1) {  // a group of one rank: nothing moves
    c.time_us = 0;
    return c;
  }
  const unsigned axes = s.group.mask();
  const std::int64_t in = (at ? group_max_numel(before, m, global, *at, axes) : max_local_numel(before, m, global)) * elem_bytes;
  const std::int64_t out = (at ? group_max_numel(after, m, global, *at, axes) : max_local_numel(after, m, global)) * elem_bytes;
  const bool ar = s.kind == step_kind::all_reduce;
  c.buffer_bytes = detail::buffer_numel(s.kind, in, out, n);
  c.bus_bytes = c.buffer_bytes * (ar ? 2 : 1) * (n - 1) / n;
  c.time_us = modelled_us(cm, link_of(cm, s.group), static_cast<double>((ar ? 2 : 1) * (n - 1)), c.bus_bytes,
                          coll_kind_of(s.kind));
  return c;
}

}  // namespace tessera
