// tessera/layout/local_shape.hpp: which block of the global tensor a rank holds.
//
// Balanced uneven split: N elements over n parts give the first N mod n parts one element
// more than the rest (no empty part while N >= n). A dimension sharded by several axes is
// split recursively: the outermost axis splits the dimension, each next axis splits the
// piece the previous ones left (so one axis chunks the current local size, as in DTensor).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include <tessera/core/config.hpp>
#include <tessera/core/extents.hpp>
#include <tessera/layout/layout_spec.hpp>
#include <tessera/layout/mesh.hpp>

namespace tessera {

/// Size of part `i` of `n` elements split into `parts` balanced parts.
constexpr std::int64_t split_size(std::int64_t n, std::int64_t parts, std::int64_t i) noexcept {
  return n / parts + (i < n % parts ? 1 : 0);
}
/// Offset of part `i` of `n` elements split into `parts` balanced parts.
constexpr std::int64_t split_offset(std::int64_t n, std::int64_t parts, std::int64_t i) noexcept {
  return i * (n / parts) + (i < n % parts ? i : n % parts);
}
/// The largest part: ceil(n / parts).
constexpr std::int64_t split_max(std::int64_t n, std::int64_t parts) noexcept {
  return (n + parts - 1) / parts;
}

/// A rank's block of the global tensor: per dimension an offset and a size.
struct box {
  std::int8_t rank = 0;
  std::array<std::int64_t, max_tensor_rank> offset{};
  std::array<std::int64_t, max_tensor_rank> size{};

  constexpr std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= size[static_cast<std::size_t>(d)];
    return n;
  }
  constexpr shape_t shape() const noexcept {
    shape_t s;
    s.rank = rank;
    for (int d = 0; d < rank; ++d) s[d] = size[static_cast<std::size_t>(d)];
    return s;
  }
  friend constexpr bool operator==(const box&, const box&) = default;
};

/// The box of a whole tensor of shape `s` (offsets 0).
constexpr box whole_box(const shape_t& s) noexcept {
  box b;
  b.rank = s.rank;
  b.size = s.extent;
  return b;
}

/// The intersection of two boxes (size 0 along a dim where they do not overlap).
constexpr box intersect(const box& a, const box& b) noexcept {
  box r;
  r.rank = a.rank;
  for (int d = 0; d < a.rank; ++d) {
    const auto u = static_cast<std::size_t>(d);
    const std::int64_t lo = a.offset[u] > b.offset[u] ? a.offset[u] : b.offset[u];
    const std::int64_t ea = a.offset[u] + a.size[u], eb = b.offset[u] + b.size[u];
    const std::int64_t hi = ea < eb ? ea : eb;
    r.offset[u] = lo;
    r.size[u] = hi > lo ? hi - lo : 0;
  }
  return r;
}

/// True when every dim before `d` has extent 1 in a block of extents `ext`: the pieces of
/// the block split along d are then contiguous and in order, so a collective reads or
/// writes them in place (the runtime, tensor/detail/redistribute.hpp, and the cost model's
/// copies, plan/cost_model.hpp, decide by this one rule).
constexpr bool leading_dims_one(const shape_t& ext, int d) noexcept {
  for (int e = 0; e < d && e < ext.rank; ++e)
    if (ext[e] != 1) return false;
  return true;
}

/// If `region` (inside `block`) is one contiguous run of the row-major `block`, its
/// offset in elements from the block's start; otherwise nothing. An empty region is
/// contiguous at 0.
constexpr std::optional<std::int64_t> contiguous_at(const box& region, const box& block) noexcept {
  const int r = region.rank;
  if (region.numel() == 0) return std::int64_t{0};
  int k = r - 1;  // dims after k are covered fully; dims before k have extent 1
  while (k > 0 && region.size[static_cast<std::size_t>(k)] == block.size[static_cast<std::size_t>(k)]) --k;
  for (int d = 0; d < k; ++d)
    if (region.size[static_cast<std::size_t>(d)] != 1) return std::nullopt;
  std::int64_t off = 0;
  for (int d = 0; d < r; ++d) {
    const auto u = static_cast<std::size_t>(d);
    off = off * block.size[u] + (region.offset[u] - block.offset[u]);
  }
  return off;
}

/// The block held by the rank at mesh coordinates `c`. Partial axes do not affect it.
constexpr box local_box(const layout_spec& s, const mesh_shape& m, const shape_t& global,
                        const coords_t& c) noexcept {
  box b;
  b.rank = s.rank;
  for (int d = 0; d < s.rank; ++d) {
    std::int64_t off = 0, n = global[d];
    for (int i = 0; i < s.axes_of(d); ++i) {
      const int a = s.axis_at(d, i);
      const std::int64_t k = c[static_cast<std::size_t>(a)];
      off += split_offset(n, m[a], k);
      n = split_size(n, m[a], k);
    }
    b.offset[static_cast<std::size_t>(d)] = off;
    b.size[static_cast<std::size_t>(d)] = n;
  }
  return b;
}

/// The largest local extent of dimension d over all ranks (the padded extent that
/// collectives use for uneven shards).
constexpr std::int64_t max_local_extent(const layout_spec& s, const mesh_shape& m,
                                        const shape_t& global, int d) noexcept {
  std::int64_t n = global[d];
  for (int i = 0; i < s.axes_of(d); ++i) n = split_max(n, m[s.axis_at(d, i)]);
  return n;
}

/// Elements of the largest local block (padded), the unit of the cost model.
constexpr std::int64_t max_local_numel(const layout_spec& s, const mesh_shape& m,
                                       const shape_t& global) noexcept {
  std::int64_t n = 1;
  for (int d = 0; d < s.rank; ++d) n *= max_local_extent(s, m, global, d);
  return n;
}

/// Elements of the largest block among one group's ranks: those with `c`'s coordinates on
/// every axis outside the bit mask `group_axes` (what a collective over that group pads to).
constexpr std::int64_t group_max_numel(const layout_spec& s, const mesh_shape& m, const shape_t& global,
                                       const coords_t& c, unsigned group_axes) noexcept {
  std::int64_t members = 1;
  for (int a = 0; a < m.ndim; ++a)
    if ((group_axes >> a) & 1u) members *= m[a];
  std::int64_t best = 0;
  for (std::int64_t r = 0; r < members; ++r) {
    coords_t k = c;
    std::int64_t rest = r;
    for (int a = m.ndim - 1; a >= 0; --a)
      if ((group_axes >> a) & 1u) {
        k[static_cast<std::size_t>(a)] = rest % m[a];
        rest /= m[a];
      }
    const std::int64_t n = local_box(s, m, global, k).numel();
    best = n > best ? n : best;
  }
  return best;
}

/// Product of the sizes of the axes that shard dimension d.
constexpr std::int64_t shard_count(const layout_spec& s, const mesh_shape& m, int d) noexcept {
  std::int64_t n = 1;
  for (int i = 0; i < s.axes_of(d); ++i) n *= m[s.axis_at(d, i)];
  return n;
}

/// True when every rank's block has the same shape (each split divides evenly).
constexpr bool is_even(const layout_spec& s, const mesh_shape& m, const shape_t& global) noexcept {
  for (int d = 0; d < s.rank; ++d) {
    std::int64_t n = global[d];
    for (int i = 0; i < s.axes_of(d); ++i) {
      const std::int64_t p = m[s.axis_at(d, i)];
      if (n % p) return false;
      n /= p;
    }
  }
  return true;
}

}  // namespace tessera
