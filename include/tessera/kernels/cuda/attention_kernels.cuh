// tessera/kernels/cuda/attention_kernels.cuh: the device code of the f32 attention kernels
// (attention.cuh and ring_attention.cuh have the entry points and say what they compute):
// one thread per query row (forward, dq) or key row (dk, dv), the other side streamed
// through shared memory in tiles of 32; D = rowsum(dout . out); context parallel's
// log-sum-exp merge. nvcc compiles it for the GPU; a host compiler with
// TESSERA_CUDA_EMULATION defined and tests/support/cuda_emulation.hpp included first runs
// it on the host (tests/kernels/test_attention_emulated.cpp), as attention_tc_kernels.cuh.
// tessera-requires: cuda (device code: see above)
#pragma once

#ifndef TESSERA_CUDA_EMULATION
#include <cuda_runtime.h>
#endif

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include <tessera/kernels/cuda/attention_masks.cuh>
#include <tessera/kernels/cuda/pointwise_kernels.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda::detail {

/// The shared memory of the kernels streaming key / value tiles (forward, dq) and query /
/// output-gradient tiles with their lse and D (dk, dv).
template <int HD>
inline constexpr std::size_t kv_tile_bytes = 2 * attention_tile * HD * sizeof(float);
template <int HD>
inline constexpr std::size_t q_tile_bytes = (2 * attention_tile * HD + 2 * attention_tile) * sizeof(float);

/// The block's dynamic shared memory, as floats.
__device__ inline float* shared_floats() {
#ifdef TESSERA_CUDA_EMULATION
  return reinterpret_cast<float*>(emulation::shared_memory());
#else
  extern __shared__ float attention_shared[];
  return attention_shared;
#endif
}

/// Loads key / value rows [s0, s0 + tile) of KV head g of batch b into shared memory (zeros
/// past T), then syncs the block.
template <int HD>
__device__ inline void load_kv_tile(float* Ks, float* Vs, const float* k, const float* v, std::int64_t b,
                                    std::int64_t g, std::int64_t s0, std::int64_t T, std::int64_t NKV) {
  for (int e = threadIdx.x; e < attention_tile * HD; e += blockDim.x) {
    const std::int64_t s = s0 + e / HD;
    Ks[e] = s < T ? k[((b * T + s) * NKV + g) * HD + e % HD] : 0.0f;
    Vs[e] = s < T ? v[((b * T + s) * NKV + g) * HD + e % HD] : 0.0f;
  }
  __syncthreads();
}

/// The key loop of a block of query rows (forward, dq): streams the key / value tiles of KV
/// head g that the block's rows [t0, t0 + attention_rows) need through Ks, Vs (skipping
/// tiles none of them sees) and calls f(j) for each key s0 + j this thread's row t sees, its
/// rows at Ks + j * HD and Vs + j * HD.
template <int HD, class Mask, class F>
__device__ inline void over_seen_keys(float* Ks, float* Vs, const float* k, const float* v, const Mask& mask,
                                      std::int64_t b, std::int64_t g, std::int64_t t0, std::int64_t t, bool live,
                                      std::int64_t Tq, std::int64_t Tk, std::int64_t NKV, F f) {
  const std::int64_t end = block_key_end(mask, t0, Tq, Tk);
  for (std::int64_t s0 = 0; s0 < end; s0 += attention_tile) {
    if (!tile_needed<Mask>(live, s0, end, [&](std::int64_t s) { return mask.sees(t, s); })) continue;
    load_kv_tile<HD>(Ks, Vs, k, v, b, g, s0, Tk, NKV);
    for (int j = 0; j < attention_tile && live; ++j) {
      const std::int64_t s = s0 + j;
      if (s >= end) break;
      if (mask.sees(t, s)) f(j);
    }
    __syncthreads();
  }
}

/// Forward: block (query tile, head, batch); thread = query row t. A row that sees no key
/// gets out 0 and lse -inf.
template <int HD, class Mask>
__global__ void attention_forward_k(float* out, float* lse, const float* q, const float* k, const float* v, Mask mask,
                                    std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
  float* sm = shared_floats();
  float* Ks = sm;
  float* Vs = sm + attention_tile * HD;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, g = h / (NH / NKV);
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * attention_rows, t = t0 + threadIdx.x;
  const bool live = t < Tq;
  float qr[HD], acc[HD];
  for (int d = 0; d < HD; ++d) qr[d] = live ? q[((b * Tq + t) * NH + h) * HD + d] * scale : 0.0f, acc[d] = 0.0f;
  float m = -3.402823466e38f, l = 0.0f;
  over_seen_keys<HD>(Ks, Vs, k, v, mask, b, g, t0, t, live, Tq, Tk, NKV, [&](int j) {
    float x = 0.0f;
    for (int d = 0; d < HD; ++d) x += qr[d] * Ks[j * HD + d];
    const float mn = x > m ? x : m, corr = pointwise::fast_exp(m - mn), p = pointwise::fast_exp(x - mn);
    l = l * corr + p;
    for (int d = 0; d < HD; ++d) acc[d] = acc[d] * corr + p * Vs[j * HD + d];
    m = mn;
  });
  if (!live) return;
  for (int d = 0; d < HD; ++d) out[((b * Tq + t) * NH + h) * HD + d] = l > 0.0f ? acc[d] / l : 0.0f;
  lse[(b * NH + h) * Tq + t] = l > 0.0f ? m + logf(l) : -INFINITY;
}

/// D [B, NH, T] = rowsum(dout . out): one warp a row, its lanes over the row's HD elements
/// (each warp load one contiguous 128 bytes; a thread a row read 32 rows 16 KiB apart at
/// once, 0.9 TB/s on an H200), summed by a butterfly of shuffles in a fixed order; rows
/// grid-strided by warps. Launch with attention_delta_blocks(rows) blocks of `threads`.
template <int HD>
__global__ void attention_delta_k(float* D, const float* dout, const float* out, std::int64_t B, std::int64_t T,
                                  std::int64_t NH) {
  const std::int64_t n = B * NH * T, warps = blockDim.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (std::int64_t r = blockIdx.x * warps + threadIdx.x / 32; r < n; r += gridDim.x * warps) {  // warp-uniform
    const std::int64_t b = r / (NH * T), h = (r / T) % NH, t = r % T, off = ((b * T + t) * NH + h) * HD;
    float s = 0.0f;
    for (int d = lane; d < HD; d += 32) s += dout[off + d] * out[off + d];
    for (int m = 16; m > 0; m /= 2) s += __shfl_xor_sync(0xffffffffu, s, m);
    if (lane == 0) D[r] = s;
  }
}
/// The blocks of attention_delta_k over `rows` rows: a warp each.
inline unsigned attention_delta_blocks(std::int64_t rows) { return blocks_for(rows * 32); }

/// dq: block (query tile, head, batch); thread = query row t, over the keys it sees. Writes
/// dq, or with Accumulate adds to it.
template <int HD, class Mask, bool Accumulate>
__global__ void attention_dq_k(float* dq, const float* dout, const float* q, const float* k, const float* v,
                               const float* lse, const float* D, Mask mask, std::int64_t Tq, std::int64_t Tk,
                               std::int64_t NH, std::int64_t NKV, float scale) {
  float* sm = shared_floats();
  float* Ks = sm;
  float* Vs = sm + attention_tile * HD;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, g = h / (NH / NKV);
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * attention_rows, t = t0 + threadIdx.x;
  const bool live = t < Tq;
  float qr[HD], gr[HD], acc[HD];
  for (int d = 0; d < HD; ++d) {
    qr[d] = live ? q[((b * Tq + t) * NH + h) * HD + d] * scale : 0.0f;
    gr[d] = live ? dout[((b * Tq + t) * NH + h) * HD + d] : 0.0f;
    acc[d] = 0.0f;
  }
  const float L = live ? lse[(b * NH + h) * Tq + t] : 0.0f, Dt = live ? D[(b * NH + h) * Tq + t] : 0.0f;
  over_seen_keys<HD>(Ks, Vs, k, v, mask, b, g, t0, t, live, Tq, Tk, NKV, [&](int j) {
    float x = 0.0f, dp = 0.0f;
    for (int d = 0; d < HD; ++d) x += qr[d] * Ks[j * HD + d], dp += gr[d] * Vs[j * HD + d];
    const float p = pointwise::fast_exp(x - L), ds = p * (dp - Dt);
    for (int d = 0; d < HD; ++d) acc[d] += ds * Ks[j * HD + d];
  });
  if (!live) return;
  for (int d = 0; d < HD; ++d) {
    float& o = dq[((b * Tq + t) * NH + h) * HD + d];
    o = Accumulate ? o + acc[d] * scale : acc[d] * scale;
  }
}

/// dk, dv: block (key tile, KV head, batch); thread = key row s, over the queries of the KV
/// head's query heads that see it. Writes dk and dv, or with Accumulate adds to them.
template <int HD, class Mask, bool Accumulate>
__global__ void attention_dkv_k(float* dk, float* dv, const float* dout, const float* q, const float* k,
                                const float* v, const float* lse, const float* D, Mask mask, std::int64_t Tq,
                                std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
  float* sm = shared_floats();
  float* Qs = sm;
  float* Gs = sm + attention_tile * HD;
  float* Ls = Gs + attention_tile * HD;
  float* Ds = Ls + attention_tile;
  const std::int64_t b = blockIdx.z, g = blockIdx.y, G = NH / NKV;
  const std::int64_t s0 = static_cast<std::int64_t>(blockIdx.x) * attention_rows, s = s0 + threadIdx.x;
  const bool live = s < Tk;
  float kr[HD], vr[HD], ak[HD], av[HD];
  for (int d = 0; d < HD; ++d) {
    kr[d] = live ? k[((b * Tk + s) * NKV + g) * HD + d] : 0.0f;
    vr[d] = live ? v[((b * Tk + s) * NKV + g) * HD + d] : 0.0f;
    ak[d] = av[d] = 0.0f;
  }
  for (std::int64_t h = g * G; h < (g + 1) * G; ++h)
    for (std::int64_t q0 = mask.query_begin(s0); q0 < Tq; q0 += attention_tile) {
      if (!tile_needed<Mask>(live, q0, Tq, [&](std::int64_t t) { return mask.sees(t, s); })) continue;
      for (int e = threadIdx.x; e < attention_tile * HD; e += blockDim.x) {
        const std::int64_t t = q0 + e / HD;
        Qs[e] = t < Tq ? q[((b * Tq + t) * NH + h) * HD + e % HD] * scale : 0.0f;
        Gs[e] = t < Tq ? dout[((b * Tq + t) * NH + h) * HD + e % HD] : 0.0f;
      }
      for (int e = threadIdx.x; e < attention_tile; e += blockDim.x) {
        const std::int64_t t = q0 + e;
        Ls[e] = t < Tq ? lse[(b * NH + h) * Tq + t] : 0.0f;
        Ds[e] = t < Tq ? D[(b * NH + h) * Tq + t] : 0.0f;
      }
      __syncthreads();
      for (int j = 0; j < attention_tile && live; ++j) {
        const std::int64_t t = q0 + j;
        if (t >= Tq) break;
        if (!mask.sees(t, s)) continue;
        float x = 0.0f, dp = 0.0f;
        for (int d = 0; d < HD; ++d) x += Qs[j * HD + d] * kr[d], dp += Gs[j * HD + d] * vr[d];
        const float p = pointwise::fast_exp(x - Ls[j]), ds = p * (dp - Ds[j]);
        for (int d = 0; d < HD; ++d) av[d] += p * Gs[j * HD + d], ak[d] += ds * Qs[j * HD + d];
      }
      __syncthreads();
    }
  if (!live) return;
  // Qs held q * scale, so ak is already scale * sum dS q
  for (int d = 0; d < HD; ++d) {
    float& ok = dk[((b * Tk + s) * NKV + g) * HD + d];
    float& ov = dv[((b * Tk + s) * NKV + g) * HD + d];
    ok = Accumulate ? ok + ak[d] : ak[d];
    ov = Accumulate ? ov + av[d] : av[d];
  }
}

/// Folds (out_b, lse_b) into (out, lse): one thread per row of HD values.
static __global__ void merge_k(float* out, float* lse, const float* out_b, const float* lse_b, std::int64_t B,
                        std::int64_t Tq, std::int64_t NH, std::int64_t HD) {
  const float ninf = -INFINITY;
  const std::int64_t n = B * NH * Tq;
  for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < n;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float lb = lse_b[r];
    if (lb == ninf) continue;
    const std::int64_t b = r / (NH * Tq), h = (r / Tq) % NH, t = r % Tq;
    float* o = out + ((b * Tq + t) * NH + h) * HD;
    const float* ob = out_b + ((b * Tq + t) * NH + h) * HD;
    if (lse[r] == ninf) {
      for (std::int64_t d = 0; d < HD; ++d) o[d] = ob[d];
      lse[r] = lb;
      continue;
    }
    const float w = 1.0f / (1.0f + expf(lse[r] - lb));
    for (std::int64_t d = 0; d < HD; ++d) o[d] -= w * (o[d] - ob[d]);
    const float x = lse[r] - lb;
    lse[r] -= x >= 0.0f ? -log1pf(expf(-x)) : x - log1pf(expf(x));
  }
}
}  // namespace tessera::cuda::detail
