// tessera/kernels/cuda/float8.cuh: Float8's amaxes, scales and casts on the GPU, as
// kernels/cpu/float8.hpp computes them (torchao's numerics).
// tessera-requires: cuda (compiled by nvcc: include from a .cu translation unit)
//
//   cuda::f8_scales(scales, x, rows, cols, cast[, reduce])   amaxes, then the scales, on the
//        device: pointwise::f8_scale, the CPU path's own function (no libm: the scales are
//        the CPU's bit for bit), with no wait for the device. A `reduce` other than
//        cpu::f8_local_amax (tensor parallel's max over the TP ranks) gets the amaxes in
//        device memory, after their kernel is queued on `s`: it fences before it reads them
//        (the TP hooks' all-reduce over NCCL does). Until 2026-11-29 they went to the host and
//        back, and the TP hooks all-reduced host memory over NCCL, which NCCL refuses:
//        Float8 under tensor parallel on GPUs failed (gpu_emulated.cuda_recipes found it)
//   cuda::f8_quantize(bits, x, scales, rows, cols, cast)     the FP8 codes of x * scale
//   cuda::f8_quantize_transposed(bits_t, x, scales, rows, cols, cast)  the same codes,
//        written transposed [cols, rows] in the same pass (the backward's TN operands)
//   cuda::f8_dequantize(out, bits, scales, rows, cols, cast) float(code) / scale
// The amax step (NaN sticking) is pointwise::abs_max_step and the casts are core/float8.hpp's
// TESSERA_HOST_DEVICE conversions (saturating, round to nearest even): the codes equal the
// CPU's exactly. Amaxes are maxima, so any reduction order gives the same bits.
// The device code is float8_kernels.cuh, which the host tests also run through a CUDA
// emulation (tests/kernels/test_float8_emulated.cpp); this file launches it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include <tessera/core/error.hpp>
#include <tessera/core/float8.hpp>
#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/kernels/cuda/attention_library.hpp>
#include <tessera/kernels/cuda/float8_kernels.cuh>
#include <tessera/kernels/cuda/launch.cuh>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/pointwise.hpp>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera::cuda {

/// How Float8's cast-and-transpose kernels read their tiles (f8_quantize_transposed,
/// f8_codes_both): `elements`, a float at a time (transpose_k, f8_dual_codes_k: the form timed
/// on an H200, the default), or `fours`, 4 floats a load with each thread's column scales
/// loaded once (transpose_fours_k, f8_dual_codes_fours_k; where the columns are a multiple of
/// 4 and the tensor 16-byte aligned). The same codes, bit for bit; `fours` not yet timed on a
/// GPU (bench_gpu_kernels times both).
enum class f8_transpose_path { elements, fours };

/// The path named by `value` (TESSERA_F8_TRANSPOSE's): "elements", "fours", or nullptr or
/// empty for the default, elements; anything else is refused with what to give.
inline f8_transpose_path f8_transpose_path_named(const char* value) {
  return detail::choice_named<f8_transpose_path>(
      "TESSERA_F8_TRANSPOSE", value, {{"elements", f8_transpose_path::elements}, {"fours", f8_transpose_path::fours}},
      "give 'elements' (a float a load, the default) or 'fours' (4 floats a load)");
}
/// The path the casts take: TESSERA_F8_TRANSPOSE, read once, or what set_f8_transpose_path
/// set since.
inline f8_transpose_path default_f8_transpose_path() {
  return detail::setting<f8_transpose_path, f8_transpose_path_named>("TESSERA_F8_TRANSPOSE");
}
inline void set_f8_transpose_path(f8_transpose_path p) {
  detail::setting<f8_transpose_path, f8_transpose_path_named>("TESSERA_F8_TRANSPOSE") = p;
}

namespace detail {
/// Whether the casts of x [rows, cols] read their tiles by fours.
inline bool transpose_by_fours(const float* x, std::int64_t cols) {
  return default_f8_transpose_path() == f8_transpose_path::fours && cols % 4 == 0 && aligned(x, 16);
}
}  // namespace detail


/// out [cols, rows] = the FP8 codes in [rows, cols] transposed: the operands the backward's
/// FP8 GEMMs need in the TN layout (gemm.hpp, matmul_grad_input_f8 / matmul_grad_weight_f8).
inline void f8_transpose(std::uint8_t* out, const std::uint8_t* in, std::int64_t rows, std::int64_t cols,
                         cudaStream_t s = nullptr) {
  if (rows == 0 || cols == 0) return;
  TESSERA_LAUNCH(detail::transpose_grid(rows, cols), detail::transpose_block(), 0, s, detail::transpose_k<std::uint8_t>)(
      out, in, nullptr, rows, cols, cpu::f8_granularity::tensorwise, detail::transpose_words(out, rows));
  detail::launched("cuda::f8_transpose");
}

namespace detail {
/// This host thread's device scratch for partial amaxes, at least n floats.
inline float* amax_scratch(std::int64_t n) {
  thread_local tensor<float, cuda_space> buf;
  return grown(buf, n, "Float8's amax scratch");
}
}  // namespace detail

/// The amaxes of x [rows, cols] (device) under granularity g into `amax` (device; 1, rows or
/// cols floats). Tensorwise and per column in two passes: partial amaxes (per block; per chunk
/// of 256 rows and column) into this host thread's scratch, then their amax -- maxima, so the
/// same bits in any order.
inline void f8_amax(float* amax, const float* x, std::int64_t rows, std::int64_t cols, cpu::f8_granularity g,
                    cudaStream_t s = nullptr) {
  switch (g) {
    case cpu::f8_granularity::tensorwise: {
      const unsigned blocks = detail::blocks_for(rows * cols) < 1024 ? detail::blocks_for(rows * cols) : 1024;
      float* part = detail::amax_scratch(blocks);
      TESSERA_LAUNCH(blocks, detail::threads, 0, s, detail::abs_max_blocks_k)(part, x, rows * cols);
      TESSERA_LAUNCH(1, detail::threads, 0, s, detail::abs_max_blocks_k)(amax, part, blocks);
      break;
    }
    case cpu::f8_granularity::per_row:
      if (rows > 0) TESSERA_LAUNCH(static_cast<unsigned>(rows), detail::threads, 0, s, detail::abs_max_rows_k)(
          amax, x, cols);
      break;
    case cpu::f8_granularity::per_column: {
      if (cols == 0) break;
      constexpr std::int64_t step = 256;
      const std::int64_t chunks = rows > 0 ? (rows + step - 1) / step : 1;
      float* part = detail::amax_scratch(chunks * cols);
      TESSERA_LAUNCH(detail::column_chunk_grid(rows, cols, step), dim3(32, 8), 0, s, detail::abs_max_cols_part_k)(
          part, x, rows, cols, step);
      TESSERA_LAUNCH(detail::blocks_for(cols), detail::threads, 0, s, detail::abs_max_cols_k)(amax, part, chunks, cols);
      break;
    }
  }
  detail::launched("cuda::f8_amax");
}

/// The scales of x [rows, cols] (device) under cast c, written to `scales` (device): see the
/// top of this file. `reduce(amax, n)` runs on a host copy of the amaxes.
template <class Reduce = cpu::f8_local_amax>
void f8_scales(float* scales, const float* x, std::int64_t rows, std::int64_t cols, cpu::f8_cast c,
               Reduce&& reduce = {}, cudaStream_t s = nullptr) {
  check(c.target == dtype::f8_e4m3fn || c.target == dtype::f8_e5m2,
        "cuda::f8_scales: the target must be dtype::f8_e4m3fn or dtype::f8_e5m2");
  const std::int64_t n = cpu::f8_scale_count(c.granularity, rows, cols);
  f8_amax(scales, x, rows, cols, c.granularity, s);
  if constexpr (!cpu::f8_reduces_nothing<Reduce>) reduce(scales, n);  // device memory (header)
  TESSERA_LAUNCH(detail::blocks_for(n), detail::threads, 0, s, detail::f8_scales_k)(
      scales, scales, n, cpu::f8_max_finite(c.target), c.rounding == cpu::f8_scale_rounding::power_of_two);
  detail::launched("cuda::f8_scales");
}

/// bits[i] = the FP8 code of x[i] * scale (saturating, round to nearest even), as cpu::f8_quantize.
inline void f8_quantize(std::uint8_t* bits, const float* x, const float* scales, std::int64_t rows, std::int64_t cols,
                        cpu::f8_cast c, cudaStream_t s = nullptr) {
  if (rows == 0 || cols == 0) return;
  cpu::detail::with_f8_type(c.target, [&]<class F8>(F8) {
    TESSERA_LAUNCH(detail::rows_grid(rows, cols), detail::threads, 0, s, detail::f8_quantize_k<F8>)(
        bits, x, scales, rows, cols, c.granularity);
  });
  detail::launched("cuda::f8_quantize");
}

/// bits_t [cols, rows] = the codes of f8_quantize transposed, cast and transposed in one pass.
inline void f8_quantize_transposed(std::uint8_t* bits_t, const float* x, const float* scales, std::int64_t rows,
                                   std::int64_t cols, cpu::f8_cast c, cudaStream_t s = nullptr) {
  if (rows == 0 || cols == 0) return;
  const bool words = detail::transpose_words(bits_t, rows);
  cpu::detail::with_f8_type(c.target, [&]<class F8>(F8) {
    if (detail::transpose_by_fours(x, cols))
      TESSERA_LAUNCH(detail::transpose_grid(rows, cols), detail::transpose_block(), 0, s,
                     detail::transpose_fours_k<F8>)(bits_t, reinterpret_cast<const detail::f32_group<4>*>(x), scales,
                                                    rows, cols, c.granularity, words);
    else
      TESSERA_LAUNCH(detail::transpose_grid(rows, cols), detail::transpose_block(), 0, s, detail::transpose_k<F8>)(
          bits_t, x, scales, rows, cols, c.granularity, words);
  });
  detail::launched("cuda::f8_quantize_transposed");
}

/// Both of Float8 rowwise's casts of x [rows, cols] from two reads of it, where f8_codes would
/// take four (an amax pass and a cast each): `bits` [rows, cols] its codes under `by_row` (a
/// per-row cast), `bits_t` [cols, rows] its codes under `by_column` (per column) transposed,
/// and `inverse` [rows + cols] their dequantization scales (1 / scale), the rows' first --
/// each equal to what f8_codes gives for that cast alone. The backward's output gradient is
/// such a tensor (kernels/cuda/float8_linear.cuh). Amaxes of this rank's values only: a cast
/// whose groups span ranks goes through f8_scales.
inline void f8_codes_both(std::uint8_t* bits, std::uint8_t* bits_t, float* inverse, const float* x, std::int64_t rows,
                          std::int64_t cols, cpu::f8_cast by_row, cpu::f8_cast by_column, cudaStream_t s = nullptr) {
  check(by_row.granularity == cpu::f8_granularity::per_row && by_column.granularity == cpu::f8_granularity::per_column,
        "cuda::f8_codes_both: the casts must be one per row and one per column");
  if (rows == 0 || cols == 0) return;
  const std::int64_t n = rows + cols;
  auto* amax_bits = reinterpret_cast<std::uint32_t*>(inverse);
  cuda_check(cudaMemsetAsync(inverse, 0, static_cast<std::size_t>(n) * sizeof(float), s), "cudaMemsetAsync");
  if (cols % 4 == 0 && detail::aligned(x, 16))
    TESSERA_LAUNCH(detail::dual_amax_grid(rows, cols / 4), dim3(32, 8), 0, s, detail::f8_dual_amax_k<4>)(
        amax_bits, reinterpret_cast<const detail::f32_group<4>*>(x), rows, cols / 4);
  else
    TESSERA_LAUNCH(detail::dual_amax_grid(rows, cols), dim3(32, 8), 0, s, detail::f8_dual_amax_k<1>)(
        amax_bits, reinterpret_cast<const detail::f32_group<1>*>(x), rows, cols);
  TESSERA_LAUNCH(detail::blocks_for(n), detail::threads, 0, s, detail::f8_dual_scales_k)(
      amax_bits, rows, n, cpu::f8_max_finite(by_row.target), by_row.rounding == cpu::f8_scale_rounding::power_of_two,
      cpu::f8_max_finite(by_column.target), by_column.rounding == cpu::f8_scale_rounding::power_of_two);
  const bool words = detail::transpose_words(bits_t, rows), fours = detail::transpose_by_fours(x, cols);
  cpu::detail::with_f8_type(by_row.target, [&]<class R8>(R8) {
    cpu::detail::with_f8_type(by_column.target, [&]<class C8>(C8) {
      if (fours && detail::aligned(bits, 4))
        TESSERA_LAUNCH(detail::transpose_grid(rows, cols), detail::transpose_block(), 0, s,
                       detail::f8_dual_codes_fours_k<R8, C8>)(reinterpret_cast<detail::u8_group<4>*>(bits), bits_t,
                                                              reinterpret_cast<const detail::f32_group<4>*>(x),
                                                              inverse, rows, cols, words);
      else
        TESSERA_LAUNCH(detail::transpose_grid(rows, cols), detail::transpose_block(), 0, s,
                       detail::f8_dual_codes_k<R8, C8>)(bits, bits_t, x, inverse, rows, cols, words);
    });
  });
  TESSERA_LAUNCH(detail::blocks_for(n), detail::threads, 0, s, detail::reciprocal_k)(inverse, n);
  detail::launched("cuda::f8_codes_both");
}

/// out[i] = float(code) / scale, as cpu::f8_dequantize.
inline void f8_dequantize(float* out, const std::uint8_t* bits, const float* scales, std::int64_t rows,
                          std::int64_t cols, cpu::f8_cast c, cudaStream_t s = nullptr) {
  if (rows == 0 || cols == 0) return;
  cpu::detail::with_f8_type(c.target, [&]<class F8>(F8) {
    TESSERA_LAUNCH(detail::rows_grid(rows, cols), detail::threads, 0, s, detail::f8_dequantize_k<F8>)(
        out, bits, scales, rows, cols, c.granularity);
  });
  detail::launched("cuda::f8_dequantize");
}

}  // namespace tessera::cuda
