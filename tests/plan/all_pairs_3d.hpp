// Every pair of DTensor-spelled layouts (each of 3 axes R, P(sum), S(0) or S(1): 64
// layouts, 4096 pairs, 2744 of them legal) of a 1024 x 1024 f32 tensor on a 2 x 2 x 2
// mesh. Shared by the compile-time budget test and the run-time cross-check.
#pragma once

#include <array>

#include <tessera/layout/layout_spec.hpp>
#include <tessera/layout/mesh.hpp>

namespace all_pairs_3d {

inline constexpr tessera::mesh_shape mesh{3, {2, 2, 2}};
inline constexpr tessera::shape_t shape{1024, 1024};

constexpr tessera::layout_spec layout(int code) {
  tessera::layout_spec s = tessera::replicated_spec(2, 3);
  for (int a = 0; a < 3; ++a, code /= 4) {
    const int p = code % 4;
    if (p == 1) s.set_partial(a, tessera::reduce::sum);
    if (p >= 2) s.push_shard(p - 2, a);
  }
  return s;
}

inline constexpr std::array<tessera::layout_spec, 64> layouts = [] {
  std::array<tessera::layout_spec, 64> out{};
  for (int i = 0; i < 64; ++i) out[static_cast<std::size_t>(i)] = layout(i);
  return out;
}();

}  // namespace all_pairs_3d
