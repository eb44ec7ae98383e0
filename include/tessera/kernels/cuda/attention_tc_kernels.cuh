// tessera/kernels/cuda/attention_tc_kernels.cuh: the device code of the tensor-core
// attention (attention_tc.cuh has the entry points and says what it computes). nvcc
// compiles it for the GPU; a host compiler compiles it with TESSERA_CUDA_EMULATION defined
// and tests/support/cuda_emulation.hpp included first, which runs a block's 128 threads as
// host threads and mma.sync's m16n8k16 on each lane's registers in the PTX ISA's fragment
// layout: the host tests check the kernels' fragment indexing, tiling, masking and
// synchronisation on every CI run (tests/kernels/test_attention_emulated.cpp). Not what the
// hardware's timing or order of summation does -- that needs a GPU
// (tests/gpu/test_cuda_attention.cu).
// tessera-requires: cuda (device code: see above)
#pragma once

#ifndef TESSERA_CUDA_EMULATION
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#endif

#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include <tessera/kernels/cuda/attention_masks.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda::detail::tc {
using bf = __nv_bfloat16;
using u32 = std::uint32_t;
inline constexpr int rows = attention_rows;  // rows a block owns: 4 warps x 16
inline constexpr int cols = 64;              // streamed rows per tile
inline constexpr int threads = 128;
// Leading dimensions (bf16 elements) of the shared tiles: rows of HD (row tiles) and rows of
// `cols` (transposed tiles, [HD][cols]). The 8 of padding puts the 32 lanes' 32-bit fragment
// loads (rows g = lane / 4, column pairs t = lane % 4) on 32 different banks.
template <int HD>
inline constexpr int ldr = HD + 8;
inline constexpr int ldt = cols + 8;

/// The block's dynamic shared memory (128-byte aligned).
__device__ inline unsigned char* shared_memory() {
#ifdef TESSERA_CUDA_EMULATION
  return emulation::shared_memory();
#else
  extern __shared__ __align__(128) unsigned char tc_shared[];
  return tc_shared;
#endif
}

// Shared memory of each kernel, in bytes.
template <int HD>
inline constexpr std::size_t row_tile = std::size_t(rows) * ldr<HD> * 2;  // rows = cols = 64
template <int HD>
inline constexpr std::size_t t_tile = std::size_t(HD) * ldt * 2;
template <int HD>
inline constexpr std::size_t forward_bytes = 2 * (row_tile<HD> + t_tile<HD>);                  // (K, V^T) x 2 stages
template <int HD>
inline constexpr std::size_t dq_bytes = 4 * row_tile<HD> + t_tile<HD> + 2 * rows * 4;          // Q, dO, K, V, K^T
template <int HD>
inline constexpr std::size_t dkv_bytes = 4 * row_tile<HD> + 2 * t_tile<HD> + 2 * cols * 4;     // K, V, Q, dO, Q^T, dO^T
template <int HD>
inline constexpr std::size_t stage_bytes = row_tile<HD>;

/// A tensor's bf16 copies the kernels stream tiles from (stage_k writes them): `rows` [B, Tp,
/// N, HD] and `t` [B, N, HD, Tp] (its transpose per head), Tp the length rounded up to a
/// whole tile, zeros past the end -- so that every tile is whole 16-byte rows.
struct staged {
  const bf* rows;
  const bf* t;
  std::int64_t Tp;
  /// The device memory it reads (host side: the CUDA emulation checks a launch's reach through it).
  std::array<const void*, 2> device_pointers() const { return {rows, t}; }
};
/// The length a staged tensor of T rows has.
__host__ __device__ inline std::int64_t staged_length(std::int64_t T) { return (T + cols - 1) / cols * cols; }

/// d += a b on the tensor cores: mma.sync m16n8k16, bf16 operands, f32 accumulators, in the
/// PTX ISA's fragment layout (cuda_emulation.hpp spells it out).
__device__ inline void mma(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#ifdef TESSERA_CUDA_EMULATION
  emulation::mma_m16n8k16_bf16(d, a, b);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/// A bf16's bits.
__device__ inline std::uint16_t bits(bf x) {
#ifdef TESSERA_CUDA_EMULATION
  return x.bits;
#else
  return __bfloat16_as_ushort(x);
#endif
}
/// Two floats rounded to bf16 and packed into one register (lo in the low half).
__device__ inline u32 pack(float lo, float hi) {
  return u32(bits(__float2bfloat16_rn(lo))) | (u32(bits(__float2bfloat16_rn(hi))) << 16);
}
/// x rounded to bf16, as a float.
__device__ inline float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

/// The two bf16 at x[r * ld + c] (c even) as one register.
__device__ inline u32 pair(const bf* x, int ld, int r, int c) {
#ifdef TESSERA_CUDA_EMULATION
  u32 v;
  emulation::aligned_load<4>(&v, x + r * ld + c);
  return v;
#else
  return *reinterpret_cast<const u32*>(x + r * ld + c);
#endif
}
/// Stores two bf16 (one register, as pair loads them) at p (4-byte aligned).
__device__ inline void store_pair(bf* p, u32 v) {
#ifdef TESSERA_CUDA_EMULATION
  if (reinterpret_cast<std::uintptr_t>(p) % 4 != 0) throw std::logic_error("emulation: a 4-byte store not 4-byte aligned");
  std::memcpy(static_cast<void*>(p), &v, 4);
#else
  *reinterpret_cast<u32*>(p) = v;
#endif
}
/// Four floats from 16-byte aligned global memory.
__device__ inline void load4(float (&v)[4], const float* p) {
#ifdef TESSERA_CUDA_EMULATION
  emulation::aligned_load<16>(v, p);
#else
  const float4 f = *reinterpret_cast<const float4*>(p);
  v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
#endif
}
/// 16 bytes from global to shared memory, asynchronously (cp.async; both 16-byte aligned):
/// visible to the block after cp_async_wait and a barrier.
__device__ inline void cp_async16(void* dst, const void* src) {
#ifdef TESSERA_CUDA_EMULATION
  if (reinterpret_cast<std::uintptr_t>(dst) % 16 != 0)
    throw std::logic_error("emulation: cp.async to shared memory not 16-byte aligned");
  emulation::aligned_load<16>(dst, src);  // at once: a race with a reader shows without the barrier
#else
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
#endif
}
__device__ inline void cp_async_commit() {
#ifndef TESSERA_CUDA_EMULATION
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
/// Waits until at most N groups of this thread's copies are in flight.
template <int N>
__device__ inline void cp_async_wait() {
#ifndef TESSERA_CUDA_EMULATION
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
/// N rows of W bf16 (W a multiple of 8) from src (rows `stride` elements apart) into dst
/// (leading dimension ld), asynchronously.
template <int N, int W>
__device__ inline void copy_tile(bf* dst, int ld, const bf* src, std::int64_t stride) {
  for (int e = threadIdx.x; e < N * W / 8; e += threads) {
    const int r = e / (W / 8), c = 8 * (e % (W / 8));
    cp_async16(dst + r * ld + c, src + r * stride + c);
  }
}
/// Tile [r0, r0 + 64) of head hh of a staged tensor with N heads: rows into a row tile, or
/// (Transposed) its [HD][64] transpose into a transposed tile.
template <int HD, bool Transposed = false>
__device__ inline void copy_staged(bf* dst, const staged& x, std::int64_t b, std::int64_t hh, std::int64_t r0,
                                   std::int64_t N) {
  if constexpr (Transposed)
    copy_tile<HD, cols>(dst, ldt, x.t + ((b * N + hh) * HD) * x.Tp + r0, x.Tp);
  else
    copy_tile<cols, HD>(dst, ldr<HD>, x.rows + ((b * x.Tp + r0) * N + hh) * HD, N * HD);
}

/// A fragment (16 x 16) of the row-major tile x: rows r0.., columns k0...
__device__ inline void load_a(u32 (&a)[4], const bf* x, int ld, int r0, int k0, int g, int t) {
  a[0] = pair(x, ld, r0 + g, k0 + 2 * t);
  a[1] = pair(x, ld, r0 + g + 8, k0 + 2 * t);
  a[2] = pair(x, ld, r0 + g, k0 + 2 * t + 8);
  a[3] = pair(x, ld, r0 + g + 8, k0 + 2 * t + 8);
}
/// B fragment (16 x 8) of y^T for the row-major tile y: B[k][n] = y[n0 + n][k0 + k].
__device__ inline void load_bt(u32 (&b)[2], const bf* y, int ld, int n0, int k0, int g, int t) {
  b[0] = pair(y, ld, n0 + g, k0 + 2 * t);
  b[1] = pair(y, ld, n0 + g, k0 + 2 * t + 8);
}
/// The A fragment of k-step kk from accumulators: a 16 x 16 block of a C tile pair (n-tiles
/// 2kk and 2kk + 1), rounded to bf16 -- FlashAttention-2's reuse of S's registers as P.
__device__ inline void c_to_a(u32 (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack(c0[0], c0[1]);
  a[1] = pack(c0[2], c0[3]);
  a[2] = pack(c1[0], c1[1]);
  a[3] = pack(c1[2], c1[3]);
}

/// Rows [r0, r0 + N) of head hh of x [B, Tx, Nx, HD], rounded to bf16, into dst (row tile,
/// leading dimension ldr<HD>; Transposed: dst[d * ldt + r]); zeros past Tx. Four floats a
/// load where x is 16-byte aligned.
template <int HD, int N, bool Transposed = false>
__device__ inline void load_rows(bf* dst, const float* x, std::int64_t b, std::int64_t hh, std::int64_t r0,
                                 std::int64_t Tx, std::int64_t Nx) {
  const auto put = [&](int r, int d, float v) {
    dst[Transposed ? d * ldt + r : r * ldr<HD> + d] = __float2bfloat16_rn(v);
  };
  if (reinterpret_cast<std::uintptr_t>(x) % 16 == 0) {
    for (int e = threadIdx.x; e < N * HD / 4; e += threads) {
      const int r = e / (HD / 4), d = 4 * (e % (HD / 4));
      const std::int64_t t = r0 + r;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (t < Tx) load4(v, x + ((b * Tx + t) * Nx + hh) * HD + d);
      for (int i = 0; i < 4; ++i) put(r, d + i, v[i]);
    }
  } else {
    for (int e = threadIdx.x; e < N * HD; e += threads) {
      const int r = e / HD, d = e % HD;
      const std::int64_t t = r0 + r;
      put(r, d, t < Tx ? x[((b * Tx + t) * Nx + hh) * HD + d] : 0.0f);
    }
  }
}

/// The sum of v over the four lanes of a row (lanes 4g .. 4g + 3 hold row g's columns).
__device__ inline float row_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ inline float row_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

/// A warp's 16 x HD result in accumulators (acc[n]: columns 8n..8n+7) times `scale` into y
/// [B, Ty, Ny, HD] (head hh, rows r0 ..), or added with Accumulate; rows past Ty skipped.
template <int HD, bool Accumulate>
__device__ inline void store_rows(float* y, const float (&acc)[HD / 8][4], std::int64_t b, std::int64_t hh,
                                  std::int64_t r0, std::int64_t Ty, std::int64_t Ny, float scale, int g, int t) {
  for (int i = 0; i < 2; ++i) {
    const std::int64_t row = r0 + g + 8 * i;
    if (row >= Ty) continue;
    float* o = y + ((b * Ty + row) * Ny + hh) * HD;
    for (int n = 0; n < HD / 8; ++n)
      for (int j = 0; j < 2; ++j) {
        const float x = acc[n][2 * i + j] * scale;
        float& e = o[8 * n + 2 * t + j];
        e = Accumulate ? e + x : x;
      }
  }
}

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
/// arithmetic runs. A row that sees no key gets out 0, lse -inf.
template <int HD, class Mask>
__global__ void __launch_bounds__(threads)
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
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, grp = h / (NH / NKV), t0 = std::int64_t(blockIdx.x) * rows;
  const std::int64_t row[2] = {t0 + 16 * w + g, t0 + 16 * w + g + 8};
  const bool live[2] = {row[0] < Tq, row[1] < Tq};
  // tile skipping (span masks): thread i looks at row i / 2, half i % 2 of a tile
  const std::int64_t crow = t0 + threadIdx.x / 2;
  const int chalf = threadIdx.x % 2;
  const std::int64_t end = block_key_end(mask, t0, Tq, Tk);
  const auto next_tile = [&](std::int64_t s0) {  // the first tile from s0 on that a row sees (or end)
    while (s0 < end && !tile_needed<Mask, cols / 2>(crow < Tq, s0 + cols / 2 * chalf, end,
                                                    [&](std::int64_t s) { return mask.sees(crow, s); }))
      s0 += cols;
    return s0;
  };
  const auto fetch = [&](std::int64_t s0, int stage) {
    copy_staged<HD>(K_of(stage), k, b, grp, s0, NKV);
    copy_staged<HD, true>(Vt_of(stage), v, b, grp, s0, NKV);
    cp_async_commit();
  };
  // Q, through stage 1's K tile, into registers
  load_rows<HD, rows>(K_of(1), q, b, h, t0, Tq, NH);
  __syncthreads();
  u32 qa[HD / 16][4];
  for (int kk = 0; kk < HD / 16; ++kk) load_a(qa[kk], K_of(1), LR, 16 * w, 16 * kk, g, t);
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
    for (int n = 0; n < cols / 8; ++n)
      for (int kk = 0; kk < HD / 16; ++kk) {
        u32 kb[2];
        load_bt(kb, Kst, LR, 8 * n, 16 * kk, g, t);
        mma(s[n], qa[kk], kb);
      }
    // the online softmax: masked scores out, the rows' maxima over the 4 lanes of a row
    float mx[2] = {-FLT_MAX, -FLT_MAX};
    for (int n = 0; n < cols / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const int i = e / 2;
        const std::int64_t key = s0 + 8 * n + 2 * t + e % 2;
        const bool seen = live[i] && key < end && mask.sees(row[i], key);
        s[n][e] = seen ? s[n][e] * scale : -INFINITY;
        mx[i] = fmaxf(mx[i], s[n][e]);
      }
    float corr[2];
    for (int i = 0; i < 2; ++i) {
      const float m_new = fmaxf(m[i], row_max(mx[i]));
      corr[i] = pointwise::fast_exp(m[i] - m_new);
      m[i] = m_new;
      l[i] *= corr[i];
    }
    for (int n = 0; n < cols / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const int i = e / 2;
        const float p = s[n][e] == -INFINITY ? 0.0f : round_bf16(pointwise::fast_exp(s[n][e] - m[i]));
        s[n][e] = p;
        l[i] += p;  // the probabilities P V multiplies
      }
    for (int n = 0; n < HD / 8; ++n)
      for (int e = 0; e < 4; ++e) o[n][e] *= corr[e / 2];
    for (int kk = 0; kk < cols / 16; ++kk) {
      u32 pa[4];
      c_to_a(pa, s[2 * kk], s[2 * kk + 1]);
      for (int n = 0; n < HD / 8; ++n) {
        u32 vb[2];
        load_bt(vb, Vst, ldt, 8 * n, 16 * kk, g, t);
        mma(o[n], pa, vb);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is loaded again
    s0 = next;
  }
  for (int i = 0; i < 2; ++i) {
    const float sum = row_sum(l[i]);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int n = 0; n < HD / 8; ++n) o[n][2 * i] *= inv, o[n][2 * i + 1] *= inv;
    if (t == 0 && live[i]) lse[(b * NH + h) * Tq + row[i]] = sum > 0.0f ? m[i] + logf(sum) : -INFINITY;
  }
  store_rows<HD, false>(out, o, b, h, t0 + 16 * w, Tq, NH, 1.0f, g, t);
#endif
}

/// dq: block (64 queries, head, batch), over the keys they see; warp w owns queries
/// 16w..16w+15: S = Q K^T and dP = dO V^T in registers, dS = P (dP - D) rounded to bf16 as
/// the A operand of dq += dS K. Key tiles from the staged k (rows and transposed) and v
/// (rows). Writes dq, or with Accumulate adds to it.
template <int HD, class Mask, bool Accumulate>
__global__ void __launch_bounds__(threads)
    dq_k(float* dq, const float* dout, const float* q, staged k, staged v, const float* lse, const float* D,
         Mask mask, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
#ifdef TESSERA_TC_ATTENTION_UNSUPPORTED
  __trap();
#else
  constexpr int LR = ldr<HD>;
  bf* Qs = reinterpret_cast<bf*>(shared_memory());
  bf* Gs = Qs + rows * LR;
  bf* Ks = Gs + rows * LR;
  bf* Vs = Ks + cols * LR;
  bf* Kt = Vs + cols * LR;
  float* Lr = reinterpret_cast<float*>(Kt + HD * ldt);
  float* Dr = Lr + rows;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, grp = h / (NH / NKV), t0 = std::int64_t(blockIdx.x) * rows;
  const std::int64_t row[2] = {t0 + 16 * w + g, t0 + 16 * w + g + 8};
  const bool live[2] = {row[0] < Tq, row[1] < Tq};
  const std::int64_t crow = t0 + threadIdx.x / 2;
  const int chalf = threadIdx.x % 2;
  load_rows<HD, rows>(Qs, q, b, h, t0, Tq, NH);
  load_rows<HD, rows>(Gs, dout, b, h, t0, Tq, NH);
  for (int e = threadIdx.x; e < rows; e += threads) {
    const bool in = t0 + e < Tq;
    Lr[e] = in ? lse[(b * NH + h) * Tq + t0 + e] : 0.0f;
    Dr[e] = in ? D[(b * NH + h) * Tq + t0 + e] : 0.0f;
  }
  float acc[HD / 8][4] = {};
  const std::int64_t end = block_key_end(mask, t0, Tq, Tk);
  for (std::int64_t s0 = 0; s0 < end; s0 += cols) {
    if (!tile_needed<Mask, cols / 2>(crow < Tq, s0 + cols / 2 * chalf, end,
                                     [&](std::int64_t s) { return mask.sees(crow, s); }))
      continue;
    __syncthreads();  // every warp is done with the last tile (and the first sees Q, dO, Lr, Dr)
    copy_staged<HD>(Ks, k, b, grp, s0, NKV);
    copy_staged<HD>(Vs, v, b, grp, s0, NKV);
    copy_staged<HD, true>(Kt, k, b, grp, s0, NKV);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    float s[cols / 8][4] = {}, dp[cols / 8][4] = {};
    for (int kk = 0; kk < HD / 16; ++kk) {
      u32 qa[4], ga[4];
      load_a(qa, Qs, LR, 16 * w, 16 * kk, g, t);
      load_a(ga, Gs, LR, 16 * w, 16 * kk, g, t);
      for (int n = 0; n < cols / 8; ++n) {
        u32 kb[2], vb[2];
        load_bt(kb, Ks, LR, 8 * n, 16 * kk, g, t);
        load_bt(vb, Vs, LR, 8 * n, 16 * kk, g, t);
        mma(s[n], qa, kb);
        mma(dp[n], ga, vb);
      }
    }
    for (int n = 0; n < cols / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const int i = e / 2, r = 16 * w + g + 8 * i;
        const std::int64_t key = s0 + 8 * n + 2 * t + e % 2;
        const bool seen = live[i] && key < end && mask.sees(row[i], key);
        const float p = seen ? pointwise::fast_exp(s[n][e] * scale - Lr[r]) : 0.0f;
        s[n][e] = p * (dp[n][e] - Dr[r]);  // dS
      }
    for (int kk = 0; kk < cols / 16; ++kk) {
      u32 da[4];
      c_to_a(da, s[2 * kk], s[2 * kk + 1]);
      for (int n = 0; n < HD / 8; ++n) {
        u32 kb[2];
        load_bt(kb, Kt, ldt, 8 * n, 16 * kk, g, t);
        mma(acc[n], da, kb);
      }
    }
  }
  store_rows<HD, Accumulate>(dq, acc, b, h, t0 + 16 * w, Tq, NH, scale, g, t);
#endif
}

/// dk, dv: block (64 keys, KV head, batch), over the queries of the KV head's query heads
/// that see them, 32 at a time; warp w owns keys 16w..16w+15: S^T = K Q^T and dP^T = V dO^T
/// in registers, P^T and dS^T rounded to bf16 as the A operands of dv += P^T dO and dk +=
/// dS^T Q. Query tiles from the staged q and dout (rows and transposed). Writes dk and dv, or
/// with Accumulate adds to them.
template <int HD, class Mask, bool Accumulate>
__global__ void __launch_bounds__(threads)
    dkv_k(float* dk, float* dv, staged dout, staged q, const float* k, const float* v, const float* lse,
          const float* D, Mask mask, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
#ifdef TESSERA_TC_ATTENTION_UNSUPPORTED
  __trap();
#else
  constexpr int LR = ldr<HD>, QS = 32;  // queries a step
  bf* Ks = reinterpret_cast<bf*>(shared_memory());
  bf* Vs = Ks + rows * LR;
  bf* Qs = Vs + rows * LR;
  bf* Gs = Qs + cols * LR;
  bf* Qt = Gs + cols * LR;
  bf* Gt = Qt + HD * ldt;
  float* Lc = reinterpret_cast<float*>(Gt + HD * ldt);
  float* Dc = Lc + cols;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t b = blockIdx.z, grp = blockIdx.y, G = NH / NKV, s0 = std::int64_t(blockIdx.x) * rows;
  const std::int64_t key[2] = {s0 + 16 * w + g, s0 + 16 * w + g + 8};
  const bool live[2] = {key[0] < Tk, key[1] < Tk};
  const std::int64_t ckey = s0 + threadIdx.x / 2;  // tile skipping: key i / 2, half i % 2 of a query tile
  const int chalf = threadIdx.x % 2;
  load_rows<HD, rows>(Ks, k, b, grp, s0, Tk, NKV);
  load_rows<HD, rows>(Vs, v, b, grp, s0, Tk, NKV);
  float ak[HD / 8][4] = {}, av[HD / 8][4] = {};
  for (std::int64_t h = grp * G; h < (grp + 1) * G; ++h)
    for (std::int64_t q0 = mask.query_begin(s0) / cols * cols; q0 < Tq; q0 += cols) {
      if (!tile_needed<Mask, cols / 2>(ckey < Tk, q0 + cols / 2 * chalf, Tq,
                                       [&](std::int64_t tq) { return mask.sees(tq, ckey); }))
        continue;
      __syncthreads();  // every warp is done with the last tile (and the first sees K, V)
      copy_staged<HD>(Qs, q, b, h, q0, NH);
      copy_staged<HD>(Gs, dout, b, h, q0, NH);
      copy_staged<HD, true>(Qt, q, b, h, q0, NH);
      copy_staged<HD, true>(Gt, dout, b, h, q0, NH);
      cp_async_commit();
      for (int e = threadIdx.x; e < cols; e += threads) {
        const bool in = q0 + e < Tq;
        Lc[e] = in ? lse[(b * NH + h) * Tq + q0 + e] : 0.0f;
        Dc[e] = in ? D[(b * NH + h) * Tq + q0 + e] : 0.0f;
      }
      cp_async_wait<0>();
      __syncthreads();
      for (int j0 = 0; j0 < cols; j0 += QS) {
        float s[QS / 8][4] = {}, dp[QS / 8][4] = {};
        for (int kk = 0; kk < HD / 16; ++kk) {
          u32 ka[4], va[4];
          load_a(ka, Ks, LR, 16 * w, 16 * kk, g, t);
          load_a(va, Vs, LR, 16 * w, 16 * kk, g, t);
          for (int n = 0; n < QS / 8; ++n) {
            u32 qb[2], gb[2];
            load_bt(qb, Qs, LR, j0 + 8 * n, 16 * kk, g, t);
            load_bt(gb, Gs, LR, j0 + 8 * n, 16 * kk, g, t);
            mma(s[n], ka, qb);
            mma(dp[n], va, gb);
          }
        }
        for (int n = 0; n < QS / 8; ++n)
          for (int e = 0; e < 4; ++e) {
            const int i = e / 2, j = j0 + 8 * n + 2 * t + e % 2;
            const bool seen = live[i] && q0 + j < Tq && mask.sees(q0 + j, key[i]);
            const float p = seen ? pointwise::fast_exp(s[n][e] * scale - Lc[j]) : 0.0f;
            s[n][e] = p;                         // P^T
            dp[n][e] = p * (dp[n][e] - Dc[j]);  // dS^T
          }
        for (int kk = 0; kk < QS / 16; ++kk) {
          u32 pa[4], da[4];
          c_to_a(pa, s[2 * kk], s[2 * kk + 1]);
          c_to_a(da, dp[2 * kk], dp[2 * kk + 1]);
          for (int n = 0; n < HD / 8; ++n) {
            u32 gb[2], qb[2];
            load_bt(gb, Gt, ldt, 8 * n, j0 + 16 * kk, g, t);
            load_bt(qb, Qt, ldt, 8 * n, j0 + 16 * kk, g, t);
            mma(av[n], pa, gb);
            mma(ak[n], da, qb);
          }
        }
      }
    }
  store_rows<HD, Accumulate>(dk, ak, b, grp, s0 + 16 * w, Tk, NKV, scale, g, t);
  store_rows<HD, Accumulate>(dv, av, b, grp, s0 + 16 * w, Tk, NKV, 1.0f, g, t);
#endif
}
#undef TESSERA_TC_ATTENTION_UNSUPPORTED
}  // namespace tessera::cuda::detail::tc
