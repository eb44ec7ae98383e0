// tessera/kernels/cuda/float8_kernels.cuh: the device code of float8.cuh (which has the entry
// points and says what they compute): amaxes per tensor, row and column, the scales from
// them, the casts, and the byte transpose through shared-memory tiles (of bytes, or of codes
// cast as they are read).
// nvcc compiles it for the GPU; a host compiler with TESSERA_CUDA_EMULATION defined and
// tests/support/cuda_emulation.hpp included first runs it on the host
// (tests/kernels/test_float8_emulated.cpp).
// tessera-requires: cuda (device code: see above)
#pragma once

#ifndef TESSERA_CUDA_EMULATION
#include <cuda_runtime.h>
#endif

#include <cstdint>
#include <type_traits>

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
/// (chunk + 1) * step) (column_chunk; abs_max_cols_k then reduces the chunks).
static __global__ void abs_max_cols_part_k(float* part, const float* x, std::int64_t rows, std::int64_t cols,
                                           std::int64_t step) {
  column_chunk(part, rows, cols, step, [&](std::int64_t r, std::int64_t c) { return x[r * cols + c]; },
               [](float a, float b) { return pointwise::abs_max_step(a, b); });
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
/// scales[i] = the scale of amax[i] (pointwise::f8_scale, the CPU's function: the same bits);
/// in place when scales == amax.
static __global__ void f8_scales_k(float* scales, const float* amax, std::int64_t n, float max_finite, bool pow2) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    scales[i] = pointwise::f8_scale(amax[i], max_finite, pow2);
}

/// The grid of the row-wise casts: rows along y (grid-stride), columns along x, so that no
/// thread divides its index to find its row and column (64-bit divisions cost dozens of
/// instructions an element).
inline dim3 rows_grid(std::int64_t rows, std::int64_t cols) {
  return dim3(blocks_for(cols), static_cast<unsigned>(rows < 1 ? 1 : (rows > 65535 ? 65535 : rows)));
}
/// Calls f(r, c, scale) for every element of a [rows, cols] matrix, on rows_grid's grid.
template <class F>
__device__ inline void for_each_scaled(std::int64_t rows, std::int64_t cols, const float* scales,
                                       cpu::f8_granularity g, F&& f) {
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float row_scale = g == cpu::f8_granularity::per_row ? scales[r] : scales[0];
    for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; c < cols;
         c += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
      f(r, c, g == cpu::f8_granularity::per_column ? scales[c] : row_scale);
  }
}
template <class F8>
__global__ void f8_quantize_k(std::uint8_t* bits, const float* x, const float* scales, std::int64_t rows,
                              std::int64_t cols, cpu::f8_granularity g) {
  for_each_scaled(rows, cols, scales, g, [&](std::int64_t r, std::int64_t c, float s) {
    bits[r * cols + c] = F8(x[r * cols + c] * s).bits;
  });
}
template <class F8>
__global__ void f8_dequantize_k(float* out, const std::uint8_t* bits, const float* scales, std::int64_t rows,
                                std::int64_t cols, cpu::f8_granularity g) {
  for_each_scaled(rows, cols, scales, g, [&](std::int64_t r, std::int64_t c, float s) {
    out[r * cols + c] = static_cast<float>(F8::from_bits(bits[r * cols + c])) / s;
  });
}

/// Per-row scales fused, one block a row: the row's amax (block_reduce), its scale
/// (pointwise::f8_scale), its codes, and 1 / scale into inverse[row] -- one launch instead of
/// four, and the second read of the row comes from the cache. The row is `groups` groups of V
/// elements (V = 4: 16-byte loads, 4-byte stores of codes; the launcher checks alignment).
template <class F8, int V>
__global__ void f8_row_codes_k(u8_group<V>* bits, float* inverse, const f32_group<V>* x, std::int64_t groups,
                               float max_finite, bool pow2) {
  __shared__ float sh[threads];
  const std::int64_t r = blockIdx.x;
  const f32_group<V>* row = x + r * groups;
  float m = 0.0f;
  for (std::int64_t c = threadIdx.x; c < groups; c += threads) {
    const f32_group<V> a = row[c];
    for (int j = 0; j < V; ++j) m = pointwise::abs_max_step(m, a.v[j]);
  }
  m = block_reduce(m, sh, [](float a, float b) { return pointwise::abs_max_step(a, b); });
  const float s = pointwise::f8_scale(m, max_finite, pow2);
  for (std::int64_t c = threadIdx.x; c < groups; c += threads) {
    const f32_group<V> a = row[c];
    u8_group<V> b;
    for (int j = 0; j < V; ++j) b.v[j] = F8(a.v[j] * s).bits;
    bits[r * groups + c] = b;
  }
  if (threadIdx.x == 0) inverse[r] = 1.0f / s;
}

/// Element (r, c) of what transpose_k transposes: with Cast = std::uint8_t a byte of `in`
/// (bytes [rows, cols]); with an FP8 type the code of x * scale, x = `in` (floats [rows,
/// cols]) cast as it is read (f8_quantize_k's code, transposed). The pointers are the
/// kernel's own arguments (what the host emulation opens a kernel's reach by).
template <class Cast>
__device__ inline std::uint8_t transpose_input(const void* in, const float* scales, cpu::f8_granularity g,
                                               std::int64_t r, std::int64_t c, std::int64_t cols) {
  if constexpr (std::is_same_v<Cast, std::uint8_t>) {
    return static_cast<const std::uint8_t*>(in)[r * cols + c];
  } else {
    return Cast(static_cast<const float*>(in)[r * cols + c] * scale_at(scales, g, r, c)).bits;
  }
}
/// The side of transpose_k's square tiles, and the threads of the blocks it is launched on
/// (32 x 8; the kernel strides over blockDim's threads).
inline constexpr int transpose_tile = 64;
inline constexpr int transpose_threads = 256;
using transpose_tile_bytes = std::uint8_t[transpose_tile][transpose_tile + 1];
/// The first half of transpose_k and f8_dual_codes_k: f(dr, dc, r, c) for each element (r, c)
/// of the block's tile of a [rows, cols] matrix -- tile (blockIdx.y, blockIdx.x), (dr, dc)
/// inside it -- the block's threads striding over the tile's rows.
template <class F>
__device__ inline void for_each_in_tile(std::int64_t rows, std::int64_t cols, F&& f) {
  constexpr int n = transpose_tile;
  const int tid = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  const int nt = static_cast<int>(blockDim.x * blockDim.y);
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * n, r0 = static_cast<std::int64_t>(blockIdx.y) * n;
  for (int e = tid; e < n * n; e += nt) {
    const int dr = e / n, dc = e % n;
    const std::int64_t r = r0 + dr, c = c0 + dc;
    if (r < rows && c < cols) f(dr, dc, r, c);
  }
}
/// The second half: the block's tile, filled, stored transposed into out [cols, rows].
__device__ inline void store_transposed(std::uint8_t* out, const transpose_tile_bytes& tile, std::int64_t rows,
                                        std::int64_t cols, bool words) {
  constexpr int wn = transpose_tile / 4;
  const int tid = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  const int nt = static_cast<int>(blockDim.x * blockDim.y);
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * transpose_tile,
                     r0 = static_cast<std::int64_t>(blockIdx.y) * transpose_tile;
  for (int e = tid; e < transpose_tile * wn; e += nt) {
    const int dc = e / wn, w = e % wn;
    const std::int64_t c = c0 + dc, r = r0 + 4 * w;  // out row c, its columns r .. r + 3
    if (c >= cols || r >= rows) continue;
    std::uint8_t* o = out + c * rows + r;
    if (words) {  // rows % 4 == 0: r + 3 < rows
      *reinterpret_cast<std::uint32_t*>(o) =
          std::uint32_t(tile[4 * w][dc]) | std::uint32_t(tile[4 * w + 1][dc]) << 8 |
          std::uint32_t(tile[4 * w + 2][dc]) << 16 | std::uint32_t(tile[4 * w + 3][dc]) << 24;
    } else {
      for (int k = 0; k < 4 && r + k < rows; ++k) o[k] = tile[4 * w + k][dc];
    }
  }
}
/// out [cols, rows] = transpose_input<Cast>(r, c) transposed, through 64 x 64 shared-memory
/// tiles of bytes on blocks of 32 x 8 threads: each warp reads 32 consecutive elements of a
/// row of `in`, and each output row's 64 bytes go out as 16 four-byte words when `words` (rows
/// a multiple of 4 and `out` 4-byte aligned: every output row starts on a word), else byte by
/// byte. A word gathers a column of the tile, rows 65 bytes apart: the 16 words of a column
/// read 16 distinct banks. `scales` and `g` only for an FP8 Cast.
/// Measured on an H200 (docs/performance.md, "On GPUs"): this form, each read stored to the
/// tile as it comes, 60.5 ms a Float8 step of the 8B benchmark; a thread's 16 reads issued
/// into registers before any store (unrolled, fixed blocks), 71.1 ms -- so not that.
template <class Cast>
__global__ void transpose_k(std::uint8_t* out, const void* in, const float* scales, std::int64_t rows,
                            std::int64_t cols, cpu::f8_granularity g, bool words) {
  __shared__ transpose_tile_bytes tile;
  for_each_in_tile(rows, cols, [&](int dr, int dc, std::int64_t r, std::int64_t c) {
    tile[dr][dc] = transpose_input<Cast>(in, scales, g, r, c, cols);
  });
  __syncthreads();
  store_transposed(out, tile, rows, cols, words);
}
/// Float8 rowwise's two casts of one tensor (the backward's output gradient: scaled by row for
/// dX = dY W, by column and transposed for dW = dY^T X) from two reads instead of four
/// (cuda::f8_codes_both). First pass: the amaxes of x's rows and columns, as the bits of
/// non-negative floats (NaN above infinity: NaN sticks, as pointwise::abs_max_step) maxed
/// atomically into amax_bits [rows + cols] (zeroed): a block covers dual_amax_rows rows of 32
/// groups of V columns; a warp's row maximum and the block's column maxima take one atomic
/// each. Maxima: the same bits in any order, so deterministic.
inline constexpr int dual_amax_rows = 128;
template <int V>
__global__ void f8_dual_amax_k(std::uint32_t* amax_bits, const f32_group<V>* x, std::int64_t rows,
                               std::int64_t groups) {
  __shared__ float sh[8][32 * V + 1];
  const auto step = [](float a, float b) { return pointwise::abs_max_step(a, b); };
  const std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * dual_amax_rows;
  const std::int64_t r1 = r0 + dual_amax_rows < rows ? r0 + dual_amax_rows : rows;
  float cm[V] = {};
  // a warp a row (its lanes' groups), four rows 8 apart a turn: four loads in flight before
  // the rows' maxima go across the warp
  for (std::int64_t rb = r0 + threadIdx.y; rb < r1; rb += 32) {
    float m[4];
    for (int k = 0; k < 4; ++k) {
      const std::int64_t r = rb + 8 * k;
      m[k] = 0.0f;
      if (r >= r1 || g >= groups) continue;
      const f32_group<V> a = x[r * groups + g];
      for (int j = 0; j < V; ++j) m[k] = step(m[k], a.v[j]), cm[j] = step(cm[j], a.v[j]);
    }
    for (int lane = 16; lane > 0; lane /= 2)
      for (int k = 0; k < 4; ++k) m[k] = step(m[k], __shfl_xor_sync(0xffffffffu, m[k], lane));
    if (threadIdx.x == 0)
      for (int k = 0; k < 4 && rb + 8 * k < r1; ++k)
        atomicMax(amax_bits + rb + 8 * k, tessera::detail::bit_cast<std::uint32_t>(m[k]));
  }
  for (int j = 0; j < V; ++j) sh[threadIdx.y][threadIdx.x * V + j] = cm[j];
  __syncthreads();
  const std::int64_t cols = groups * V;
  for (int e = static_cast<int>(threadIdx.y * 32 + threadIdx.x); e < 32 * V; e += 256) {  // the tile's columns
    const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 * V + e;
    if (c >= cols) continue;
    float m = sh[0][e];
    for (int i = 1; i < 8; ++i) m = step(m, sh[i][e]);
    atomicMax(amax_bits + rows + c, tessera::detail::bit_cast<std::uint32_t>(m));
  }
}
/// f8_dual_amax_k's grid for x [rows, groups * V] (its blocks: 32 x 8 threads).
inline dim3 dual_amax_grid(std::int64_t rows, std::int64_t groups) {
  return dim3(static_cast<unsigned>((groups + 31) / 32),
              static_cast<unsigned>(rows > 0 ? (rows + dual_amax_rows - 1) / dual_amax_rows : 1));
}
/// In place, the amaxes' bits [rows + cols] become their scales (pointwise::f8_scale: the CPU's
/// bits): the rows' under the row cast's limits, the columns' under the column cast's.
static __global__ void f8_dual_scales_k(std::uint32_t* s, std::int64_t rows, std::int64_t n, float row_max_finite,
                                        bool row_pow2, float col_max_finite, bool col_pow2) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float amax = tessera::detail::bit_cast<float>(s[i]);
    const float scale = i < rows ? pointwise::f8_scale(amax, row_max_finite, row_pow2)
                                 : pointwise::f8_scale(amax, col_max_finite, col_pow2);
    s[i] = tessera::detail::bit_cast<std::uint32_t>(scale);
  }
}
/// Second pass: each element read once, its code under its row's scale stored to bits [rows,
/// cols] and its code under its column's scale through the tile to bits_t [cols, rows]
/// (transpose_k's tiles and stores; `words` as there). scales [rows + cols]: the rows', then
/// the columns'.
template <class R8, class C8>
__global__ void f8_dual_codes_k(std::uint8_t* bits, std::uint8_t* bits_t, const float* x, const float* scales,
                                std::int64_t rows, std::int64_t cols, bool words) {
  __shared__ transpose_tile_bytes tile;
  for_each_in_tile(rows, cols, [&](int dr, int dc, std::int64_t r, std::int64_t c) {
    const float v = x[r * cols + c];
    bits[r * cols + c] = R8(v * scales[r]).bits;
    tile[dr][dc] = C8(v * scales[rows + c]).bits;
  });
  __syncthreads();
  store_transposed(bits_t, tile, rows, cols, words);
}
/// 1 / y[i], in place.
static __global__ void reciprocal_k(float* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] = 1.0f / y[i];
}
/// The tiles of transpose_k by fours (transpose_fours_k, f8_dual_codes_fours_k; where the
/// columns are a multiple of 4 and x is 16-byte aligned): the same 64 x 64 tiles and stores,
/// each thread of the 256 reading 4 floats at a time -- one 16-byte load -- in one group of
/// 4 columns of the tile and 4 rows 16 apart (16 threads across a tile row), its column scales
/// loaded once. Not the default until a GPU times it: cuda::f8_transpose_path.
struct four_tile {
  int gx, gy;                // the thread's group of 4 columns (of 16) and first row (of 16)
  std::int64_t r0, c;        // the tile's first row, the thread's first column
  __device__ four_tile() {
    const int tid = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
    gx = tid % (transpose_tile / 4), gy = tid / (transpose_tile / 4);
    r0 = static_cast<std::int64_t>(blockIdx.y) * transpose_tile;
    c = static_cast<std::int64_t>(blockIdx.x) * transpose_tile + 4 * gx;
  }
  /// The tile row of the thread's k-th row (k < 4).
  __device__ int row(int k) const { return gy + 16 * k; }
};
template <class F8>
__global__ void transpose_fours_k(std::uint8_t* out, const f32_group<4>* x, const float* scales, std::int64_t rows,
                                  std::int64_t cols, cpu::f8_granularity g, bool words) {
  __shared__ transpose_tile_bytes tile;
  const four_tile t;
  if (t.c < cols) {
    float cs[4];
    for (int j = 0; j < 4; ++j) cs[j] = scales[g == cpu::f8_granularity::per_column ? t.c + j : 0];
    for (int k = 0; k < 4; ++k) {
      const std::int64_t r = t.r0 + t.row(k);
      if (r >= rows) break;
      const f32_group<4> a = x[(r * cols + t.c) / 4];
      const float rs = g == cpu::f8_granularity::per_row ? scales[r] : 0.0f;
      for (int j = 0; j < 4; ++j)
        tile[t.row(k)][4 * t.gx + j] = F8(a.v[j] * (g == cpu::f8_granularity::per_row ? rs : cs[j])).bits;
    }
  }
  __syncthreads();
  store_transposed(out, tile, rows, cols, words);
}
/// f8_dual_codes_k by fours: each group's 4 row codes stored as one 4-byte word.
template <class R8, class C8>
__global__ void f8_dual_codes_fours_k(u8_group<4>* bits, std::uint8_t* bits_t, const f32_group<4>* x,
                                      const float* scales, std::int64_t rows, std::int64_t cols, bool words) {
  __shared__ transpose_tile_bytes tile;
  const four_tile t;
  if (t.c < cols) {
    float cs[4];
    for (int j = 0; j < 4; ++j) cs[j] = scales[rows + t.c + j];
    for (int k = 0; k < 4; ++k) {
      const std::int64_t r = t.r0 + t.row(k);
      if (r >= rows) break;
      const f32_group<4> a = x[(r * cols + t.c) / 4];
      const float rs = scales[r];
      u8_group<4> b;
      for (int j = 0; j < 4; ++j) {
        b.v[j] = R8(a.v[j] * rs).bits;
        tile[t.row(k)][4 * t.gx + j] = C8(a.v[j] * cs[j]).bits;
      }
      bits[(r * cols + t.c) / 4] = b;
    }
  }
  __syncthreads();
  store_transposed(bits_t, tile, rows, cols, words);
}
/// transpose_k's grid for a [rows, cols] matrix (its blocks: 32 x 8 threads, transpose_threads).
inline dim3 transpose_grid(std::int64_t rows, std::int64_t cols) {
  return dim3(static_cast<unsigned>((cols + transpose_tile - 1) / transpose_tile),
              static_cast<unsigned>((rows + transpose_tile - 1) / transpose_tile));
}
/// transpose_k's block: 32 x 8 threads.
inline dim3 transpose_block() { return dim3(32, transpose_threads / 32); }
/// Whether transpose_k may store words into `out` for a [rows, cols] input.
inline bool transpose_words(const std::uint8_t* out, std::int64_t rows) { return rows % 4 == 0 && aligned(out, 4); }
}  // namespace tessera::cuda::detail
