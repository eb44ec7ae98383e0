// tessera/kernels/cuda/attention_tc_wide.cuh: the tensor-core attention's forward with two
// row tiles a warp (forward_path::wide; attention_tc.cuh chooses it) -- device code as
// attention_tc_kernels.cuh's, which the host tests run through the CUDA emulation.
// tessera-requires: cuda (device code: nvcc, or a host compiler with TESSERA_CUDA_EMULATION
// and tests/support/cuda_emulation.hpp included first)
//
// forward_k gives each of its 4 warps 16 query rows: every fragment of K and V a warp loads
// from shared memory (ldmatrix.x4) feeds 2 of its mma.sync, so the loop issues one ldmatrix
// for two m16n8k16 products. An H100/H200 SM moves 128 bytes of shared memory a cycle (an
// ldmatrix.x4: 512 bytes, 4 cycles) and finishes an mma.sync m16n8k16 (4,096 FLOPs) in about
// 1.5 cycles at the measured mma.sync rate, so that loop waits on shared memory, not on the
// tensor cores. forward_wide_k gives each warp 32 rows -- rows 16w.. and 64 + 16w.. of a block
// of 128 -- and uses each K and V fragment for both: one ldmatrix for 3.2 products (Q's
// fragments, which no longer fit in registers beside two row tiles' accumulators, are read
// again from shared memory each tile), as FlashAttention-2's forward does at head dim 128
// (blocks of 128 rows, 4 warps, Q in shared memory). The arithmetic of every row is
// forward_k's, in the same order: the same bits (tests/kernels/test_attention_emulated.cpp).
// Shared memory: Q's 128 rows and two stages of (K, V^T) tiles, 104 KiB at head dim 128 --
// two blocks an SM (8 warps, where forward_k runs 12). Not yet measured on a GPU: the default
// stays forward_k until gpu.bench_kernels, which times both, shows which is faster.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include <tessera/kernels/cuda/attention_masks.cuh>
#include <tessera/kernels/cuda/attention_tc_tiles.cuh>

// Loops unrolled by nvcc (without it, ptxas put the two row tiles' accumulators in local
// memory: an 896-byte stack frame at head dim 128); nothing for the host emulation.
#if defined(__CUDACC__) && !defined(TESSERA_CUDA_EMULATION)
#define TESSERA_UNROLL _Pragma("unroll")
#else
#define TESSERA_UNROLL
#endif

namespace tessera::cuda::detail::tc {

inline constexpr int wide_rows = 2 * rows;  // rows a block of forward_wide_k owns: 4 warps x 2 x 16
template <int HD>
inline constexpr std::size_t wide_forward_bytes = std::size_t(wide_rows) * ldr<HD> * 2 + forward_bytes<HD>;

/// forward_wide_k's grid: (head, block of 128 queries from the last, batch), as tc_grid.
__host__ __device__ inline dim3 wide_grid(std::int64_t T, std::int64_t heads, std::int64_t B) {
  return {static_cast<unsigned>(heads), static_cast<unsigned>((T + wide_rows - 1) / wide_rows),
          static_cast<unsigned>(B)};
}

/// Where a thread of forward_wide_k stands: query_block's fields for two row tiles a warp
/// (row(r): tile r / 2's row 64 (r / 2) + 16w + g + 8 (r % 2), computed where needed: registers
/// are what two row tiles' accumulators leave), and a whole row of each streamed tile for the
/// tile skipping of span masks (thread i looks at row i).
template <class Mask>
struct wide_query_block {
  int w, lane, g, t;
  std::int64_t b, h, grp, t0, end;
  __device__ wide_query_block(const Mask& mask, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV)
      : w(threadIdx.x / 32), lane(threadIdx.x % 32), g(lane / 4), t(lane % 4), b(blockIdx.z), h(blockIdx.x),
        grp(h / (NH / NKV)), t0(std::int64_t(gridDim.y - 1 - blockIdx.y) * wide_rows),
        end(mask.key_end(t0 + wide_rows - 1 < Tq - 1 ? t0 + wide_rows - 1 : Tq - 1, Tk)) {}
  __device__ std::int64_t row(int r) const { return t0 + rows * (r / 2) + 16 * w + g + 8 * (r % 2); }
  /// The first tile of keys from s0 on that a row of the block sees (or end); every thread
  /// of the block calls it.
  __device__ std::int64_t next_tile(const Mask& mask, std::int64_t s0, std::int64_t Tq) const {
    const std::int64_t r = t0 + threadIdx.x;
    while (s0 < end &&
           !tile_needed<Mask, cols>(r < Tq, s0, end, [r, &mask](std::int64_t s) { return mask.sees(r, s); }))
      s0 += cols;
    return s0;
  }
};

/// acc[i] += a_i b for the warp's M row tiles i: a_i [16 x K] by a_of(frag, i, kk) (the A
/// fragment of its k-step kk), b [K x N] by b_of(b0, b1, n, kk) (the B fragments of n-tiles n
/// and n + 1) -- each B fragment loaded once for all M tiles, each accumulator summed over kk
/// in order (accumulate_product's order for one tile).
template <int M, int K, int N, class A, class B>
__device__ inline void tiles_product(float (&acc)[M][N / 8][4], A&& a_of, B&& b_of) {
  TESSERA_UNROLL
  for (int kk = 0; kk < K / 16; ++kk) {
    u32 a[M][4];
    TESSERA_UNROLL
    for (int i = 0; i < M; ++i) a_of(a[i], i, kk);
    TESSERA_UNROLL
    for (int n = 0; n < N / 8; n += 2) {
      u32 b0[2], b1[2];
      b_of(b0, b1, n, kk);
      TESSERA_UNROLL
      for (int i = 0; i < M; ++i) mma(acc[i][n], a[i], b0), mma(acc[i][n + 1], a[i], b1);
    }
  }
}

/// Forward with two row tiles a warp (above): block (128 queries, head, batch); Q in shared
/// memory, S = Q K^T, P and O of both tiles in registers; key tiles of the staged k (rows) and
/// v (transposed) through two shared-memory stages. Out and lse as forward_k's.
template <int HD, class Mask>
__global__ void __launch_bounds__(threads, 2)
    forward_wide_k(float* out, float* lse, const float* q, staged k, staged v, Mask mask, std::int64_t Tq,
                   std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
#ifdef TESSERA_TC_ATTENTION_UNSUPPORTED
  __trap();
#else
  constexpr int LR = ldr<HD>, M = 2;  // row tiles a warp
  bf* const smem = reinterpret_cast<bf*>(shared_memory());
  bf* const Q = smem;  // [wide_rows][LR]
  constexpr int stride = cols * LR + HD * ldt;  // a stage: the K tile, then the V^T tile
  const auto K_of = [&](int stage) { return smem + wide_rows * LR + stage * stride; };
  const auto Vt_of = [&](int stage) { return K_of(stage) + cols * LR; };
  const wide_query_block<Mask> qb(mask, Tq, Tk, NH, NKV);
  const int w = qb.w, lane = qb.lane, g = qb.g, t = qb.t;
  const std::int64_t b = qb.b, h = qb.h, grp = qb.grp, t0 = qb.t0, end = qb.end;
  const auto next_tile = [&](std::int64_t s0) { return qb.next_tile(mask, s0, Tq); };
  const auto fetch = [&](std::int64_t s0, int stage) {
    copy_staged<HD>(K_of(stage), k, b, grp, s0, NKV);
    copy_staged<HD, true>(Vt_of(stage), v, b, grp, s0, NKV);
    cp_async_commit();
  };
  load_rows<HD, wide_rows>(Q, q, b, h, t0, Tq, NH);  // read after the first tile's barrier
  float o[M][HD / 8][4] = {};
  float m[M][2], l[M][2];  // l: this lane's part of the row sums
  TESSERA_UNROLL
  for (int i = 0; i < M; ++i) m[i][0] = m[i][1] = -FLT_MAX, l[i][0] = l[i][1] = 0.0f;
  std::int64_t s0 = next_tile(0);
  if (s0 < end) fetch(s0, 0);
  for (int stage = 0; s0 < end; stage ^= 1) {
    const std::int64_t next = next_tile(s0 + cols);
    if (next < end) {
      fetch(next, stage ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // this stage's tile (and, the first time, Q) is in
    const bf* Kst = K_of(stage);
    const bf* Vst = Vt_of(stage);
    float s[M][cols / 8][4] = {};
    tiles_product<M, HD, cols>(
        s, [&](u32(&a)[4], int i, int kk) { ldsm_a(a, Q, LR, rows * i + 16 * w, 16 * kk, lane); },
        [&](u32(&b0)[2], u32(&b1)[2], int n, int kk) { ldsm_bt2(b0, b1, Kst, LR, 8 * n, 16 * kk, lane); });
    // the online softmax of each row tile, as forward_k's
    const bool whole = mask.sees_all(t0, s0 + cols - 1) && s0 + cols <= end;
    TESSERA_UNROLL
    for (int i = 0; i < M; ++i) {
      float mx[2] = {-FLT_MAX, -FLT_MAX};
      if (whole) {
        TESSERA_UNROLL
        for (int n = 0; n < cols / 8; ++n)
          TESSERA_UNROLL
          for (int e = 0; e < 4; ++e) s[i][n][e] *= scale, mx[e / 2] = fmaxf(mx[e / 2], s[i][n][e]);
      } else {
        TESSERA_UNROLL
        for (int n = 0; n < cols / 8; ++n)
          TESSERA_UNROLL
          for (int e = 0; e < 4; ++e) {
            const int r = 2 * i + e / 2;
            const std::int64_t key = s0 + 8 * n + 2 * t + e % 2;
            const std::int64_t row = qb.row(r);
            const bool seen = row < Tq && key < end && mask.sees(row, key);
            s[i][n][e] = seen ? s[i][n][e] * scale : -INFINITY;
            mx[e / 2] = fmaxf(mx[e / 2], s[i][n][e]);
          }
      }
      float corr[2];
      TESSERA_UNROLL
      for (int j = 0; j < 2; ++j) {
        const float m_new = fmaxf(m[i][j], row_max(mx[j]));
        corr[j] = softmax_exp(m[i][j] - m_new);
        m[i][j] = m_new;
        l[i][j] *= corr[j];
      }
      TESSERA_UNROLL
      for (int n = 0; n < cols / 8; ++n)
        TESSERA_UNROLL
        for (int e = 0; e < 4; ++e) {
          const float p = round_bf16(softmax_exp(s[i][n][e] - m[i][e / 2]));  // a masked score's -inf: 0
          s[i][n][e] = p;
          l[i][e / 2] += p;
        }
      TESSERA_UNROLL
      for (int n = 0; n < HD / 8; ++n)
        TESSERA_UNROLL
        for (int e = 0; e < 4; ++e) o[i][n][e] *= corr[e / 2];
    }
    // O += P V: S's accumulators, rounded, as P's A fragments
    tiles_product<M, cols, HD>(
        o, [&](u32(&a)[4], int i, int kk) { c_to_a(a, s[i][2 * kk], s[i][2 * kk + 1]); },
        [&](u32(&b0)[2], u32(&b1)[2], int n, int kk) { ldsm_bt2(b0, b1, Vst, ldt, 8 * n, 16 * kk, lane); });
    __syncthreads();  // every warp is done with this stage before it is loaded again
    s0 = next;
  }
  TESSERA_UNROLL
  for (int i = 0; i < M; ++i) {
    TESSERA_UNROLL
    for (int j = 0; j < 2; ++j) {
      const float sum = row_sum(l[i][j]);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      TESSERA_UNROLL
      for (int n = 0; n < HD / 8; ++n) o[i][n][2 * j] *= inv, o[i][n][2 * j + 1] *= inv;
      const int r = 2 * i + j;
      if (t == 0 && qb.row(r) < Tq) lse[(b * NH + h) * Tq + qb.row(r)] = sum > 0.0f ? m[i][j] + logf(sum) : -INFINITY;
    }
    store_rows<HD, false>(out, o[i], b, h, t0 + rows * i + 16 * w, Tq, NH, 1.0f, g, t);
  }
#endif
}

}  // namespace tessera::cuda::detail::tc
