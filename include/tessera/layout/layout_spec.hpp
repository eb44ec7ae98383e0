// tessera/layout/layout_spec.hpp: the canonical layout as a value.
//
// For each tensor dimension, the ordered list of mesh axes that shard it (outer split
// first), plus the set of axes over which the tensor is partial, all with one reduce op.
// Unused entries are zero, and `op` is sum when no axis is partial, so two equal layouts
// compare equal member by member (and give the same type when used as a template
// argument).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include <tessera/core/config.hpp>
#include <tessera/layout/placement.hpp>

namespace tessera {

struct layout_spec {
  std::int8_t rank = 0;       ///< tensor rank
  std::int8_t mesh_ndim = 0;  ///< number of mesh axes
  std::array<std::int8_t, max_tensor_rank> nshard{};  ///< axes sharding each dim
  std::array<std::array<std::int8_t, max_mesh_axes>, max_tensor_rank> shard{};  ///< outer first
  std::uint8_t partial_mask = 0;  ///< bit a set: partial over mesh axis a
  reduce op = reduce::sum;        ///< the partial axes' reduce op (sum when none)

  constexpr int axes_of(int d) const { return nshard[static_cast<std::size_t>(d)]; }
  constexpr int axis_at(int d, int i) const {
    return shard[static_cast<std::size_t>(d)][static_cast<std::size_t>(i)];
  }
  constexpr bool is_partial(int a) const { return (partial_mask >> a) & 1u; }
  constexpr bool has_partial() const { return partial_mask != 0; }
  /// Tensor dimension that axis `a` shards, or -1.
  constexpr int dim_of(int a) const {
    for (int d = 0; d < rank; ++d)
      for (int i = 0; i < axes_of(d); ++i)
        if (axis_at(d, i) == a) return d;
    return -1;
  }
  /// Position of axis `a` in its dimension's list (0 = outermost), or -1.
  constexpr int position_of(int a) const {
    const int d = dim_of(a);
    if (d < 0) return -1;
    for (int i = 0; i < axes_of(d); ++i)
      if (axis_at(d, i) == a) return i;
    return -1;
  }
  constexpr bool is_replicated(int a) const { return dim_of(a) < 0 && !is_partial(a); }
  constexpr bool is_sharded(int a) const { return dim_of(a) >= 0; }

  // Mutators used by the planner and by normalization; they keep the canonical form.
  constexpr void push_shard(int d, int a) {
    auto& n = nshard[static_cast<std::size_t>(d)];
    if (n >= max_mesh_axes) return;
    shard[static_cast<std::size_t>(d)][static_cast<std::size_t>(n)] = static_cast<std::int8_t>(a);
    ++n;
  }
  /// Removes the innermost axis of dimension d and returns it.
  constexpr int pop_shard(int d) {
    auto& n = nshard[static_cast<std::size_t>(d)];
    --n;
    const int a = shard[static_cast<std::size_t>(d)][static_cast<std::size_t>(n)];
    shard[static_cast<std::size_t>(d)][static_cast<std::size_t>(n)] = 0;
    return a;
  }
  constexpr void set_partial(int a, reduce r) {
    partial_mask = static_cast<std::uint8_t>(partial_mask | (1u << a));
    op = r;
  }
  constexpr void clear_partial(int a) {
    partial_mask = static_cast<std::uint8_t>(partial_mask & ~(1u << a));
    if (!partial_mask) op = reduce::sum;
  }

  friend constexpr bool operator==(const layout_spec&, const layout_spec&) = default;
};

/// A fully replicated layout of a rank-`rank` tensor on a mesh of `mesh_ndim` axes.
constexpr layout_spec replicated_spec(int rank, int mesh_ndim) {
  layout_spec s;
  s.rank = static_cast<std::int8_t>(rank);
  s.mesh_ndim = static_cast<std::int8_t>(mesh_ndim);
  return s;
}

/// What is wrong with a layout's spelling (`none` when nothing is).
enum class layout_error : std::uint8_t {
  none,
  bad_rank,             ///< tensor rank outside [0, 8]
  placement_count,      ///< DTensor spelling with a placement count other than the mesh's rank
  mixed_spellings,      ///< DTensor placements mixed with dim<>/partial_on<>
  shard_dim_range,      ///< shard<D> / dim<D> outside [-rank, rank)
  unknown_axis,         ///< an axis name that is not in the mesh
  axis_twice,           ///< one axis used twice (two dims, or shard and partial)
  dim_twice,            ///< dim<D, ...> given twice for one D
  mixed_partial_ops,    ///< partial axes with different reduce ops
};

constexpr std::string_view describe(layout_error e) noexcept {
  switch (e) {
    case layout_error::none: return "no error";
    case layout_error::bad_rank: return "the tensor rank must be between 0 and 8";
    case layout_error::placement_count:
      return "a DTensor-style layout needs exactly one placement per mesh axis";
    case layout_error::mixed_spellings:
      return "a layout is spelled either with DTensor placements (shard, replicate, partial) "
             "or with dim<> / partial_on<>, not both";
    case layout_error::shard_dim_range:
      return "a shard dimension is outside [-rank, rank) for the tensor's rank";
    case layout_error::unknown_axis: return "an axis named in the layout is not an axis of the mesh";
    case layout_error::axis_twice:
      return "a mesh axis appears twice in the layout; each axis shards one dimension or is "
             "partial, once";
    case layout_error::dim_twice: return "a tensor dimension is listed twice; list all its axes in one dim<>";
    case layout_error::mixed_partial_ops:
      return "the partial axes of one layout must share one reduce op";
  }
  return "?";
}

/// A layout spec with the error found while building it.
struct spec_result {
  layout_spec spec;
  layout_error error = layout_error::none;
};

namespace detail {

constexpr int find_name(const std::string_view* names, int n, std::string_view name) {
  for (int a = 0; a < n; ++a)
    if (names[a] == name) return a;
  return -1;
}

/// Builds the canonical spec from spelling items (either spelling), reporting the first
/// error. `names` are the mesh's axis names in mesh order.
constexpr spec_result make_spec(const std::string_view* names, int mesh_ndim, int rank,
                                const layout_item* items, int n_items) {
  spec_result r;
  r.spec.mesh_ndim = static_cast<std::int8_t>(mesh_ndim);
  if (rank < 0 || rank > max_tensor_rank) return {r.spec, layout_error::bad_rank};
  r.spec.rank = static_cast<std::int8_t>(rank);
  int n_dtensor = 0;
  for (int i = 0; i < n_items; ++i) {
    const auto k = items[i].kind;
    n_dtensor += (k == item_kind::shard || k == item_kind::replicate || k == item_kind::partial);
  }
  if (n_dtensor != 0 && n_dtensor != n_items) return {r.spec, layout_error::mixed_spellings};
  bool used[max_mesh_axes] = {};
  bool dim_seen[max_tensor_rank] = {};
  bool have_op = false;
  reduce op = reduce::sum;
  auto add_partial = [&](int a, reduce o) {
    if (have_op && o != op) return layout_error::mixed_partial_ops;
    have_op = true;
    op = o;
    r.spec.set_partial(a, o);
    return layout_error::none;
  };
  if (n_dtensor > 0) {
    if (n_items != mesh_ndim) return {r.spec, layout_error::placement_count};
    for (int a = 0; a < mesh_ndim; ++a) {
      const layout_item& it = items[a];
      if (it.kind == item_kind::shard) {
        if (it.dim < -rank || it.dim >= rank) return {r.spec, layout_error::shard_dim_range};
        r.spec.push_shard(it.dim < 0 ? it.dim + rank : it.dim, a);
      } else if (it.kind == item_kind::partial) {
        if (auto e = add_partial(a, it.op); e != layout_error::none) return {r.spec, e};
      }
    }
    return r;
  }
  for (int i = 0; i < n_items; ++i) {
    const layout_item& it = items[i];
    int d = 0;
    if (it.kind == item_kind::dim) {
      if (it.dim < -rank || it.dim >= rank) return {r.spec, layout_error::shard_dim_range};
      d = it.dim < 0 ? it.dim + rank : it.dim;
      if (dim_seen[d]) return {r.spec, layout_error::dim_twice};
      dim_seen[d] = true;
    }
    for (int j = 0; j < it.n_names; ++j) {
      const int a = find_name(names, mesh_ndim, it.names[static_cast<std::size_t>(j)]);
      if (a < 0) return {r.spec, layout_error::unknown_axis};
      if (used[a]) return {r.spec, layout_error::axis_twice};
      used[a] = true;
      if (it.kind == item_kind::dim) {
        r.spec.push_shard(d, a);
      } else if (auto e = add_partial(a, it.op); e != layout_error::none) {
        return {r.spec, e};
      }
    }
  }
  return r;
}

}  // namespace detail

/// Checks a spec built elsewhere (e.g. parsed at run time) for internal consistency.
constexpr layout_error validate(const layout_spec& s) {
  if (s.rank < 0 || s.rank > max_tensor_rank) return layout_error::bad_rank;
  bool used[max_mesh_axes] = {};
  for (int d = 0; d < s.rank; ++d)
    for (int i = 0; i < s.axes_of(d); ++i) {
      const int a = s.axis_at(d, i);
      if (a < 0 || a >= s.mesh_ndim) return layout_error::unknown_axis;
      if (used[a]) return layout_error::axis_twice;
      used[a] = true;
    }
  for (int a = 0; a < max_mesh_axes; ++a)
    if (s.is_partial(a)) {
      if (a >= s.mesh_ndim) return layout_error::unknown_axis;
      if (used[a]) return layout_error::axis_twice;
    }
  return layout_error::none;
}

}  // namespace tessera
