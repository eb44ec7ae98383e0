// A host emulation of the CUDA device code tessera's kernels use (kernels/cuda/*_kernels.cuh),
// so that they run -- slowly -- on a machine without a GPU: a block's threads run as host
// threads or as fibers (cuda_emulation_executor.hpp); __syncthreads, __syncthreads_or,
// __syncwarp and __shfl_xor_sync are barriers over the block's or the warp's threads (atomicMax
// on unsigned a compare-and-swap);
// mma.sync's m16n8k16 bf16 (mma_m16n8k16_bf16) and ldmatrix's x4 (ldmatrix_x4, with or without .trans) take and give
// each lane's registers in the PTX ISA's fragment layouts, exchanged through the block, so
// that a kernel's fragment indexing is checked exactly (products and sums in f32). Include it first, with TESSERA_CUDA_EMULATION
// defined, then the kernels. cuda_runtime_emulation.hpp adds the runtime API and the
// launches, so that the entry points (kernels/cuda/*.cuh) and cuda_kernels run whole.
//
// What it checks: the kernels' tiling, masks, indices, shared-memory layout (each block's
// shared memory starts filled with NaN bytes; a vector load's alignment -- 4 bytes for a
// fragment register, 16 for four floats -- is asserted on every load (aligned_load); the
// block's bytes are bounded by an H100's 227 KiB) and the placement of their barriers (a missing one is a race ThreadSanitizer
// reports under the threads executor, a divergent one an error under fibers). Not what it
// checks: the hardware's order of summation in an mma, timing -- tests/gpu/ on a GPU.
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

/// atomicMax on an unsigned int: a compare-and-swap loop (a block's threads may run as host threads).
inline unsigned atomicMax(unsigned* p, unsigned v) {
  std::atomic_ref<unsigned> a(*p);
  unsigned old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

namespace tessera::cuda::emulation {
/// Throws unless p is N-byte aligned, as the GPU requires of an N-byte vector access (`what`:
/// "load from" or "store to").
template <std::size_t N>
inline void check_vector_alignment(const void* p, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % N != 0)
    throw std::logic_error("emulation: a " + std::to_string(N) + "-byte vector " + what + " an address not " +
                           std::to_string(N) + "-byte aligned");
}
/// A vector load of N bytes from p, which must be N-byte aligned.
template <std::size_t N>
inline void aligned_load(void* dst, const void* p) {
  check_vector_alignment<N>(p, "load from");
  std::memcpy(dst, p, N);
}
/// A vector store of N bytes from src to p, which must be N-byte aligned.
template <std::size_t N>
inline void aligned_store(void* p, const void* src) {
  check_vector_alignment<N>(p, "store to");
  std::memcpy(p, src, N);
}
/// ldmatrix.sync.aligned.m8n8.x4.shared.b16 of the calling warp: lane l gives the address of
/// row l % 8 of matrix l / 8 (16 bytes, 16-byte aligned); every lane receives, of matrix i,
/// the two b16 at row lane / 4, columns 2 (lane % 4) and 2 (lane % 4) + 1, in r[i]. With
/// `trans` (ldmatrix's .trans) each matrix is transposed: the b16 at rows 2 (lane % 4) and
/// 2 (lane % 4) + 1 of column lane / 4 (the lower row in the low half).
inline void ldmatrix_x4(std::uint32_t (&r)[4], const void* row, bool trans = false) {
  auto& blk = *current;
  const unsigned me = thread_rank, base = me - me % 32, lane = me % 32;
  if (reinterpret_cast<std::uintptr_t>(row) % 16 != 0)
    throw std::logic_error("emulation: an ldmatrix row address not 16-byte aligned");
  const void** rows = blk.rows.data() + (blk.phase[me]++ % 2) * blk.phase.size();  // one barrier a call (block::phase)
  rows[me] = row;
  warp().arrive_and_wait();
  const auto at = [&](unsigned i, unsigned r, unsigned c) {  // matrix i's b16 (r, c)
    std::uint16_t x = 0;
    std::memcpy(&x, static_cast<const unsigned char*>(rows[base + 8 * i + r]) + 2 * c, 2);
    return std::uint32_t(x);
  };
  for (unsigned i = 0; i < 4; ++i)
    r[i] = trans ? at(i, 2 * (lane % 4), lane / 4) | at(i, 2 * (lane % 4) + 1, lane / 4) << 16
                 : at(i, lane / 4, 2 * (lane % 4)) | at(i, lane / 4, 2 * (lane % 4) + 1) << 16;
}
/// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 of the calling warp, d += a b: each
/// lane passes its registers in the PTX ISA's layout (g = lane / 4, t = lane % 4; a register
/// holds two bf16, the lower index in its low half):
///   a[0] A[g][2t..2t+1]  a[1] A[g+8][2t..]  a[2] A[g][2t+8..]  a[3] A[g+8][2t+8..]   (A 16 x 16)
///   b[0] B[2t..2t+1][g]  b[1] B[2t+8..2t+9][g]                                        (B 16 x 8)
///   d[0], d[1] D[g][2t], D[g][2t+1];  d[2], d[3] D[g+8][2t], D[g+8][2t+1]             (D 16 x 8)
/// Products and sums in f32 (the hardware's order of summation is its own).
inline void mma_m16n8k16_bf16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  auto& blk = *current;
  const unsigned me = thread_rank, base = me - me % 32, g = (me % 32) / 4, t = me % 4;
  const std::size_t count = blk.phase.size();
  std::uint32_t* slots = blk.mma_slots.data() + (blk.phase[me]++ % 2) * 6 * count;  // one barrier a call (block::phase)
  for (int i = 0; i < 4; ++i) slots[6 * me + i] = a[i];
  for (int i = 0; i < 2; ++i) slots[6 * me + 4 + i] = b[i];
  warp().arrive_and_wait();
  const auto half = [&](unsigned lane, unsigned reg, unsigned k) {
    return bf16::to_f32(static_cast<std::uint16_t>(slots[6 * (base + lane) + reg] >> (16 * (k % 2))));
  };
  const auto A = [&](unsigned r, unsigned k) { return half((r % 8) * 4 + (k % 8) / 2, r / 8 + 2 * (k / 8), k); };
  const auto B = [&](unsigned k, unsigned n) { return half(n * 4 + (k % 8) / 2, 4 + k / 8, k); };
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned row = g + 8 * (i / 2), col = 2 * t + i % 2;
    for (unsigned k = 0; k < 16; ++k) d[i] += A(row, k) * B(k, col);
  }
}
}  // namespace tessera::cuda::emulation

using __nv_bfloat16 = tessera::bf16;
inline tessera::bf16 __float2bfloat16_rn(float x) { return tessera::bf16(x); }  // nearest even
inline float __bfloat162float(tessera::bf16 x) { return static_cast<float>(x); }
[[noreturn]] inline void __trap() { throw std::logic_error("emulation: a kernel executed __trap()"); }

