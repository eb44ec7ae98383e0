// tessera/kernels/cuda/attention.cuh: causal grouped-query attention on the GPU, forward
// and backward, with cpu::attention_forward / attention_backward's interface and layouts:
//   q, out, dq, dout [B, T, NH, HD];  k, v, dk, dv [B, T, NKV, HD];  lse [B, NH, T]
// tessera-requires: cuda (compiled by nvcc: include from a .cu translation unit)
//
// An online-softmax kernel without a T x T matrix (FlashAttention's order), written for
// correctness first: one thread owns one query row (forward, dq) or one key row (dk, dv) of
// one head and keeps it and its accumulator in registers (HD a template parameter: 8 to
// 128); the key (or query) rows stream through shared memory in tiles of 32, which every
// thread of the block reads. Forward keeps a running max and sum per row and writes out and
// lse = max + log(sum); backward recomputes P = exp(S - lse) with D = rowsum(dout . out):
// dq = scale sum_s dS k_s and, per key row over the queries of its head group,
// dv = sum_t P dout_t and dk = scale sum_t dS q_t, dS = P (dP - D) -- three kernels, every
// output row written by one thread, no atomics (deterministic). Backward WRITES dq, dk, dv.
// The kernels take the mask as a type (causal_mask here; context parallel's mask of token
// positions and documents in ring_attention.cuh, which also accumulates); under the latter a
// block skips a tile of keys (or queries) none of its rows sees (tile_needed).
// The exponentials are pointwise::fast_exp, the CPU's. Not yet: tensor-core tiles (mma /
// wgmma) and the split of one row over a warp -- the performance work that needs a GPU to
// measure; docs/cuda.md.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cuda/attention_masks.cuh>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda {

namespace detail {
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

/// Forward: block (query tile, head, batch); thread = query row t. A row that sees no key
/// gets out 0 and lse -inf.
template <int HD, class Mask>
__global__ void attention_forward_k(float* out, float* lse, const float* q, const float* k, const float* v, Mask mask,
                                    std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale) {
  extern __shared__ float sm[];
  float* Ks = sm;
  float* Vs = sm + attention_tile * HD;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, g = h / (NH / NKV);
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * attention_rows, t = t0 + threadIdx.x;
  const bool live = t < Tq;
  float qr[HD], acc[HD];
  for (int d = 0; d < HD; ++d) qr[d] = live ? q[((b * Tq + t) * NH + h) * HD + d] * scale : 0.0f, acc[d] = 0.0f;
  float m = -3.402823466e38f, l = 0.0f;
  const std::int64_t end = mask.key_end(t0 + attention_rows - 1 < Tq - 1 ? t0 + attention_rows - 1 : Tq - 1, Tk);
  for (std::int64_t s0 = 0; s0 < end; s0 += attention_tile) {
    if (!tile_needed<Mask>(live, s0, end, [&](std::int64_t s) { return mask.sees(t, s); })) continue;
    load_kv_tile<HD>(Ks, Vs, k, v, b, g, s0, Tk, NKV);
    for (int j = 0; j < attention_tile && live; ++j) {
      const std::int64_t s = s0 + j;
      if (s >= end) break;
      if (!mask.sees(t, s)) continue;
      float x = 0.0f;
      for (int d = 0; d < HD; ++d) x += qr[d] * Ks[j * HD + d];
      const float mn = x > m ? x : m, corr = pointwise::fast_exp(m - mn), p = pointwise::fast_exp(x - mn);
      l = l * corr + p;
      for (int d = 0; d < HD; ++d) acc[d] = acc[d] * corr + p * Vs[j * HD + d];
      m = mn;
    }
    __syncthreads();
  }
  if (!live) return;
  for (int d = 0; d < HD; ++d) out[((b * Tq + t) * NH + h) * HD + d] = l > 0.0f ? acc[d] / l : 0.0f;
  lse[(b * NH + h) * Tq + t] = l > 0.0f ? m + logf(l) : -INFINITY;
}

/// D [B, NH, T] = rowsum(dout . out).
template <int HD>
__global__ void attention_delta_k(float* D, const float* dout, const float* out, std::int64_t B, std::int64_t T,
                                  std::int64_t NH) {
  const std::int64_t n = B * NH * T;
  for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < n;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = r / (NH * T), h = (r / T) % NH, t = r % T, off = ((b * T + t) * NH + h) * HD;
    float s = 0.0f;
    for (int d = 0; d < HD; ++d) s += dout[off + d] * out[off + d];
    D[r] = s;
  }
}

/// dq: block (query tile, head, batch); thread = query row t, over the keys it sees. Writes
/// dq, or with Accumulate adds to it.
template <int HD, class Mask, bool Accumulate>
__global__ void attention_dq_k(float* dq, const float* dout, const float* q, const float* k, const float* v,
                               const float* lse, const float* D, Mask mask, std::int64_t Tq, std::int64_t Tk,
                               std::int64_t NH, std::int64_t NKV, float scale) {
  extern __shared__ float sm[];
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
  const std::int64_t end = mask.key_end(t0 + attention_rows - 1 < Tq - 1 ? t0 + attention_rows - 1 : Tq - 1, Tk);
  for (std::int64_t s0 = 0; s0 < end; s0 += attention_tile) {
    if (!tile_needed<Mask>(live, s0, end, [&](std::int64_t s) { return mask.sees(t, s); })) continue;
    load_kv_tile<HD>(Ks, Vs, k, v, b, g, s0, Tk, NKV);
    for (int j = 0; j < attention_tile && live; ++j) {
      const std::int64_t s = s0 + j;
      if (s >= end) break;
      if (!mask.sees(t, s)) continue;
      float x = 0.0f, dp = 0.0f;
      for (int d = 0; d < HD; ++d) x += qr[d] * Ks[j * HD + d], dp += gr[d] * Vs[j * HD + d];
      const float p = pointwise::fast_exp(x - L), ds = p * (dp - Dt);
      for (int d = 0; d < HD; ++d) acc[d] += ds * Ks[j * HD + d];
    }
    __syncthreads();
  }
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
  extern __shared__ float sm[];
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

/// Calls f.template operator()<HD>() for a supported head dim, else throws.
template <class F>
void with_head_dim(std::int64_t HD, const char* who, F&& f) {
  switch (HD) {
    case 8: f.template operator()<8>(); break;
    case 16: f.template operator()<16>(); break;
    case 32: f.template operator()<32>(); break;
    case 64: f.template operator()<64>(); break;
    case 128: f.template operator()<128>(); break;
    default:  // (256 would need more than the 48 KiB of shared memory a block gets by default)
      throw error(std::string(who) + ": head_dim " + std::to_string(HD) +
                  " is not one the CUDA attention is built for (8, 16, 32, 64, 128)");
  }
}
inline dim3 attention_grid(std::int64_t T, std::int64_t heads, std::int64_t B) {
  return dim3(static_cast<unsigned>((T + attention_rows - 1) / attention_rows), static_cast<unsigned>(heads),
              static_cast<unsigned>(B));
}
/// The launches of forward and of backward under a mask (the shared memory each needs).
template <int HD, class Mask>
void launch_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Mask& mask,
                    std::int64_t B, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale,
                    cudaStream_t s) {
  const std::size_t shared = 2 * attention_tile * HD * sizeof(float);
  attention_forward_k<HD, Mask><<<attention_grid(Tq, NH, B), attention_rows, shared, s>>>(out, lse, q, k, v, mask, Tq,
                                                                                          Tk, NH, NKV, scale);
}
template <int HD, bool Accumulate, class Mask>
void launch_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                     const float* v, const float* lse, const float* D, const Mask& mask, std::int64_t B,
                     std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale, cudaStream_t s) {
  const std::size_t kv_shared = 2 * attention_tile * HD * sizeof(float);
  attention_dq_k<HD, Mask, Accumulate><<<attention_grid(Tq, NH, B), attention_rows, kv_shared, s>>>(
      dq, dout, q, k, v, lse, D, mask, Tq, Tk, NH, NKV, scale);
  const std::size_t q_shared = (2 * attention_tile * HD + 2 * attention_tile) * sizeof(float);
  attention_dkv_k<HD, Mask, Accumulate><<<attention_grid(Tk, NKV, B), attention_rows, q_shared, s>>>(
      dk, dv, dout, q, k, v, lse, D, mask, Tq, Tk, NH, NKV, scale);
}
}  // namespace detail

/// out [B, T, NH, HD] and lse [B, NH, T], as cpu::attention_forward.
inline void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, std::int64_t B,
                              std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                              cudaStream_t s = nullptr) {
  check(B > 0 && T > 0 && NKV > 0 && NH % NKV == 0, "cuda::attention_forward: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::with_head_dim(HD, "cuda::attention_forward", [&]<int D>() {
    detail::launch_forward<D>(out, lse, q, k, v, detail::causal_mask{}, B, T, T, NH, NKV, scale, s);
  });
  detail::launched("cuda::attention_forward");
}

/// dq, dk, dv (written), as cpu::attention_backward; `D` is scratch of B * NH * T floats.
inline void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                               const float* v, const float* out, const float* lse, float* D, std::int64_t B,
                               std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                               cudaStream_t s = nullptr) {
  check(B > 0 && T > 0 && NKV > 0 && NH % NKV == 0, "cuda::attention_backward: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::with_head_dim(HD, "cuda::attention_backward", [&]<int Dm>() {
    detail::attention_delta_k<Dm><<<detail::blocks_for(B * NH * T), detail::threads, 0, s>>>(D, dout, out, B, T, NH);
    detail::launch_backward<Dm, false>(dq, dk, dv, dout, q, k, v, lse, D, detail::causal_mask{}, B, T, T, NH, NKV,
                                       scale, s);
  });
  detail::launched("cuda::attention_backward");
}

}  // namespace tessera::cuda
