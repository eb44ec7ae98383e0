// What the tests of the CUDA kernels on the host's emulation share (test_pointwise_emulated.cpp,
// test_float8_emulated.cpp): include after cuda_emulation.hpp and the kernels.
#pragma once

#include <cstdint>

#include "fd.hpp"

namespace emulated_kernel_tests {
using tt::randn;  // seeded normal values, as the CPU kernels' tests draw them
/// One block per row, as the row kernels launch.
inline dim3 rows_grid(std::int64_t n) { return {static_cast<unsigned>(n), 1, 1}; }
/// A grid-stride launch, as blocks_for sizes it.
inline dim3 stride_grid(std::int64_t n) { return {tessera::cuda::detail::blocks_for(n), 1, 1}; }
}  // namespace emulated_kernel_tests
