// tessera/tensor/detail/box_copy.hpp: copies between row-major blocks of a global tensor.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <tessera/layout/local_shape.hpp>
#include <tessera/tensor/memory.hpp>

namespace tessera::detail {

/// Copies `region` (global coordinates, inside both blocks) from block `src` (row-major over
/// box `sb`) to block `dst` (row-major over box `db`), both in memory space `Space`: the
/// trailing dims the region covers fully in both blocks merge into one contiguous run, the
/// dim before them is the row of one strided 2-D copy (Space::copy_2d: a memcpy per run on
/// the host, one cudaMemcpy2DAsync on a GPU), and the dims before that are looped over.
template <class Space = host_space, class T>
void copy_region(const T* src, const box& sb, T* dst, const box& db, const box& region) {
  const int r = region.rank;
  if (region.numel() == 0) return;
  if (r == 0) {
    Space::copy(dst, src, sizeof(T));
    return;
  }
  std::array<std::int64_t, max_tensor_rank> ss{}, ds{};
  std::int64_t s = 1, t = 1;
  for (int d = r - 1; d >= 0; --d) {
    const auto u = static_cast<std::size_t>(d);
    ss[u] = s;
    ds[u] = t;
    s *= sb.size[u];
    t *= db.size[u];
  }
  // merge trailing dims that the region covers fully in both blocks into one run
  int inner = r - 1;
  std::int64_t run = region.size[static_cast<std::size_t>(inner)];
  while (inner > 0) {
    const auto u = static_cast<std::size_t>(inner);
    if (region.size[u] != sb.size[u] || region.size[u] != db.size[u]) break;
    --inner;
    run *= region.size[static_cast<std::size_t>(inner)];
  }
  // rows: dim inner - 1 (one row when the run is the whole region)
  const int row = inner - 1;
  const auto ur = static_cast<std::size_t>(row < 0 ? 0 : row);
  const std::int64_t rows = row < 0 ? 1 : region.size[ur];
  const std::size_t width = static_cast<std::size_t>(run) * sizeof(T);
  const std::size_t spitch = row < 0 ? width : static_cast<std::size_t>(ss[ur]) * sizeof(T);
  const std::size_t dpitch = row < 0 ? width : static_cast<std::size_t>(ds[ur]) * sizeof(T);
  std::array<std::int64_t, max_tensor_rank> idx{};  // position within region, dims < row
  for (;;) {
    std::int64_t so = 0, doff = 0;
    for (int d = 0; d < r; ++d) {
      const auto u = static_cast<std::size_t>(d);
      const std::int64_t g = region.offset[u] + (d < row ? idx[u] : 0);
      so += (g - sb.offset[u]) * ss[u];
      doff += (g - db.offset[u]) * ds[u];
    }
    Space::copy_2d(dst + doff, dpitch, src + so, spitch, width, static_cast<std::size_t>(rows));
    int d = row - 1;
    for (; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      if (++idx[u] < region.size[u]) break;
      idx[u] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace tessera::detail
