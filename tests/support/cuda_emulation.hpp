// A host emulation of the CUDA device code tessera's kernels use (kernels/cuda/*_kernels.cuh),
// so that they run -- slowly -- on a machine without a GPU: a block's threads run as host
// threads or as fibers (cuda_emulation_executor.hpp); __syncthreads, __syncthreads_or,
// __syncwarp and __shfl_xor_sync are barriers over the block's or the warp's threads; a WMMA
// fragment holds its whole 16 x 16 tile in every lane (products and sums in f32; lane 0
// stores it, once the warp has arrived). Include it first, with TESSERA_CUDA_EMULATION
// defined, then the kernels. cuda_runtime_emulation.hpp adds the runtime API and the
// launches, so that the entry points (kernels/cuda/*.cuh) and cuda_kernels run whole.
//
// What it checks: the kernels' tiling, masks, indices, shared-memory layout (each block's
// shared memory starts filled with NaN bytes; WMMA's 32-byte alignment and leading-dimension
// rules are asserted on every load and store; the block's bytes are bounded by an H100's
// 227 KiB) and the placement of their barriers (a missing one is a race ThreadSanitizer
// reports under the threads executor, a divergent one an error under fibers). Not what it
// checks: the hardware fragments' layouts, their accumulation order, timing -- tests/gpu/ on
// a GPU.
#pragma once

#ifndef TESSERA_CUDA_EMULATION
#error "define TESSERA_CUDA_EMULATION before including cuda_emulation.hpp"
#endif

#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <tessera/tensor/dtype.hpp>

#include <cuda_emulation_executor.hpp>

#define __global__ __attribute__((unused))  // a kernel a test does not launch is no warning
#define __device__
#define __host__
#define __launch_bounds__(...)
#define __shared__ static  // a kernel's static shared array: one for the block (blocks run one at a time)

namespace tessera::cuda::emulation {
inline void require_aligned(const void* p, unsigned ld, std::size_t element, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % 32 != 0 || (ld * element) % 16 != 0)
    throw std::logic_error(std::string("emulated WMMA ") + what +
                           ": pointer not 32-byte aligned or leading dimension not a multiple of 16 bytes");
}
}  // namespace tessera::cuda::emulation

inline void __syncthreads() { tessera::cuda::emulation::current->all.arrive_and_wait(); }
inline int __syncthreads_or(int p) {
  auto& b = *tessera::cuda::emulation::current;
  b.all.arrive_and_wait();  // every thread is past the last call's read
  if (tessera::cuda::emulation::thread_rank == 0) b.any.store(0);
  b.all.arrive_and_wait();
  if (p) b.any.store(1);
  b.all.arrive_and_wait();
  return b.any.load();
}
inline void __syncwarp(unsigned = 0xffffffffu) { tessera::cuda::emulation::warp().arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  auto& b = *tessera::cuda::emulation::current;
  const unsigned me = tessera::cuda::emulation::thread_rank;
  b.exchange[me] = v;
  __syncwarp();
  const float r = b.exchange[me ^ static_cast<unsigned>(lane_mask)];
  __syncwarp();
  return r;
}

using __nv_bfloat16 = tessera::bf16;
inline tessera::bf16 __float2bfloat16_rn(float x) { return tessera::bf16(x); }  // nearest even
inline float __bfloat162float(tessera::bf16 x) { return static_cast<float>(x); }
[[noreturn]] inline void __trap() { throw std::logic_error("emulation: a kernel executed __trap()"); }

namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/// A 16 x 16 tile, whole in every lane (an M x K, K x N or M x N operand; all 16 here).
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulation has the 16 x 16 x 16 shape only");
  float x[16][16];
};

template <class Use, class T, class L>
void fill_fragment(fragment<Use, 16, 16, 16, T, L>& f, float v) {
  for (auto& row : f.x)
    for (float& e : row) e = v;
}
/// matrix_a / matrix_b: the fragment's layout says how p is laid out.
template <class Use, class T, class L, class P>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, L>& f, const P* p, unsigned ld) {
  static_assert(!std::is_void_v<L>, "an operand fragment has a layout");
  tessera::cuda::emulation::require_aligned(p, ld, sizeof(P), "load");
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 16; ++j)
      f.x[i][j] = static_cast<float>(std::is_same_v<L, col_major> ? p[j * ld + i] : p[i * ld + j]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ld, layout_t l) {
  tessera::cuda::emulation::require_aligned(p, ld, sizeof(float), "accumulator load");
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 16; ++j) f.x[i][j] = l == mem_col_major ? p[j * ld + i] : p[i * ld + j];
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ld, layout_t l) {
  tessera::cuda::emulation::require_aligned(p, ld, sizeof(float), "store");
  // The warp arrives together (the _sync), so no lane still reads what is stored -- on a GPU
  // each lane stores the elements it holds; here lane 0 stores the whole tile. Other lanes
  // see it after a __syncwarp, which the kernels must have.
  tessera::cuda::emulation::warp().arrive_and_wait();
  if (tessera::cuda::emulation::lane() != 0) return;
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 16; ++j) (l == mem_col_major ? p[j * ld + i] : p[i * ld + j]) = f.x[i][j];
}
template <class TA, class LA, class TB, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, TA, LA>& a,
              const fragment<matrix_b, 16, 16, 16, TB, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  float r[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float s = c.x[i][j];
      for (int k = 0; k < 16; ++k) s += a.x[i][k] * b.x[k][j];
      r[i][j] = s;
    }
  std::memcpy(d.x, r, sizeof r);
}
}  // namespace nvcuda::wmma
