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
    const bool full = mask.sees_all(t0, s0 + cols - 1) && s0 + cols <= end;  // no element masked
    for (int n = 0; n < cols / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const int i = e / 2, r = 16 * w + g + 8 * i;
        const std::int64_t key = s0 + 8 * n + 2 * t + e % 2;
        const bool seen = full || (qb.live[i] && key < end && mask.sees(qb.row[i], key));
        const float p = seen ? softmax_exp(s[n][e] * scale - Lr[r]) : 0.0f;
        s[n][e] = p * (dp[n][e] - Dr[r]);  // dS
      }
    accumulate_product<HD, cols, true>(acc, s, Ks, 0, lane);  // dq += dS K
    __syncthreads();  // every warp is done with this stage before it is loaded again
    s0 = next;
  }
  store_rows<HD, Accumulate>(dq, acc, b, h, t0 + 16 * w, Tq, NH, scale, g, t);
#endif
}

/// dk, dv: block (64 keys, KV head, batch), over the queries of the KV head's query heads
/// that see them, 32 at a time; warp w owns keys 16w..16w+15: S^T = K Q^T and dP^T = V dO^T
/// in registers, P^T and dS^T rounded to bf16 as the A operands of dv += P^T dO and dk +=
/// dS^T Q (dO's and Q's B fragments by ldmatrix.trans from their rows). The query tiles of
/// each head (the staged q and dout, rows), with their lse and D, stream through two
/// shared-memory stages as dq_k's key tiles do. Writes dk and dv, or with Accumulate adds to
/// them.
template <int HD, class Mask, bool Accumulate>
__global__ void __launch_bounds__(threads)
    dkv_k(float* dk, float* dv, staged dout, staged q, const float* k, const float* v, const float* lse,
          const float* D, Mask mask, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
#ifdef TESSERA_TC_ATTENTION_UNSUPPORTED
  __trap();
#else
  constexpr int LR = ldr<HD>, QS = 32;  // queries a step
  constexpr std::size_t stage_elems = backward_stage<HD> / sizeof(bf);
  bf* Ks = reinterpret_cast<bf*>(shared_memory());
  bf* Vs = Ks + rows * LR;
  bf* const stages = Vs + rows * LR;
  const auto Q_of = [&](int st) { return stages + st * stage_elems; };
  const auto G_of = [&](int st) { return stages + st * stage_elems + cols * LR; };
  const auto L_of = [&](int st) { return reinterpret_cast<float*>(stages + st * stage_elems + 2 * cols * LR); };
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t b = blockIdx.z, grp = blockIdx.y, G = NH / NKV, s0 = std::int64_t(blockIdx.x) * rows;
  const std::int64_t key[2] = {s0 + 16 * w + g, s0 + 16 * w + g + 8};
  const bool live[2] = {key[0] < Tk, key[1] < Tk};
  const std::int64_t ckey = s0 + threadIdx.x / 2;  // tile skipping: key i / 2, half i % 2 of a query tile
  const int chalf = threadIdx.x % 2;
  // The (head, query tile) pairs in order: each head of the group, its query tiles from the
  // first that can see these keys; the tiles a mask skips are the same for every head.
  const auto next_tile = [&](std::int64_t q0) {
    while (q0 < Tq && !tile_needed<Mask, cols / 2>(ckey < Tk, q0 + cols / 2 * chalf, Tq,
                                                   [&](std::int64_t tq) { return mask.sees(tq, ckey); }))
      q0 += cols;
    return q0;
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
