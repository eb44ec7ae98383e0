// tessera/core/config.hpp: limits and small portable helpers shared by every layer.
#pragma once

#include <cstddef>
#include <cstdint>

/// Marks a function that CUDA code may call too: `__host__ __device__` under nvcc (and
/// clang's CUDA mode), nothing otherwise. For small per-element functions (the FP8
/// conversions of core/float8.hpp) that a CUDA kernel will share with the CPU path.
#ifndef TESSERA_HOST_DEVICE
#if defined(__CUDACC__)
#define TESSERA_HOST_DEVICE __host__ __device__
#else
#define TESSERA_HOST_DEVICE
#endif
#endif

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
