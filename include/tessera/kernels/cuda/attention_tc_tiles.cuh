// tessera/kernels/cuda/attention_tc_tiles.cuh: the pieces the tensor-core attention's
// kernels (attention_tc_kernels.cuh) are made of -- the block and tile shapes, the staged
// bf16 operands, mma.sync and ldmatrix in the PTX ISA's fragment layouts, cp.async tile
// copies, the rounding and packing of registers, and the loads and stores of f32 rows.
// nvcc compiles it for the GPU; a host compiler compiles it with TESSERA_CUDA_EMULATION
// defined and tests/support/cuda_emulation.hpp included first (each instruction emulated on
// the warp's registers, every vector access's alignment checked).
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
#include <cstdio>
#include <stdexcept>

#include <tessera/kernels/cuda/attention_masks.cuh>

namespace tessera::cuda::detail::tc {
using bf = __nv_bfloat16;
using u32 = std::uint32_t;
inline constexpr int rows = attention_rows;  // rows a block owns: 4 warps x 16
inline constexpr int cols = 64;              // streamed rows per tile
inline constexpr int threads = 128;
// Leading dimensions (bf16 elements) of the shared tiles: rows of HD (row tiles) and rows of
// `cols` (transposed tiles, [HD][cols]). The 8 of padding puts the 8 rows of 16 bytes that
// an ldmatrix phase reads (and the stores of stage_k's 32-bit pairs) on different banks.
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
/// A stage of the backward's streamed tiles: two row tiles, then two rows of `cols` floats
/// (dkv_k's lse and D; dq_k's stages leave them unused).
template <int HD>
inline constexpr std::size_t backward_stage = 2 * row_tile<HD> + 2 * cols * 4;
template <int HD>
inline constexpr std::size_t dq_bytes = 2 * row_tile<HD> + 2 * rows * 4 + 2 * backward_stage<HD>;  // Q, dO, lse, D; (K, V) x 2
template <int HD>
inline constexpr std::size_t dkv_bytes = 2 * row_tile<HD> + 2 * backward_stage<HD>;  // K, V; (Q, dO, lse, D) x 2
/// The fused backward (dkv_k adding dq): dkv_k's, and the step's dS^T, 64 keys x 32 queries.
inline constexpr int dq_step = 32;         // queries a step of dkv_k
inline constexpr int ld_ds = dq_step + 8;  // the dS^T tile's leading dimension
template <int HD>
inline constexpr std::size_t dkvq_bytes = dkv_bytes<HD> + std::size_t(rows) * ld_ds * 2;
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
  emulation::aligned_store<4>(static_cast<void*>(p), &v);
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

/// ldmatrix.x4: lane l gives row l % 8 of matrix l / 8; r[i] is matrix i's fragment (Trans:
/// ldmatrix.x4.trans, each 8 x 8 matrix transposed).
template <bool Trans = false>
__device__ inline void ldsm_x4(u32 (&r)[4], const bf* row) {
#ifdef TESSERA_CUDA_EMULATION
  emulation::ldmatrix_x4(r, row, Trans);
#else
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}
/// A fragment (16 x 16) of the row-major tile x: rows r0.., columns k0.. -- the 8 x 8
/// matrices (r0, k0), (r0 + 8, k0), (r0, k0 + 8), (r0 + 8, k0 + 8), which are a[0..3].
__device__ inline void ldsm_a(u32 (&a)[4], const bf* x, int ld, int r0, int k0, int lane) {
  const int i = lane / 8;
  ldsm_x4(a, x + (r0 + lane % 8 + (i % 2) * 8) * ld + k0 + (i / 2) * 8);
}
/// B fragments (16 x 8) of y^T for the row-major tile y, B[k][n] = y[n0 + n][k0 + k], of the
/// n-tiles n0 (b0) and n0 + 8 (b1): the 8 x 8 matrices (n0, k0), (n0, k0 + 8), (n0 + 8, k0),
/// (n0 + 8, k0 + 8).
__device__ inline void ldsm_bt2(u32 (&b0)[2], u32 (&b1)[2], const bf* y, int ld, int n0, int k0, int lane) {
  const int i = lane / 8;
  u32 r[4];
  ldsm_x4(r, y + (n0 + lane % 8 + (i / 2) * 8) * ld + k0 + (i % 2) * 8);
  b0[0] = r[0], b0[1] = r[1], b1[0] = r[2], b1[1] = r[3];
}
/// B fragments (16 x 8) of the row-major tile z itself, B[k][n] = z[k0 + k][n0 + n], of the
/// n-tiles n0 (b0) and n0 + 8 (b1), by ldmatrix.x4.trans: the 8 x 8 matrices (k0, n0),
/// (k0 + 8, n0), (k0, n0 + 8), (k0 + 8, n0 + 8). What a transposed tile gave ldsm_bt2, read
/// from the rows (no transposed copy staged, loaded or kept in shared memory).
__device__ inline void ldsm_b2(u32 (&b0)[2], u32 (&b1)[2], const bf* z, int ld, int k0, int n0, int lane) {
  const int i = lane / 8;
  u32 r[4];
  ldsm_x4<true>(r, z + (k0 + lane % 8 + (i % 2) * 8) * ld + n0 + (i / 2) * 8);
  b0[0] = r[0], b0[1] = r[1], b1[0] = r[2], b1[1] = r[3];
}
/// A fragment (16 x 16) of x, rows r0.., columns k0.., where shared memory holds its
/// transpose y = x^T as a row-major tile ([k][r], leading dimension ld): by ldmatrix.x4.trans,
/// y's 8 x 8 matrices (k0, r0), (k0, r0 + 8), (k0 + 8, r0), (k0 + 8, r0 + 8) -- a[0..3] as
/// ldsm_a gives them (the fused backward's dS from its transpose dS^T).
__device__ inline void ldsm_at(u32 (&a)[4], const bf* y, int ld, int r0, int k0, int lane) {
  const int i = lane / 8;
  ldsm_x4<true>(a, y + (k0 + lane % 8 + (i / 2) * 8) * ld + r0 + (i % 2) * 8);
}

/// Two floats at p (8-byte aligned) read from L2, not the SM's L1: other blocks wrote them.
__device__ inline void load2_l2(float (&v)[2], const float* p) {
#ifdef TESSERA_CUDA_EMULATION
  emulation::aligned_load<8>(v, p);
#else
  const float2 f = __ldcg(reinterpret_cast<const float2*>(p));
  v[0] = f.x, v[1] = f.y;
#endif
}
/// Stores two floats at p (8-byte aligned) to L2 (cached there only, as load2_l2 reads them).
__device__ inline void store2_l2(float* p, float lo, float hi) {
#ifdef TESSERA_CUDA_EMULATION
  const float v[2] = {lo, hi};
  emulation::aligned_store<8>(p, v);
#else
  __stcg(reinterpret_cast<float2*>(p), make_float2(lo, hi));
#endif
}

/// The tensor-core kernels' grid: (head, block of 64 rows, batch) -- x fastest, so every
/// head's blocks of one row block launch before the next row block's. Which row block a
/// blockIdx.y is: the kernels launch the blocks with the most work first under the causal
/// mask -- query blocks from the last (forward_k, dq_k: query_block), key blocks from the
/// first (dkv_k) -- so that the last blocks to start are short and the SMs finish together
/// (a list-scheduling model of 8B's shapes, bench/gpu/block_order_model.py, put the tail at
/// 24% of dkv_k's time, 12% of the forward's and 8% of dq_k's with the row blocks outermost
/// and the light ones first).
/// dkv_k with the fused dq reverses its key blocks instead (its turns need the lighter blocks
/// first).
__host__ __device__ inline dim3 tc_grid(std::int64_t T, std::int64_t heads, std::int64_t B) {
  return {static_cast<unsigned>(heads), static_cast<unsigned>((T + rows - 1) / rows), static_cast<unsigned>(B)};
}
/// The fused backward's turns of one (batch, head): one per 32 queries of the staged length.
__host__ __device__ inline std::int64_t dq_turns(std::int64_t Tq) { return staged_length(Tq) / dq_step; }

/// Turns between blocks (the fused backward's dq, added in a fixed order): wait_turn returns,
/// to every thread of the block, once *turn == v -- thread 0 polls, the fence and the barrier
/// order the block's reads after the writes of the block that passed the turn; pass_turn sets
/// *turn = v once every thread of the block has written. A block must only wait for a turn a
/// block launched before it passes: the GPU starts blocks in launch order, but gives no room
/// to a block while the blocks it waits for cannot start. The emulation runs blocks one after
/// the other in launch order, so a turn not passed when it is awaited is an error there. On
/// a GPU a wait longer than turn_wait_ns (a whole backward takes milliseconds) stops the
/// kernel with a message (printf, then __trap: the launch fails and cuda_check reports it)
/// instead of hanging the job: the turns' assumption failed on that GPU, and the default dq
/// path (TESSERA_DQ_PATH unset or `separate`, attention_tc.cuh) runs the backward without them.
inline constexpr unsigned long long turn_wait_ns = 10'000'000'000ULL;
#ifndef TESSERA_CUDA_EMULATION
/// wait_turn's way out, out of line: the kernels' registers do not hold its printf's.
__device__ __noinline__ inline void turn_timed_out(int v, int seen) {
  printf("tessera: the fused attention backward's block (%u, %u, %u) waited 10 s for dq turn %d (at %d): "
         "this GPU did not run the blocks it waits for; run with TESSERA_DQ_PATH=separate (or unset)\n",
         blockIdx.x, blockIdx.y, blockIdx.z, v, seen);
  __trap();
}
#endif
__device__ inline void wait_turn(const int* turn, int v) {
  if (threadIdx.x == 0) {
#ifdef TESSERA_CUDA_EMULATION
    if (*turn != v)
      throw std::logic_error("emulation: a block waits for a turn no block launched before it passed (on a GPU: a hang)");
#else
    const auto now = [] {
      unsigned long long t;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      return t;
    };
    const unsigned long long t0 = now();
    while (*reinterpret_cast<const volatile int*>(turn) != v) {
      __nanosleep(64);
      if (now() - t0 > turn_wait_ns) turn_timed_out(v, *reinterpret_cast<const volatile int*>(turn));
    }
    __threadfence();
#endif
  }
  __syncthreads();
}
__device__ inline void pass_turn(int* turn, int v) {
  __syncthreads();
  if (threadIdx.x == 0) {
#ifdef TESSERA_CUDA_EMULATION
    *turn = v;
#else
    __threadfence();
    *reinterpret_cast<volatile int*>(turn) = v;
#endif
  }
}

/// Where a thread of a query-block kernel (forward_k, dq_k on tc_grid: block (head, 64
/// queries from the last, batch), warp w owning queries 16w..16w+15) stands: its lane, its
/// two rows, the block's keys' end, and the tiles of keys the block visits (next_tile).
template <class Mask>
struct query_block {
  int w, lane, g, t;
  std::int64_t b, h, grp, t0, row[2];
  bool live[2];
  std::int64_t crow;  // tile skipping (span masks): thread i looks at row i / 2, half i % 2 of a tile
  int chalf;
  std::int64_t end;
  __device__ query_block(const Mask& mask, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV)
      : w(threadIdx.x / 32), lane(threadIdx.x % 32), g(lane / 4), t(lane % 4), b(blockIdx.z), h(blockIdx.x),
        grp(h / (NH / NKV)), t0(std::int64_t(gridDim.y - 1 - blockIdx.y) * rows), row{t0 + 16 * w + g, t0 + 16 * w + g + 8},
        live{row[0] < Tq, row[1] < Tq}, crow(t0 + threadIdx.x / 2), chalf(threadIdx.x % 2),
        end(block_key_end(mask, t0, Tq, Tk)) {}
  /// The first tile of keys from s0 on that a row of the block sees (or end); every thread
  /// of the block calls it (a block-wide vote under span masks).
  __device__ std::int64_t next_tile(const Mask& mask, std::int64_t s0, std::int64_t Tq) const {
    while (s0 < end && !tile_needed<Mask, cols / 2>(crow < Tq, s0 + cols / 2 * chalf, end,
                                                    [this, &mask](std::int64_t s) { return mask.sees(crow, s); }))
      s0 += cols;
    return s0;
  }
};

/// e^x for the softmax's probabilities: the GPU's ex2.approx (__expf: relative error about
/// 2^-21, inside every tolerance the tests state); the host emulation's std::exp.
__device__ inline float softmax_exp(float x) {
#ifdef TESSERA_CUDA_EMULATION
  return std::exp(x);
#else
  return __expf(x);
#endif
}

/// The A fragment of k-step kk from accumulators: a 16 x 16 block of a C tile pair (n-tiles
/// 2kk and 2kk + 1), rounded to bf16 -- FlashAttention-2's reuse of S's registers as P.
__device__ inline void c_to_a(u32 (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack(c0[0], c0[1]);
  a[1] = pack(c0[2], c0[3]);
  a[2] = pack(c1[0], c1[1]);
  a[3] = pack(c1[2], c1[3]);
}

/// A warp's two products over HD, x1 y1^T into c1 and x2 y2^T into c2 (16 x N accumulators,
/// n-tiles of 8): rows r0.. of the row tiles x1, x2 (leading dimension ld) against rows n0..
/// of the row tiles y1, y2 -- S = Q K^T beside dP = dO V^T (and their transposes).
template <int HD, int N>
__device__ inline void two_products(float (&c1)[N / 8][4], float (&c2)[N / 8][4], const bf* x1, const bf* y1,
                                    const bf* x2, const bf* y2, int ld, int r0, int n0, int lane) {
  for (int kk = 0; kk < HD / 16; ++kk) {
    u32 a1[4], a2[4];
    ldsm_a(a1, x1, ld, r0, 16 * kk, lane);
    ldsm_a(a2, x2, ld, r0, 16 * kk, lane);
    for (int n = 0; n < N / 8; n += 2) {
      u32 b1[2], b1n[2], b2[2], b2n[2];
      ldsm_bt2(b1, b1n, y1, ld, n0 + 8 * n, 16 * kk, lane);
      ldsm_bt2(b2, b2n, y2, ld, n0 + 8 * n, 16 * kk, lane);
      mma(c1[n], a1, b1);
      mma(c1[n + 1], a1, b1n);
      mma(c2[n], a2, b2);
      mma(c2[n + 1], a2, b2n);
    }
  }
}
/// acc (a warp's 16 x HD, n-tiles of 8) += c z, c a warp's 16 x K in accumulators (rounded to
/// bf16 as A fragments: FlashAttention-2's reuse of S's registers), z [K x HD] given as its
/// transposed tile ([HD][ldt], columns k0..: O += P V), or with Rows as its row tile
/// (leading dimension ldr<HD>, rows k0.., by ldsm_b2: the backward's dq += dS K, dv += P^T dO,
/// dk += dS^T Q).
template <int HD, int K, bool Rows = false>
__device__ inline void accumulate_product(float (&acc)[HD / 8][4], const float (&c)[K / 8][4], const bf* z, int k0,
                                          int lane) {
  for (int kk = 0; kk < K / 16; ++kk) {
    u32 a[4];
    c_to_a(a, c[2 * kk], c[2 * kk + 1]);
    for (int n = 0; n < HD / 8; n += 2) {
      u32 b0[2], b1[2];
      if constexpr (Rows)
        ldsm_b2(b0, b1, z, ldr<HD>, k0 + 16 * kk, 8 * n, lane);
      else
        ldsm_bt2(b0, b1, z, ldt, 8 * n, k0 + 16 * kk, lane);
      mma(acc[n], a, b0);
      mma(acc[n + 1], a, b1);
    }
  }
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
}  // namespace tessera::cuda::detail::tc
