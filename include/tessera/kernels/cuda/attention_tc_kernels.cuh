// tessera/kernels/cuda/attention_tc_kernels.cuh: the device code of the tensor-core
// attention (attention_tc.cuh has the entry points and says what it computes). nvcc
// compiles it for the GPU; a host compiler compiles it with TESSERA_CUDA_EMULATION defined
// and tests/support/cuda_emulation.hpp included first, which runs a block's 128 threads as
// host threads, and mma.sync's m16n8k16 and ldmatrix.x4 on each lane's registers in the PTX
// ISA's fragment layouts: the host tests check the kernels' fragment indexing, tiling, masking and
// synchronisation on every CI run (tests/kernels/test_attention_emulated.cpp). Not what the
// hardware's timing or order of summation does -- that needs a GPU
// (tests/gpu/test_cuda_attention.cu).
// tessera-requires: cuda (device code: see above)
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <tessera/kernels/cuda/attention_masks.cuh>
#include <tessera/kernels/cuda/attention_tc_tiles.cuh>

namespace tessera::cuda::detail::tc {
// bf16 mma.sync needs sm_80: compiled for an older architecture the kernels trap (the host
// never launches them there: tc_attention_supported).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TESSERA_TC_ATTENTION_UNSUPPORTED 1
#endif

/// Stages x [B, T, N, HD] (f32) for the kernels (struct staged): rows [B, Tp, N, HD] and t
/// [B, N, HD, Tp] in bf16, either may be null. Block (64 rows, head, batch).
template <int HD>
__global__ void __launch_bounds__(threads)
    stage_k(bf* rows_out, bf* t_out, const float* x, std::int64_t T, std::int64_t Tp, std::int64_t N) {
  bf* tile = reinterpret_cast<bf*>(shared_memory());
  const std::int64_t b = blockIdx.z, hh = blockIdx.y, r0 = std::int64_t(blockIdx.x) * cols;
  load_rows<HD, cols>(tile, x, b, hh, r0, T, N);
  __syncthreads();
  for (int e = threadIdx.x; rows_out && e < cols * HD / 2; e += threads) {
    const int r = e / (HD / 2), d = 2 * (e % (HD / 2));
    store_pair(rows_out + ((b * Tp + r0 + r) * N + hh) * HD + d, pair(tile, ldr<HD>, r, d));
  }
  for (int e = threadIdx.x; t_out && e < HD * cols / 2; e += threads) {
    const int d = e / (cols / 2), r = 2 * (e % (cols / 2));
    const bf lo = tile[r * ldr<HD> + d], hi = tile[(r + 1) * ldr<HD> + d];
    store_pair(t_out + ((b * N + hh) * HD + d) * Tp + r0 + r, u32(bits(lo)) | (u32(bits(hi)) << 16));
  }
}

/// Forward: block (64 queries, head, batch); warp w owns queries 16w..16w+15, its Q, S = Q
/// K^T, P and O in registers. Key tiles of the staged k (rows) and v (transposed) stream
/// through two shared-memory stages, the next one's copies in flight while this one's
/// arithmetic runs. A row that sees no key gets out 0, lse -inf. Three blocks an SM (168
/// registers a thread at head dim 128).
template <int HD, class Mask>
__global__ void __launch_bounds__(threads, 3)
    forward_k(float* out, float* lse, const float* q, staged k, staged v, Mask mask, std::int64_t Tq,
              std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
#ifdef TESSERA_TC_ATTENTION_UNSUPPORTED
  __trap();
#else
  constexpr int LR = ldr<HD>;
  bf* const smem = reinterpret_cast<bf*>(shared_memory());
  constexpr int stride = cols * LR + HD * ldt;  // a stage: the K tile, then the V^T tile
  const auto K_of = [&](int stage) { return smem + stage * stride; };
  const auto Vt_of = [&](int stage) { return smem + stage * stride + cols * LR; };
  const query_block<Mask> qb(mask, Tq, Tk, NH, NKV);
  const int w = qb.w, lane = qb.lane, g = qb.g, t = qb.t;
  const std::int64_t b = qb.b, h = qb.h, grp = qb.grp, t0 = qb.t0, end = qb.end;
  const auto next_tile = [&](std::int64_t s0) { return qb.next_tile(mask, s0, Tq); };
  const auto fetch = [&](std::int64_t s0, int stage) {
    copy_staged<HD>(K_of(stage), k, b, grp, s0, NKV);
    copy_staged<HD, true>(Vt_of(stage), v, b, grp, s0, NKV);
    cp_async_commit();
  };
  // Q, through stage 1's K tile, into registers
  load_rows<HD, rows>(K_of(1), q, b, h, t0, Tq, NH);
  __syncthreads();
  u32 qa[HD / 16][4];
  for (int kk = 0; kk < HD / 16; ++kk) ldsm_a(qa[kk], K_of(1), LR, 16 * w, 16 * kk, lane);
  __syncthreads();  // every warp has its Q before stage 1 is loaded
  float o[HD / 8][4] = {};
  float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.0f, 0.0f};  // l: this lane's part of the row sums
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
    __syncthreads();  // this stage's tile is in
    const bf* Kst = K_of(stage);
    const bf* Vst = Vt_of(stage);
    float s[cols / 8][4] = {};
    for (int n = 0; n < cols / 8; n += 2)
      for (int kk = 0; kk < HD / 16; ++kk) {
        u32 k0[2], k1[2];
        ldsm_bt2(k0, k1, Kst, LR, 8 * n, 16 * kk, lane);
        mma(s[n], qa[kk], k0);
        mma(s[n + 1], qa[kk], k1);
      }
    // the online softmax: masked scores out (none where every row sees the whole tile), the
    // rows' maxima over the 4 lanes of a row
    float mx[2] = {-FLT_MAX, -FLT_MAX};
    if (mask.sees_all(t0, s0 + cols - 1) && s0 + cols <= end) {
      for (int n = 0; n < cols / 8; ++n)
        for (int e = 0; e < 4; ++e) s[n][e] *= scale, mx[e / 2] = fmaxf(mx[e / 2], s[n][e]);
    } else {
      for (int n = 0; n < cols / 8; ++n)
        for (int e = 0; e < 4; ++e) {
          const int i = e / 2;
          const std::int64_t key = s0 + 8 * n + 2 * t + e % 2;
          const bool seen = qb.live[i] && key < end && mask.sees(qb.row[i], key);
          s[n][e] = seen ? s[n][e] * scale : -INFINITY;
          mx[i] = fmaxf(mx[i], s[n][e]);
        }
    }
    float corr[2];
    for (int i = 0; i < 2; ++i) {
      const float m_new = fmaxf(m[i], row_max(mx[i]));
      corr[i] = softmax_exp(m[i] - m_new);
      m[i] = m_new;
      l[i] *= corr[i];
    }
    for (int n = 0; n < cols / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const float p = round_bf16(softmax_exp(s[n][e] - m[e / 2]));  // a masked score's -inf: 0
        s[n][e] = p;
        l[e / 2] += p;  // the probabilities P V multiplies
      }
    for (int n = 0; n < HD / 8; ++n)
      for (int e = 0; e < 4; ++e) o[n][e] *= corr[e / 2];
    accumulate_product<HD, cols>(o, s, Vst, 0, lane);
    __syncthreads();  // every warp is done with this stage before it is loaded again
    s0 = next;
  }
  for (int i = 0; i < 2; ++i) {
    const float sum = row_sum(l[i]);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int n = 0; n < HD / 8; ++n) o[n][2 * i] *= inv, o[n][2 * i + 1] *= inv;
    if (t == 0 && qb.live[i]) lse[(b * NH + h) * Tq + qb.row[i]] = sum > 0.0f ? m[i] + logf(sum) : -INFINITY;
  }
  store_rows<HD, false>(out, o, b, h, t0 + 16 * w, Tq, NH, 1.0f, g, t);
#endif
}

/// dq: block (64 queries, head, batch), over the keys they see; warp w owns queries
/// 16w..16w+15: S = Q K^T and dP = dO V^T in registers, dS = P (dP - D) rounded to bf16 as
/// the A operand of dq += dS K (K's B fragments by ldmatrix.trans from its rows). Key tiles of
/// the staged k and v (rows) stream through two shared-memory stages, the next one's copies in
/// flight while this one's arithmetic runs. Writes dq, or with Accumulate adds to it.
template <int HD, class Mask, bool Accumulate>
__global__ void __launch_bounds__(threads)
    dq_k(float* dq, const float* dout, const float* q, staged k, staged v, const float* lse, const float* D,
         Mask mask, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
#ifdef TESSERA_TC_ATTENTION_UNSUPPORTED
  __trap();
#else
  constexpr int LR = ldr<HD>;
  constexpr std::size_t stage_elems = backward_stage<HD> / sizeof(bf);
  bf* Qs = reinterpret_cast<bf*>(shared_memory());
  bf* Gs = Qs + rows * LR;
  float* Lr = reinterpret_cast<float*>(Gs + rows * LR);
  float* Dr = Lr + rows;
  bf* const stages = reinterpret_cast<bf*>(Dr + rows);
  const auto K_of = [&](int st) { return stages + st * stage_elems; };
  const auto V_of = [&](int st) { return stages + st * stage_elems + cols * LR; };
  const query_block<Mask> qb(mask, Tq, Tk, NH, NKV);
  const int w = qb.w, lane = qb.lane, g = qb.g, t = qb.t;
  const std::int64_t b = qb.b, h = qb.h, grp = qb.grp, t0 = qb.t0, end = qb.end;
  const auto next_tile = [&](std::int64_t s0) { return qb.next_tile(mask, s0, Tq); };
  const auto fetch = [&](std::int64_t s0, int st) {
    copy_staged<HD>(K_of(st), k, b, grp, s0, NKV);
    copy_staged<HD>(V_of(st), v, b, grp, s0, NKV);
    cp_async_commit();
  };
  std::int64_t s0 = next_tile(0);
  if (s0 < end) fetch(s0, 0);  // in flight while Q, dO, lse and D load
  load_rows<HD, rows>(Qs, q, b, h, t0, Tq, NH);
  load_rows<HD, rows>(Gs, dout, b, h, t0, Tq, NH);
  for (int e = threadIdx.x; e < rows; e += threads) {
    const bool in = t0 + e < Tq;
    Lr[e] = in ? lse[(b * NH + h) * Tq + t0 + e] : 0.0f;
    Dr[e] = in ? D[(b * NH + h) * Tq + t0 + e] : 0.0f;
  }
  float acc[HD / 8][4] = {};
  for (int st = 0; s0 < end; st ^= 1) {
    const std::int64_t next = next_tile(s0 + cols);
    if (next < end) {
      fetch(next, st ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // this stage's tiles are in (and, the first time, Q, dO, Lr and Dr)
    const bf* Ks = K_of(st);
    float s[cols / 8][4] = {}, dp[cols / 8][4] = {};
    two_products<HD, cols>(s, dp, Qs, Ks, Gs, V_of(st), LR, 16 * w, 0, lane);  // S = Q K^T, dP = dO V^T
    // dS = P (dP - D); a tile no element of which is masked takes the loop without the mask
    // test (one branch a tile: left to the compiler, it tested every element -- H200, 2026-11-29:
    // dq_k 65.9 -> 100.7 ms a step of the 8B benchmark)
    const auto to_ds = [&](auto masked) {
      for (int n = 0; n < cols / 8; ++n)
        for (int e = 0; e < 4; ++e) {
          const int i = e / 2, r = 16 * w + g + 8 * i;
          const std::int64_t key = s0 + 8 * n + 2 * t + e % 2;
          const bool seen = !decltype(masked)::value || (qb.live[i] && key < end && mask.sees(qb.row[i], key));
          const float p = seen ? softmax_exp(s[n][e] * scale - Lr[r]) : 0.0f;
          s[n][e] = p * (dp[n][e] - Dr[r]);
        }
    };
    if (mask.sees_all(t0, s0 + cols - 1) && s0 + cols <= end)
      to_ds(std::false_type{});
    else
      to_ds(std::true_type{});
    accumulate_product<HD, cols, true>(acc, s, Ks, 0, lane);  // dq += dS K
    __syncthreads();  // every warp is done with this stage before it is loaded again
    s0 = next;
  }
  store_rows<HD, Accumulate>(dq, acc, b, h, t0 + 16 * w, Tq, NH, scale, g, t);
#endif
}

/// The fused backward's share of the work on dq's 32 x HD rows of a step: units of (an
/// m-tile of 16 queries, a pair of n-tiles of 8 head-dim columns), m fastest; warp w takes
/// units w * U .. w * U + U - 1 (at head dim 128: 32 queries x 32 columns, 32 accumulators a
/// thread; at head dim 16 warps 2 and 3 take none).
template <int HD>
inline constexpr int dq_units = dq_step / 16 * (HD / 16);
template <int HD>
inline constexpr int dq_per_warp = dq_units<HD> >= 4 ? dq_units<HD> / 4 : 1;

/// acc += dS K for warp w's units: dS [32 queries x 64 keys] from its transpose in shared
/// memory (ds: [64 keys][ld_ds], bf16), K the block's key tile (rows, bf16).
template <int HD>
__device__ inline void dq_part(float (&acc)[dq_per_warp<HD>][2][4], const bf* ds, const bf* Ks, int w, int lane) {
  constexpr int M = dq_step / 16, U = dq_per_warp<HD>;
  static_assert(U == 1 || U % M == 0, "a warp's units: one, or whole pairs of n-tiles");
  if (w * U >= dq_units<HD>) return;  // the same for the whole warp
  for (int kk = 0; kk < rows / 16; ++kk) {
    u32 a[M][4], b0[2], b1[2];
    if constexpr (U == 1) {  // unit w: m-tile w % M (register arrays indexed at compile time only)
      ldsm_at(a[0], ds, ld_ds, 16 * (w % M), 16 * kk, lane);
      ldsm_b2(b0, b1, Ks, ldr<HD>, 16 * kk, 16 * (w / M), lane);
      mma(acc[0][0], a[0], b0);
      mma(acc[0][1], a[0], b1);
    } else {  // units w U + j: m-tile j % M, pair w U / M + j / M
      for (int m = 0; m < M; ++m) ldsm_at(a[m], ds, ld_ds, 16 * m, 16 * kk, lane);
      for (int j = 0; j < U; ++j) {
        if (j % M == 0) ldsm_b2(b0, b1, Ks, ldr<HD>, 16 * kk, 16 * (w * U / M + j / M), lane);
        mma(acc[j][0], a[j % M], b0);
        mma(acc[j][1], a[j % M], b1);
      }
    }
  }
}
/// Warp w's units of dq's rows [r0, r0 + 32) of head hh (y [B, Ty, Ny, HD]) times `scale`,
/// added to y through L2 (other blocks added to them before), or with `write` stored; rows
/// past Ty skipped.
template <int HD>
__device__ inline void add_dq(float* y, const float (&acc)[dq_per_warp<HD>][2][4], std::int64_t b, std::int64_t hh,
                              std::int64_t r0, std::int64_t Ty, std::int64_t Ny, float scale, bool write, int w, int g,
                              int t) {
  constexpr int M = dq_step / 16, U = dq_per_warp<HD>;
  for (int j = 0; j < U && w * U + j < dq_units<HD>; ++j) {
    const int u = w * U + j;
    for (int i = 0; i < 2; ++i) {
      const std::int64_t row = r0 + 16 * (u % M) + g + 8 * i;
      if (row >= Ty) continue;
      float* o = y + ((b * Ty + row) * Ny + hh) * HD + 16 * (u / M) + 2 * t;
      for (int n = 0; n < 2; ++n) {
        float v[2] = {acc[j][n][2 * i] * scale, acc[j][n][2 * i + 1] * scale};
        if (!write) {
          float old[2];
          load2_l2(old, o + 8 * n);
          v[0] += old[0], v[1] += old[1];
        }
        store2_l2(o + 8 * n, v[0], v[1]);
      }
    }
  }
}

/// dk, dv: block (64 keys, KV head, batch), over the queries of the KV head's query heads
/// that see them, 32 at a time; warp w owns keys 16w..16w+15: S^T = K Q^T and dP^T = V dO^T
/// in registers, P^T and dS^T rounded to bf16 as the A operands of dv += P^T dO and dk +=
/// dS^T Q (dO's and Q's B fragments by ldmatrix.trans from their rows). The query tiles of
/// each head (the staged q and dout, rows), with their lse and D, stream through two
/// shared-memory stages as dq_k's key tiles do. Writes dk and dv, or with Accumulate adds to
/// them.
/// FusedDq: also dq (dq_k not launched): each step's dS^T goes through shared memory (bf16)
/// and dS K, this block's part of the step's 32 rows of dq, is added to dq in a fixed order
/// -- from the last key block that sees the rows down to the first, each block waiting for
/// its turn (`turns`, one int per (batch, head, 32 queries), zero at launch: the number + 1
/// of the key block that added last). The key blocks launch in reverse (grid tc_grid reversed:
/// block y holds key block gridDim.y - 1 - y), so a block only waits for blocks launched
/// before it, and under the causal mask a block is a step behind the one before it: its turn
/// has come by the time it gets there. Without Accumulate the first block to add to a row
/// writes it (causal masks, where key block 0 sees every row; under a mask that skips tiles
/// dq must be zero at launch). Deterministic, as FlashAttention-3's deterministic mode is
/// (Shah et al., arXiv 2407.08608): 5 products where dq_k beside this kernel makes 7.
template <int HD, class Mask, bool Accumulate, bool FusedDq = false>
__global__ void __launch_bounds__(threads)
    dkv_k(float* dk, float* dv, float* dq, int* turns, staged dout, staged q, const float* k, const float* v,
          const float* lse, const float* D, Mask mask, std::int64_t Tq, std::int64_t Tk, std::int64_t NH,
          std::int64_t NKV, float scale) {
#ifdef TESSERA_TC_ATTENTION_UNSUPPORTED
  __trap();
#else
  constexpr int LR = ldr<HD>, QS = dq_step;  // queries a step
  constexpr std::size_t stage_elems = backward_stage<HD> / sizeof(bf);
  bf* Ks = reinterpret_cast<bf*>(shared_memory());
  bf* Vs = Ks + rows * LR;
  bf* const stages = Vs + rows * LR;
  bf* const ds = stages + 2 * stage_elems;  // FusedDq: the step's dS^T
  const auto Q_of = [&](int st) { return stages + st * stage_elems; };
  const auto G_of = [&](int st) { return stages + st * stage_elems + cols * LR; };
  const auto L_of = [&](int st) { return reinterpret_cast<float*>(stages + st * stage_elems + 2 * cols * LR); };
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // grid tc_grid (KV head, key block, batch): the key blocks in order (the heaviest under
  // the causal mask first), with FusedDq reversed
  const std::int64_t nkb = gridDim.y;
  const std::int64_t kb = FusedDq ? nkb - 1 - blockIdx.y : blockIdx.y, grp = blockIdx.x;
  const std::int64_t b = blockIdx.z, G = NH / NKV, s0 = kb * rows;
  const std::int64_t key[2] = {s0 + 16 * w + g, s0 + 16 * w + g + 8};
  const bool live[2] = {key[0] < Tk, key[1] < Tk};
  const int chalf = threadIdx.x % 2;
  // Whether a query of tile q0 sees a key of the block from key ks0 (tile skipping: key
  // ks0 + i / 2, half i % 2 of the query tile); every thread of the block calls it.
  const auto needed = [&](std::int64_t ks0, std::int64_t q0) {
    const std::int64_t ck = ks0 + threadIdx.x / 2;
    return tile_needed<Mask, cols / 2>(ck < Tk, q0 + cols / 2 * chalf, Tq,
                                       [&](std::int64_t tq) { return mask.sees(tq, ck); });
  };
  // The (head, query tile) pairs in order: each head of the group, its query tiles from the
  // first that can see these keys; the tiles a mask skips are the same for every head.
  const auto next_tile = [&](std::int64_t q0) {
    while (q0 < Tq && !needed(s0, q0)) q0 += cols;
    return q0;
  };
  // FusedDq: the key block that adds to query tile q0's rows of dq just before this one --
  // the nearest one above it that visits the tile (mask.query_begin does not fall as the
  // keys rise) --, or -1.
  const auto previous = [&](std::int64_t q0) {
    for (std::int64_t j = kb + 1; j < nkb && mask.query_begin(j * rows) / cols * cols <= q0; ++j)
      if (needed(j * rows, q0)) return j;
    return std::int64_t{-1};
  };
  const std::int64_t first = next_tile(mask.query_begin(s0) / cols * cols), h_end = (grp + 1) * G;
  const auto fetch = [&](std::int64_t h, std::int64_t q0, int st) {
    copy_staged<HD>(Q_of(st), q, b, h, q0, NH);
    copy_staged<HD>(G_of(st), dout, b, h, q0, NH);
    cp_async_commit();
    float* Lc = L_of(st);
    for (int e = threadIdx.x; e < cols; e += threads) {
      const bool in = q0 + e < Tq;
      Lc[e] = in ? lse[(b * NH + h) * Tq + q0 + e] : 0.0f;
      Lc[cols + e] = in ? D[(b * NH + h) * Tq + q0 + e] : 0.0f;
    }
  };
  std::int64_t h = first < Tq ? grp * G : h_end, q0 = first;
  if (h < h_end) fetch(h, q0, 0);  // in flight while K and V load
  load_rows<HD, rows>(Ks, k, b, grp, s0, Tk, NKV);
  load_rows<HD, rows>(Vs, v, b, grp, s0, Tk, NKV);
  float ak[HD / 8][4] = {}, av[HD / 8][4] = {};
  for (int st = 0; h < h_end; st ^= 1) {
    std::int64_t nh = h, nq = next_tile(q0 + cols);
    if (nq >= Tq) ++nh, nq = first;
    const std::int64_t prev = FusedDq ? previous(q0) : -1;
    if (nh < h_end) {
      fetch(nh, nq, st ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // this stage's tiles are in (and, the first time, K and V)
    const bf* Qs = Q_of(st);
    const bf* Gs = G_of(st);
    const float* Lc = L_of(st);
    const float* Dc = Lc + cols;
    const bool full = mask.sees_all(q0, s0 + rows - 1) && q0 + cols <= Tq;  // no element masked
    for (int j0 = 0; j0 < cols; j0 += QS) {
      float s[QS / 8][4] = {}, dp[QS / 8][4] = {};
      two_products<HD, QS>(s, dp, Ks, Qs, Vs, Gs, LR, 16 * w, j0, lane);  // S^T = K Q^T, dP^T = V dO^T
      for (int n = 0; n < QS / 8; ++n)
        for (int e = 0; e < 4; ++e) {
          const int i = e / 2, j = j0 + 8 * n + 2 * t + e % 2;
          const bool seen = full || (live[i] && q0 + j < Tq && mask.sees(q0 + j, key[i]));
          const float p = seen ? softmax_exp(s[n][e] * scale - Lc[j]) : 0.0f;
          s[n][e] = p;                         // P^T
          dp[n][e] = p * (dp[n][e] - Dc[j]);  // dS^T
        }
      accumulate_product<HD, QS, true>(av, s, Gs, j0, lane);   // dv += P^T dO
      accumulate_product<HD, QS, true>(ak, dp, Qs, j0, lane);  // dk += dS^T Q
      if constexpr (FusedDq) {
        for (int n = 0; n < QS / 8; ++n) {  // dS^T, rounded as the A operand above, for every warp
          store_pair(ds + (16 * w + g) * ld_ds + 8 * n + 2 * t, pack(dp[n][0], dp[n][1]));
          store_pair(ds + (16 * w + g + 8) * ld_ds + 8 * n + 2 * t, pack(dp[n][2], dp[n][3]));
        }
        __syncthreads();
        float aq[dq_per_warp<HD>][2][4] = {};
        dq_part<HD>(aq, ds, Ks, w, lane);  // this block's part of dq's rows: dS K
        int* turn = turns + (b * NH + h) * dq_turns(Tq) + (q0 + j0) / QS;
        if (prev >= 0) wait_turn(turn, static_cast<int>(prev + 1));
        add_dq<HD>(dq, aq, b, h, q0 + j0, Tq, NH, scale, !Accumulate && !Mask::skips_tiles && prev < 0, w, g, t);
        pass_turn(turn, static_cast<int>(kb + 1));  // also: every warp is done with ds
      }
    }
    __syncthreads();  // every warp is done with this stage before it is loaded again
    h = nh, q0 = nq;
  }
  store_rows<HD, Accumulate>(dk, ak, b, grp, s0 + 16 * w, Tk, NKV, scale, g, t);
  store_rows<HD, Accumulate>(dv, av, b, grp, s0 + 16 * w, Tk, NKV, 1.0f, g, t);
#endif
}
#undef TESSERA_TC_ATTENTION_UNSUPPORTED
}  // namespace tessera::cuda::detail::tc
