// A host emulation of the CUDA device code the attention kernels use
// (kernels/cuda/attention_kernels.cuh, attention_tc_kernels.cuh), so that they run --
// slowly -- on a machine without a GPU: each thread of a block is a host thread;
// __syncthreads, __syncthreads_or, __syncwarp and __shfl_xor_sync are barriers over the
// block's or the warp's threads; a WMMA fragment holds its whole 16 x 16 tile in every lane
// (products and sums in f32; lane 0 stores it, once the warp has arrived). Include it first,
// with TESSERA_CUDA_EMULATION defined, then the kernels.
//
// What it checks: the kernels' tiling, masks, indices, shared-memory layout (each block's
// shared memory starts filled with NaN bytes; WMMA's 32-byte alignment and leading-dimension
// rules are asserted on every load and store; the block's bytes are bounded by an H100's
// 227 KiB) and the placement of their barriers (a missing one is a race ThreadSanitizer
// reports, a divergent one a hang). Not what it checks: the hardware fragments' layouts,
// their accumulation order, timing -- tests/gpu/ on a GPU.
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

#define __global__ __attribute__((unused))  // a kernel a test does not launch is no warning
#define __device__
#define __host__
#define __launch_bounds__(...)
#define __shared__ static  // a kernel's static shared array: one for the block (blocks run one at a time)

struct tessera_emulated_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local tessera_emulated_dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace tessera::cuda::emulation {
/// The state one block's threads share.
struct block {
  explicit block(int threads, unsigned char* shared)
      : all(threads), shared(shared), exchange(static_cast<std::size_t>(threads)) {
    for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<std::barrier<>>(32));
  }
  std::barrier<> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::atomic<int> any{0};
  unsigned char* shared;
  std::vector<float> exchange;  // __shfl_xor_sync's slots, one a thread
};
inline thread_local block* current = nullptr;
inline thread_local unsigned thread_rank = 0;  // x fastest, as CUDA numbers a block's threads into warps

inline unsigned char* shared_memory() { return current->shared; }
inline unsigned lane() { return thread_rank % 32; }
inline std::barrier<>& warp() { return *current->warps[thread_rank / 32]; }

inline constexpr std::size_t max_shared_bytes = 232448;  // an H100's opt-in limit a block: 227 KiB
inline constexpr std::size_t max_threads = 16384;        // a launch's threads in all (host threads)

/// Runs `kernel()` on every thread of a grid of blocks of block.x x block.y x block.z threads
/// (a multiple of 32), one block after the other, each with `shared_bytes` of dynamic shared
/// memory.
template <class Kernel>
void launch(tessera_emulated_dim3 grid, tessera_emulated_dim3 block_dim, std::size_t shared_bytes, Kernel kernel) {
  const int threads = static_cast<int>(block_dim.x * block_dim.y * block_dim.z);
  if (threads % 32 != 0 || threads > 1024) throw std::invalid_argument("emulation::launch: bad block size");
  const std::size_t all = std::size_t{grid.x} * grid.y * grid.z * static_cast<std::size_t>(threads);
  if (all > max_threads)
    throw std::invalid_argument("emulation::launch: " + std::to_string(all) +
                                " threads in all; each is a host thread here -- keep a test's grid under " +
                                std::to_string(max_threads) + " threads (grid-stride kernels take any grid)");
  if (shared_bytes > max_shared_bytes)
    throw std::invalid_argument("emulation::launch: " + std::to_string(shared_bytes) +
                                " bytes of shared memory a block, more than an H100 gives (232448)");
  const std::size_t n = shared_bytes ? shared_bytes : 1;
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> mem(
      static_cast<unsigned char*>(::operator new(n, std::align_val_t{128})),
      [](unsigned char* p) { ::operator delete(p, std::align_val_t{128}); });
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        std::memset(mem.get(), 0xff, n);  // NaN in f32 and bf16: a read before a write shows
        block b(threads, mem.get());
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
          ts.emplace_back([&, t] {
            const auto u = static_cast<unsigned>(t);
            thread_rank = u;
            threadIdx = {u % block_dim.x, u / block_dim.x % block_dim.y, u / (block_dim.x * block_dim.y)};
            blockIdx = {x, y, z};
            blockDim = block_dim;
            gridDim = grid;
            current = &b;
            kernel();
          });
        for (auto& t : ts) t.join();
      }
}
/// A one-dimensional block of `threads` threads.
template <class Kernel>
void launch(tessera_emulated_dim3 grid, int threads, std::size_t shared_bytes, Kernel kernel) {
  launch(grid, tessera_emulated_dim3{static_cast<unsigned>(threads), 1, 1}, shared_bytes, kernel);
}

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
