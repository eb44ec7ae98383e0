// tessera/kernels/cuda/attention_tc_kernels.cuh: the device code of the tensor-core
// attention (attention_tc.cuh has the entry points and says what it computes). nvcc
// compiles it for the GPU; a host compiler compiles it with TESSERA_CUDA_EMULATION defined
// and tests/support/cuda_emulation.hpp included first, which runs a block's 128 threads as
// host threads with WMMA's fragments as whole 16 x 16 matrices: the host tests check the
// kernels' tiling, masking, indexing and synchronisation on every CI run
// (tests/kernels/test_attention_emulated.cpp). Not what the hardware's fragments or
// timing do -- that needs a GPU (tests/gpu/test_cuda_attention.cu).
// tessera-requires: cuda (device code: see above)
#pragma once

#ifndef TESSERA_CUDA_EMULATION
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>
#endif

#include <cfloat>
#include <cmath>
#include <cstdint>

#include <tessera/kernels/cuda/attention_masks.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda::detail::tc {
namespace wmma = nvcuda::wmma;
using bf = __nv_bfloat16;
inline constexpr int rows = attention_rows;  // rows a block owns: 4 warps x 16
inline constexpr int cols = 64;              // streamed rows per tile
inline constexpr int threads = 128;
inline constexpr int lds = cols + 4;  // leading dimension of f32 score tiles (padding: banks)
inline constexpr int ldp = cols + 8;  // of bf16 probability tiles
template <int HD>
inline constexpr int ldb = HD + 8;  // of bf16 row tiles
template <int HD>
inline constexpr int ldo = HD + 4;  // of f32 output rows

using frag_a = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf, wmma::row_major>;
using frag_b = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf, wmma::row_major>;
using frag_bt = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf, wmma::col_major>;  // X^T of row-major X
using frag_c = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

/// The block's dynamic shared memory (128-byte aligned).
__device__ inline unsigned char* shared_memory() {
#ifdef TESSERA_CUDA_EMULATION
  return emulation::shared_memory();
#else
  extern __shared__ __align__(128) unsigned char tc_shared[];
  return tc_shared;
#endif
}

// Shared memory of each kernel, in bytes; every region starts on a multiple of 32 bytes
// (WMMA's alignment), as do the warps' 16-row slices and 16-column steps in them.
template <int HD>
inline constexpr std::size_t forward_bytes =
    (rows + 2 * cols) * ldb<HD> * 2 + rows * lds * 4 + rows * ldp * 2 + rows * ldo<HD> * 4 + 2 * rows * 4;
template <int HD>
inline constexpr std::size_t dq_bytes = (2 * rows + 2 * cols) * ldb<HD> * 2 + 2 * rows * lds * 4 + rows * ldp * 2 + 2 * rows * 4;
template <int HD>
inline constexpr std::size_t dkv_bytes =
    (2 * rows + 2 * cols) * ldb<HD> * 2 + 2 * rows * lds * 4 + 2 * rows * ldp * 2 + 2 * cols * 4;

/// Rows [r0, r0 + N) of head hh of x [B, Tx, Nx, HD], rounded to bf16, into dst (leading
/// dimension ldb<HD>); zeros past Tx.
template <int HD, int N>
__device__ inline void load_rows(bf* dst, const float* x, std::int64_t b, std::int64_t hh, std::int64_t r0,
                                 std::int64_t Tx, std::int64_t Nx) {
  for (int e = threadIdx.x; e < N * HD; e += threads) {
    const int r = e / HD, d = e % HD;
    const std::int64_t t = r0 + r;
    dst[r * ldb<HD> + d] = __float2bfloat16_rn(t < Tx ? x[((b * Tx + t) * Nx + hh) * HD + d] : 0.0f);
  }
}

/// One warp: out [16 x cols] (f32, leading dimension lds) = a [16 x HD] . x[cols x HD]^T
/// (both bf16, leading dimension ldb<HD>).
template <int HD>
__device__ inline void warp_scores(float* out, const bf* a, const bf* x) {
  for (int n = 0; n < cols / 16; ++n) {
    frag_c c;
    wmma::fill_fragment(c, 0.0f);
    for (int kk = 0; kk < HD / 16; ++kk) {
      frag_a fa;
      frag_bt fb;
      wmma::load_matrix_sync(fa, a + 16 * kk, ldb<HD>);
      wmma::load_matrix_sync(fb, x + 16 * n * ldb<HD> + 16 * kk, ldb<HD>);
      wmma::mma_sync(c, fa, fb, c);
    }
    wmma::store_matrix_sync(out + 16 * n, c, lds, wmma::mem_row_major);
  }
}

/// One warp: acc[n] (the 16 x 16 blocks of a 16 x HD product) += p [16 x cols] (bf16,
/// leading dimension ldp) . x [cols x HD] (bf16, leading dimension ldb<HD>).
template <int HD>
__device__ inline void warp_accumulate(frag_c* acc, const bf* p, const bf* x) {
  for (int kk = 0; kk < cols / 16; ++kk) {
    frag_a fa;
    wmma::load_matrix_sync(fa, p + 16 * kk, ldp);
    for (int n = 0; n < HD / 16; ++n) {
      frag_b fb;
      wmma::load_matrix_sync(fb, x + 16 * kk * ldb<HD> + 16 * n, ldb<HD>);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

/// One warp writes its 16 rows of a 16 x HD result (acc, through the f32 staging rows at
/// `stage`, leading dimension ldo<HD>) to y [B, Ty, Ny, HD] (head hh, rows r0 + 16w ...)
/// times `scale`, or adds them with Accumulate.
template <int HD, bool Accumulate>
__device__ inline void warp_store(float* y, frag_c* acc, float* stage, std::int64_t b, std::int64_t hh,
                                  std::int64_t r0, std::int64_t Ty, std::int64_t Ny, float scale) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int n = 0; n < HD / 16; ++n) wmma::store_matrix_sync(stage + 16 * n, acc[n], ldo<HD>, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < 16 * HD; e += 32) {
    const std::int64_t t = r0 + 16 * w + e / HD;
    if (t >= Ty) continue;
    float& o = y[((b * Ty + t) * Ny + hh) * HD + e % HD];
    const float x = stage[(e / HD) * ldo<HD> + e % HD] * scale;
    o = Accumulate ? o + x : x;
  }
  __syncwarp();
}

// bf16 WMMA needs sm_80: compiled for an older architecture the kernels trap (the host
// never launches them there: tc_attention_supported).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TESSERA_TC_ATTENTION_UNSUPPORTED 1
#endif

/// Forward: block (64 queries, head, batch). A row that sees no key gets out 0, lse -inf.
template <int HD, class Mask>
__global__ void __launch_bounds__(threads)
    forward_k(float* out, float* lse, const float* q, const float* k, const float* v, Mask mask, std::int64_t Tq,
              std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
#ifdef TESSERA_TC_ATTENTION_UNSUPPORTED
  __trap();
#else
  unsigned char* smem = shared_memory();
  constexpr int LB = ldb<HD>, LO = ldo<HD>;
  bf* Qs = reinterpret_cast<bf*>(smem);
  bf* Ks = Qs + rows * LB;
  bf* Vs = Ks + cols * LB;
  float* Ss = reinterpret_cast<float*>(Vs + cols * LB);
  bf* Ps = reinterpret_cast<bf*>(Ss + rows * lds);
  float* Os = reinterpret_cast<float*>(Ps + rows * ldp);
  float* Ms = Os + rows * LO;
  float* Ls = Ms + rows;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = 16 * w + lane / 2, half = lane % 2;  // this thread's row and half of a tile's columns
  const std::int64_t b = blockIdx.z, h = blockIdx.y, g = h / (NH / NKV), t0 = std::int64_t(blockIdx.x) * rows;
  const std::int64_t t = t0 + r;
  const bool live = t < Tq;
  load_rows<HD, rows>(Qs, q, b, h, t0, Tq, NH);
  for (int e = threadIdx.x; e < rows * LO; e += threads) Os[e] = 0.0f;
  for (int e = threadIdx.x; e < rows; e += threads) Ms[e] = -FLT_MAX, Ls[e] = 0.0f;
  const std::int64_t end = block_key_end(mask, t0, Tq, Tk);
  __syncthreads();
  for (std::int64_t s0 = 0; s0 < end; s0 += cols) {
    if (!tile_needed<Mask, cols / 2>(live, s0 + cols / 2 * half, end, [&](std::int64_t s) { return mask.sees(t, s); }))
      continue;
    load_rows<HD, cols>(Ks, k, b, g, s0, Tk, NKV);
    load_rows<HD, cols>(Vs, v, b, g, s0, Tk, NKV);
    __syncthreads();
    warp_scores<HD>(Ss + 16 * w * lds, Qs + 16 * w * LB, Ks);
    __syncwarp();
    const float* srow = Ss + r * lds;
    float mx = -FLT_MAX;
    for (int j = cols / 2 * half; j < cols / 2 * (half + 1); ++j)
      if (live && s0 + j < end && mask.sees(t, s0 + j)) mx = fmaxf(mx, srow[j] * scale);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_old = Ms[r], m_new = fmaxf(m_old, mx), corr = pointwise::fast_exp(m_old - m_new);
    float sum = 0.0f;
    for (int j = cols / 2 * half; j < cols / 2 * (half + 1); ++j) {
      const bool seen = live && s0 + j < end && mask.sees(t, s0 + j);
      const bf p = __float2bfloat16_rn(seen ? pointwise::fast_exp(srow[j] * scale - m_new) : 0.0f);
      Ps[r * ldp + j] = p;
      sum += __bfloat162float(p);  // the probabilities P V multiplies
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    for (int d = HD / 2 * half; d < HD / 2 * (half + 1); ++d) Os[r * LO + d] *= corr;
    __syncwarp();
    if (half == 0) Ms[r] = m_new, Ls[r] = Ls[r] * corr + sum;
    frag_c acc[HD / 16];
    for (int n = 0; n < HD / 16; ++n)
      wmma::load_matrix_sync(acc[n], Os + 16 * w * LO + 16 * n, LO, wmma::mem_row_major);
    warp_accumulate<HD>(acc, Ps + 16 * w * ldp, Vs);
    for (int n = 0; n < HD / 16; ++n)
      wmma::store_matrix_sync(Os + 16 * w * LO + 16 * n, acc[n], LO, wmma::mem_row_major);
    __syncthreads();
  }
  __syncwarp();
  for (int e = lane; e < 16 * HD; e += 32) {
    const int rr = 16 * w + e / HD;
    if (t0 + rr >= Tq) continue;
    const float l = Ls[rr];
    out[((b * Tq + t0 + rr) * NH + h) * HD + e % HD] = l > 0.0f ? Os[rr * LO + e % HD] / l : 0.0f;
  }
  if (lane < 16 && t0 + 16 * w + lane < Tq) {
    const int rr = 16 * w + lane;
    lse[(b * NH + h) * Tq + t0 + rr] = Ls[rr] > 0.0f ? Ms[rr] + logf(Ls[rr]) : -INFINITY;
  }
#endif
}

/// dq: block (64 queries, head, batch), over the keys they see. Writes dq, or with
/// Accumulate adds to it.
template <int HD, class Mask, bool Accumulate>
__global__ void __launch_bounds__(threads)
    dq_k(float* dq, const float* dout, const float* q, const float* k, const float* v, const float* lse,
         const float* D, Mask mask, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
#ifdef TESSERA_TC_ATTENTION_UNSUPPORTED
  __trap();
#else
  unsigned char* smem = shared_memory();
  constexpr int LB = ldb<HD>;
  bf* Qs = reinterpret_cast<bf*>(smem);
  bf* Gs = Qs + rows * LB;
  bf* Ks = Gs + rows * LB;
  bf* Vs = Ks + cols * LB;
  float* Sf = reinterpret_cast<float*>(Vs + cols * LB);
  float* Pf = Sf + rows * lds;
  bf* Db = reinterpret_cast<bf*>(Pf + rows * lds);
  float* Lr = reinterpret_cast<float*>(Db + rows * ldp);
  float* Dr = Lr + rows;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = 16 * w + lane / 2, half = lane % 2;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, g = h / (NH / NKV), t0 = std::int64_t(blockIdx.x) * rows;
  const std::int64_t t = t0 + r;
  const bool live = t < Tq;
  load_rows<HD, rows>(Qs, q, b, h, t0, Tq, NH);
  load_rows<HD, rows>(Gs, dout, b, h, t0, Tq, NH);
  for (int e = threadIdx.x; e < rows; e += threads) {
    const bool in = t0 + e < Tq;
    Lr[e] = in ? lse[(b * NH + h) * Tq + t0 + e] : 0.0f;
    Dr[e] = in ? D[(b * NH + h) * Tq + t0 + e] : 0.0f;
  }
  frag_c acc[HD / 16];
  for (int n = 0; n < HD / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
  const std::int64_t end = block_key_end(mask, t0, Tq, Tk);
  __syncthreads();
  for (std::int64_t s0 = 0; s0 < end; s0 += cols) {
    if (!tile_needed<Mask, cols / 2>(live, s0 + cols / 2 * half, end, [&](std::int64_t s) { return mask.sees(t, s); }))
      continue;
    load_rows<HD, cols>(Ks, k, b, g, s0, Tk, NKV);
    load_rows<HD, cols>(Vs, v, b, g, s0, Tk, NKV);
    __syncthreads();
    warp_scores<HD>(Sf + 16 * w * lds, Qs + 16 * w * LB, Ks);
    warp_scores<HD>(Pf + 16 * w * lds, Gs + 16 * w * LB, Vs);
    __syncwarp();
    for (int j = cols / 2 * half; j < cols / 2 * (half + 1); ++j) {
      const bool seen = live && s0 + j < end && mask.sees(t, s0 + j);
      const float p = seen ? pointwise::fast_exp(Sf[r * lds + j] * scale - Lr[r]) : 0.0f;
      Db[r * ldp + j] = __float2bfloat16_rn(p * (Pf[r * lds + j] - Dr[r]));
    }
    __syncwarp();
    warp_accumulate<HD>(acc, Db + 16 * w * ldp, Ks);
    __syncthreads();
  }
  // the K and V tiles' memory stages the result (every warp is done with them)
  warp_store<HD, Accumulate>(dq, acc, reinterpret_cast<float*>(Ks) + 16 * w * ldo<HD>, b, h, t0, Tq, NH, scale);
#endif
}

/// dk, dv: block (64 keys, KV head, batch), over the queries of the KV head's query heads
/// that see them. Writes dk and dv, or with Accumulate adds to them.
template <int HD, class Mask, bool Accumulate>
__global__ void __launch_bounds__(threads)
    dkv_k(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v, const float* lse,
          const float* D, Mask mask, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
#ifdef TESSERA_TC_ATTENTION_UNSUPPORTED
  __trap();
#else
  unsigned char* smem = shared_memory();
  constexpr int LB = ldb<HD>;
  bf* Ks = reinterpret_cast<bf*>(smem);
  bf* Vs = Ks + rows * LB;
  bf* Qs = Vs + rows * LB;
  bf* Gs = Qs + cols * LB;
  float* Sf = reinterpret_cast<float*>(Gs + cols * LB);
  float* Pf = Sf + rows * lds;
  bf* Pb = reinterpret_cast<bf*>(Pf + rows * lds);
  bf* Db = Pb + rows * ldp;
  float* Lc = reinterpret_cast<float*>(Db + rows * ldp);
  float* Dc = Lc + cols;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = 16 * w + lane / 2, half = lane % 2;  // this thread's key row and half of a query tile
  const std::int64_t b = blockIdx.z, g = blockIdx.y, G = NH / NKV, s0 = std::int64_t(blockIdx.x) * rows;
  const std::int64_t s = s0 + r;
  const bool live = s < Tk;
  load_rows<HD, rows>(Ks, k, b, g, s0, Tk, NKV);
  load_rows<HD, rows>(Vs, v, b, g, s0, Tk, NKV);
  frag_c ak[HD / 16], av[HD / 16];
  for (int n = 0; n < HD / 16; ++n) wmma::fill_fragment(ak[n], 0.0f), wmma::fill_fragment(av[n], 0.0f);
  __syncthreads();
  for (std::int64_t h = g * G; h < (g + 1) * G; ++h)
    for (std::int64_t q0 = mask.query_begin(s0); q0 < Tq; q0 += cols) {
      if (!tile_needed<Mask, cols / 2>(live, q0 + cols / 2 * half, Tq, [&](std::int64_t t) { return mask.sees(t, s); }))
        continue;
      load_rows<HD, cols>(Qs, q, b, h, q0, Tq, NH);
      load_rows<HD, cols>(Gs, dout, b, h, q0, Tq, NH);
      for (int e = threadIdx.x; e < cols; e += threads) {
        const bool in = q0 + e < Tq;
        Lc[e] = in ? lse[(b * NH + h) * Tq + q0 + e] : 0.0f;
        Dc[e] = in ? D[(b * NH + h) * Tq + q0 + e] : 0.0f;
      }
      __syncthreads();
      warp_scores<HD>(Sf + 16 * w * lds, Ks + 16 * w * LB, Qs);  // S^T
      warp_scores<HD>(Pf + 16 * w * lds, Vs + 16 * w * LB, Gs);  // dP^T
      __syncwarp();
      for (int j = cols / 2 * half; j < cols / 2 * (half + 1); ++j) {
        const bool seen = live && q0 + j < Tq && mask.sees(q0 + j, s);
        const float p = seen ? pointwise::fast_exp(Sf[r * lds + j] * scale - Lc[j]) : 0.0f;
        Pb[r * ldp + j] = __float2bfloat16_rn(p);
        Db[r * ldp + j] = __float2bfloat16_rn(p * (Pf[r * lds + j] - Dc[j]));
      }
      __syncwarp();
      warp_accumulate<HD>(av, Pb + 16 * w * ldp, Gs);
      warp_accumulate<HD>(ak, Db + 16 * w * ldp, Qs);
      __syncthreads();
    }
  float* stage = reinterpret_cast<float*>(Qs) + 16 * w * ldo<HD>;  // the query tiles' memory
  warp_store<HD, Accumulate>(dk, ak, stage, b, g, s0, Tk, NKV, scale);
  warp_store<HD, Accumulate>(dv, av, stage, b, g, s0, Tk, NKV, 1.0f);
#endif
}
#undef TESSERA_TC_ATTENTION_UNSUPPORTED
}  // namespace tessera::cuda::detail::tc
