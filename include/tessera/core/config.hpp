// tessera/core/config.hpp: limits and small portable helpers shared by every layer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

/// The largest number of mesh axes a mesh may have.
inline constexpr int max_mesh_axes = 8;
/// The largest tensor rank a layout may describe.
inline constexpr int max_tensor_rank = 8;

/// A size that is not known until run time (as std::dynamic_extent, but signed).
inline constexpr std::int64_t dyn = -1;

/// True for sizes that are known at compile time.
constexpr bool is_static(std::int64_t n) noexcept { return n != dyn; }

}  // namespace tessera
