// tessera/kernels/cuda/ring_attention.cuh: context parallel's attention kernels on the GPU,
// with cpu/ring_attention.hpp's interface and layouts -- attention of a rank's queries
// against one block of keys and values under the mask of the tokens' global positions (and
// document ids), the log-sum-exp merge of partial outputs, and the block backward:
//   q, out_b, dq, dout [B, Tq, NH, HD];  k, v, dk, dv [B, Tk, NKV, HD];  lse [B, NH, Tq]
// The token spans' positions and document ids are in device memory.
// tessera-requires: cuda (compiled by nvcc: include from a .cu translation unit)
//
// The kernels are attention.cuh's (one thread per query row, or per key row for dk and dv;
// key or query rows streamed through shared memory; no atomics) with the causal test
// replaced by the spans' mask: key j is seen by query i when kpos[j] <= qpos[i] and, with
// documents, kdoc[j] == qdoc[i]. A row that sees no key of the block gets out 0 and lse
// -inf, as on the CPU. The block backward ACCUMULATES dq, dk, dv (the blocks of every rank
// add up), as the CPU's does. Tile skipping by position bounds, which the CPU kernel does,
// is left out: every tile pair is visited and masked (correct; the cost of a diagonal block is
// a full block's -- the performance work that needs a GPU to measure).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/ring_attention.hpp>
#include <tessera/kernels/cuda/attention.cuh>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda {

namespace detail {
/// The spans of a block pair as the kernels read them (device pointers).
struct span_pair {
  const std::int64_t* qpos;
  const std::int32_t* qdoc;  // null: no documents
  const std::int64_t* kpos;
  const std::int32_t* kdoc;
};
__device__ inline bool sees(const span_pair& s, std::int64_t i, std::int64_t j) {
  return s.kpos[j] <= s.qpos[i] && (!s.qdoc || s.qdoc[i] == s.kdoc[j]);
}
/// Key / value rows [s0, s0 + tile) of KV head g of batch b into shared memory (zeros past Tk).
template <int HD>
__device__ inline void load_block_tile(float* Ks, float* Vs, const float* k, const float* v, std::int64_t b,
                                       std::int64_t g, std::int64_t s0, std::int64_t Tk, std::int64_t NKV) {
  load_kv_tile<HD>(Ks, Vs, k, v, b, g, s0, Tk, NKV);
}

/// Forward of a block: block (query tile, head, batch); thread = query row t.
template <int HD>
__global__ void block_forward_k(float* out, float* lse, const float* q, const float* k, const float* v,
                                span_pair sp, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV,
                                float scale) {
  extern __shared__ float sm[];
  float* Ks = sm;
  float* Vs = sm + attention_tile * HD;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, g = h / (NH / NKV);
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * attention_rows + threadIdx.x;
  const bool live = t < Tq;
  float qr[HD], acc[HD];
  for (int d = 0; d < HD; ++d) qr[d] = live ? q[((b * Tq + t) * NH + h) * HD + d] * scale : 0.0f, acc[d] = 0.0f;
  float m = -3.402823466e38f, l = 0.0f;
  for (std::int64_t s0 = 0; s0 < Tk; s0 += attention_tile) {
    load_block_tile<HD>(Ks, Vs, k, v, b, g, s0, Tk, NKV);
    for (int j = 0; j < attention_tile && live; ++j) {
      const std::int64_t s = s0 + j;
      if (s >= Tk) break;
      if (!sees(sp, t, s)) continue;
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

/// Folds (out_b, lse_b) into (out, lse): one thread per row of HD values.
__global__ void merge_k(float* out, float* lse, const float* out_b, const float* lse_b, std::int64_t B,
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

/// dq += the block's share: block (query tile, head, batch); thread = query row t.
template <int HD>
__global__ void block_dq_k(float* dq, const float* dout, const float* q, const float* k, const float* v,
                           const float* lse, const float* D, span_pair sp, std::int64_t Tq, std::int64_t Tk,
                           std::int64_t NH, std::int64_t NKV, float scale) {
  extern __shared__ float sm[];
  float* Ks = sm;
  float* Vs = sm + attention_tile * HD;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, g = h / (NH / NKV);
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * attention_rows + threadIdx.x;
  const bool live = t < Tq;
  float qr[HD], gr[HD], acc[HD];
  for (int d = 0; d < HD; ++d) {
    qr[d] = live ? q[((b * Tq + t) * NH + h) * HD + d] * scale : 0.0f;
    gr[d] = live ? dout[((b * Tq + t) * NH + h) * HD + d] : 0.0f;
    acc[d] = 0.0f;
  }
  const float L = live ? lse[(b * NH + h) * Tq + t] : 0.0f, Dt = live ? D[(b * NH + h) * Tq + t] : 0.0f;
  for (std::int64_t s0 = 0; s0 < Tk; s0 += attention_tile) {
    load_block_tile<HD>(Ks, Vs, k, v, b, g, s0, Tk, NKV);
    for (int j = 0; j < attention_tile && live; ++j) {
      const std::int64_t s = s0 + j;
      if (s >= Tk) break;
      if (!sees(sp, t, s)) continue;
      float x = 0.0f, dp = 0.0f;
      for (int d = 0; d < HD; ++d) x += qr[d] * Ks[j * HD + d], dp += gr[d] * Vs[j * HD + d];
      const float p = pointwise::fast_exp(x - L), ds = p * (dp - Dt);
      for (int d = 0; d < HD; ++d) acc[d] += ds * Ks[j * HD + d];
    }
    __syncthreads();
  }
  if (!live) return;
  for (int d = 0; d < HD; ++d) dq[((b * Tq + t) * NH + h) * HD + d] += acc[d] * scale;
}

/// dk, dv += the block's share: block (key tile, KV head, batch); thread = key row s, over
/// every query of the KV head's query heads that sees it.
template <int HD>
__global__ void block_dkv_k(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                            const float* lse, const float* D, span_pair sp, std::int64_t Tq, std::int64_t Tk,
                            std::int64_t NH, std::int64_t NKV, float scale) {
  extern __shared__ float sm[];
  float* Qs = sm;
  float* Gs = sm + attention_tile * HD;
  float* Ls = Gs + attention_tile * HD;
  float* Ds = Ls + attention_tile;
  const std::int64_t b = blockIdx.z, g = blockIdx.y, G = NH / NKV;
  const std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * attention_rows + threadIdx.x;
  const bool live = s < Tk;
  float kr[HD], vr[HD], ak[HD], av[HD];
  for (int d = 0; d < HD; ++d) {
    kr[d] = live ? k[((b * Tk + s) * NKV + g) * HD + d] : 0.0f;
    vr[d] = live ? v[((b * Tk + s) * NKV + g) * HD + d] : 0.0f;
    ak[d] = av[d] = 0.0f;
  }
  for (std::int64_t h = g * G; h < (g + 1) * G; ++h)
    for (std::int64_t q0 = 0; q0 < Tq; q0 += attention_tile) {
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
        if (!sees(sp, t, s)) continue;
        float x = 0.0f, dp = 0.0f;
        for (int d = 0; d < HD; ++d) x += Qs[j * HD + d] * kr[d], dp += Gs[j * HD + d] * vr[d];
        const float p = pointwise::fast_exp(x - Ls[j]), ds = p * (dp - Ds[j]);
        for (int d = 0; d < HD; ++d) av[d] += p * Gs[j * HD + d], ak[d] += ds * Qs[j * HD + d];
      }
      __syncthreads();
    }
  if (!live) return;
  for (int d = 0; d < HD; ++d) {
    dk[((b * Tk + s) * NKV + g) * HD + d] += ak[d];
    dv[((b * Tk + s) * NKV + g) * HD + d] += av[d];
  }
}
inline span_pair pair_of(const cpu::token_span& qs, const cpu::token_span& ks) {
  return {qs.pos, qs.doc, ks.pos, ks.doc};
}
}  // namespace detail

/// out_b [B, Tq, NH, HD], lse_b [B, NH, Tq] of queries `qs` against block `ks`, as
/// cpu::attention_block_forward (spans in device memory).
inline void attention_block_forward(float* out_b, float* lse_b, const float* q, const float* k, const float* v,
                                    const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                    std::int64_t NH, std::int64_t NKV, std::int64_t HD, cudaStream_t s = nullptr) {
  check(B > 0 && qs.n > 0 && ks.n > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_block_forward: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::with_head_dim(HD, "cuda::attention_block_forward", [&]<int D>() {
    const std::size_t shared = 2 * detail::attention_tile * D * sizeof(float);
    detail::block_forward_k<D><<<detail::attention_grid(qs.n, NH, B), detail::attention_rows, shared, s>>>(
        out_b, lse_b, q, k, v, detail::pair_of(qs, ks), qs.n, ks.n, NH, NKV, scale);
  });
  detail::launched("cuda::attention_block_forward");
}

/// Folds (out_b, lse_b) into (out, lse), as cpu::attention_merge.
inline void attention_merge(float* out, float* lse, const float* out_b, const float* lse_b, std::int64_t B,
                            std::int64_t Tq, std::int64_t NH, std::int64_t HD, cudaStream_t s = nullptr) {
  detail::merge_k<<<detail::blocks_for(B * NH * Tq), detail::threads, 0, s>>>(out, lse, out_b, lse_b, B, Tq, NH, HD);
  detail::launched("cuda::attention_merge");
}

/// D [B, NH, Tq] = rowsum(dout . out), as cpu::attention_delta.
inline void attention_delta(float* D, const float* dout, const float* out, std::int64_t B, std::int64_t Tq,
                            std::int64_t NH, std::int64_t HD, cudaStream_t s = nullptr) {
  detail::with_head_dim(HD, "cuda::attention_delta", [&]<int Dm>() {
    detail::attention_delta_k<Dm><<<detail::blocks_for(B * NH * Tq), detail::threads, 0, s>>>(D, dout, out, B, Tq, NH);
  });
  detail::launched("cuda::attention_delta");
}

/// The block's share of the backward, ACCUMULATED into dq, dk, dv, as
/// cpu::attention_block_backward (spans in device memory).
inline void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                     const float* k, const float* v, const float* lse, const float* D,
                                     const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                     std::int64_t NH, std::int64_t NKV, std::int64_t HD, cudaStream_t s = nullptr) {
  check(B > 0 && qs.n > 0 && ks.n > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_block_backward: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  const detail::span_pair sp = detail::pair_of(qs, ks);
  detail::with_head_dim(HD, "cuda::attention_block_backward", [&]<int Dm>() {
    const std::size_t kv_shared = 2 * detail::attention_tile * Dm * sizeof(float);
    detail::block_dq_k<Dm><<<detail::attention_grid(qs.n, NH, B), detail::attention_rows, kv_shared, s>>>(
        dq, dout, q, k, v, lse, D, sp, qs.n, ks.n, NH, NKV, scale);
    const std::size_t q_shared = (2 * detail::attention_tile * Dm + 2 * detail::attention_tile) * sizeof(float);
    detail::block_dkv_k<Dm><<<detail::attention_grid(ks.n, NKV, B), detail::attention_rows, q_shared, s>>>(
        dk, dv, dout, q, k, v, lse, D, sp, qs.n, ks.n, NH, NKV, scale);
  });
  detail::launched("cuda::attention_block_backward");
}

}  // namespace tessera::cuda
