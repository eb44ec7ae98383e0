// tessera/kernels/cuda/float8_kernels.cuh: the device code of float8.cuh (which has the entry
// points and says what they compute): amaxes per tensor, row and column, the casts, the
// byte transpose through shared-memory tiles.
// nvcc compiles it for the GPU; a host compiler with TESSERA_CUDA_EMULATION defined and
// tests/support/cuda_emulation.hpp included first runs it on the host
// (tests/kernels/test_pointwise_emulated.cpp).
// tessera-requires: cuda (device code: see above)
#pragma once

#ifndef TESSERA_CUDA_EMULATION
#include <cuda_runtime.h>
#endif

#include <cstdint>

#include <tessera/core/float8.hpp>
#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/kernels/cuda/pointwise_kernels.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda::detail {
/// Per-block amaxes of x [n] (grid-stride), into part[blockIdx.x].
static __global__ void abs_max_blocks_k(float* part, const float* x, std::int64_t n) {
  __shared__ float sh[threads];
  float m = 0.0f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    m = pointwise::abs_max_step(m, x[i]);
  m = block_reduce(m, sh, [](float a, float b) { return pointwise::abs_max_step(a, b); });
  if (threadIdx.x == 0) part[blockIdx.x] = m;
}
/// out[r] = amax of row r: one block per row.
static __global__ void abs_max_rows_k(float* out, const float* x, std::int64_t cols) {
  __shared__ float sh[threads];
  const float* row = x + static_cast<std::int64_t>(blockIdx.x) * cols;
  float m = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += threads) m = pointwise::abs_max_step(m, row[c]);
  m = block_reduce(m, sh, [](float a, float b) { return pointwise::abs_max_step(a, b); });
  if (threadIdx.x == 0) out[blockIdx.x] = m;
}
/// part[chunk * cols + c] = the amax of column c of x [rows, cols] over rows [chunk * step,
/// (chunk + 1) * step), chunk = blockIdx.y: blocks of 32 columns x 8 row lanes, so that a
/// column's rows are read by many threads of many blocks (abs_max_cols_k then reduces the
/// chunks; one thread per column over all rows left most SMs idle on 8,192 rows).
static __global__ void abs_max_cols_part_k(float* part, const float* x, std::int64_t rows, std::int64_t cols,
                                           std::int64_t step) {
  __shared__ float sh[8][33];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * step, r1 = r0 + step < rows ? r0 + step : rows;
  float m = 0.0f;
  if (c < cols)
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += 8) m = pointwise::abs_max_step(m, x[r * cols + c]);
  sh[threadIdx.y][threadIdx.x] = m;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int i = 1; i < 8; ++i) m = pointwise::abs_max_step(m, sh[i][threadIdx.x]);
    part[static_cast<std::int64_t>(blockIdx.y) * cols + c] = m;
  }
}
/// out[c] = amax of column c: one thread per column.
static __global__ void abs_max_cols_k(float* out, const float* x, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float m = 0.0f;
    for (std::int64_t r = 0; r < rows; ++r) m = pointwise::abs_max_step(m, x[r * cols + c]);
    out[c] = m;
  }
}
/// The scale of element (r, c) under granularity g.
__device__ inline float scale_at(const float* scales, cpu::f8_granularity g, std::int64_t r, std::int64_t c) {
  return g == cpu::f8_granularity::tensorwise ? scales[0] : (g == cpu::f8_granularity::per_row ? scales[r] : scales[c]);
}
template <class F8>
__global__ void f8_quantize_k(std::uint8_t* bits, const float* x, const float* scales, std::int64_t rows,
                              std::int64_t cols, cpu::f8_granularity g) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    bits[i] = F8(x[i] * scale_at(scales, g, i / cols, i % cols)).bits;
}
template <class F8>
__global__ void f8_dequantize_k(float* out, const std::uint8_t* bits, const float* scales, std::int64_t rows,
                                std::int64_t cols, cpu::f8_granularity g) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = static_cast<float>(F8::from_bits(bits[i])) / scale_at(scales, g, i / cols, i % cols);
}
/// out [cols, rows] = in [rows, cols]^T for bytes, through 32 x 32 shared-memory tiles
/// (coalesced reads and writes; the +1 column keeps the tile's columns in distinct banks).
static __global__ void transpose_bytes_k(std::uint8_t* out, const std::uint8_t* in, std::int64_t rows,
                                         std::int64_t cols) {
  __shared__ std::uint8_t tile[32][33];
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * 32, r0 = static_cast<std::int64_t>(blockIdx.y) * 32;
  for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {
    const std::int64_t r = r0 + dy, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[dy][threadIdx.x] = in[r * cols + c];
  }
  __syncthreads();
  for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {
    const std::int64_t c = c0 + dy, r = r0 + threadIdx.x;  // out row c, column r
    if (c < cols && r < rows) out[c * rows + r] = tile[threadIdx.x][dy];
  }
}
}  // namespace tessera::cuda::detail
