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
// The exponentials are pointwise::fast_exp, the CPU's. Not yet: tensor-core tiles (mma /
// wgmma) and the split of one row over a warp -- the performance work that needs a GPU to
// measure; docs/cuda.md.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda {

namespace detail {
inline constexpr int attention_rows = 64;  // rows (threads) per block
inline constexpr int attention_tile = 32;  // streamed rows per shared-memory tile

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

/// Forward: block (query tile, head, batch); thread = query row t.
template <int HD>
__global__ void attention_forward_k(float* out, float* lse, const float* q, const float* k, const float* v,
                                    std::int64_t T, std::int64_t NH, std::int64_t NKV, float scale) {
  extern __shared__ float sm[];
  float* Ks = sm;
  float* Vs = sm + attention_tile * HD;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, g = h / (NH / NKV);
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * attention_rows, t = t0 + threadIdx.x;
  const bool live = t < T;
  float qr[HD], acc[HD];
  for (int d = 0; d < HD; ++d) qr[d] = live ? q[((b * T + t) * NH + h) * HD + d] * scale : 0.0f, acc[d] = 0.0f;
  float m = -3.402823466e38f, l = 0.0f;
  const std::int64_t last = t0 + attention_rows - 1 < T - 1 ? t0 + attention_rows - 1 : T - 1;  // the block's last row
  for (std::int64_t s0 = 0; s0 <= last; s0 += attention_tile) {
    load_kv_tile<HD>(Ks, Vs, k, v, b, g, s0, T, NKV);
    for (int j = 0; j < attention_tile; ++j) {
      const std::int64_t s = s0 + j;
      if (!live || s > t) break;  // causal: keys after the query are not seen
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
  for (int d = 0; d < HD; ++d) out[((b * T + t) * NH + h) * HD + d] = acc[d] / l;
  lse[(b * NH + h) * T + t] = m + logf(l);
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

/// dq: block (query tile, head, batch); thread = query row t, over the keys s <= t.
template <int HD>
__global__ void attention_dq_k(float* dq, const float* dout, const float* q, const float* k, const float* v,
                               const float* lse, const float* D, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                               float scale) {
  extern __shared__ float sm[];
  float* Ks = sm;
  float* Vs = sm + attention_tile * HD;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, g = h / (NH / NKV);
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * attention_rows, t = t0 + threadIdx.x;
  const bool live = t < T;
  float qr[HD], gr[HD], acc[HD];
  for (int d = 0; d < HD; ++d) {
    qr[d] = live ? q[((b * T + t) * NH + h) * HD + d] * scale : 0.0f;
    gr[d] = live ? dout[((b * T + t) * NH + h) * HD + d] : 0.0f;
    acc[d] = 0.0f;
  }
  const float L = live ? lse[(b * NH + h) * T + t] : 0.0f, Dt = live ? D[(b * NH + h) * T + t] : 0.0f;
  const std::int64_t last = t0 + attention_rows - 1 < T - 1 ? t0 + attention_rows - 1 : T - 1;
  for (std::int64_t s0 = 0; s0 <= last; s0 += attention_tile) {
    load_kv_tile<HD>(Ks, Vs, k, v, b, g, s0, T, NKV);
    for (int j = 0; j < attention_tile; ++j) {
      const std::int64_t s = s0 + j;
      if (!live || s > t) break;
      float x = 0.0f, dp = 0.0f;
      for (int d = 0; d < HD; ++d) x += qr[d] * Ks[j * HD + d], dp += gr[d] * Vs[j * HD + d];
      const float p = pointwise::fast_exp(x - L), ds = p * (dp - Dt);
      for (int d = 0; d < HD; ++d) acc[d] += ds * Ks[j * HD + d];
    }
    __syncthreads();
  }
  if (!live) return;
  for (int d = 0; d < HD; ++d) dq[((b * T + t) * NH + h) * HD + d] = acc[d] * scale;
}

/// dk, dv: block (key tile, KV head, batch); thread = key row s, over the queries t >= s of
/// the KV head's query heads.
template <int HD>
__global__ void attention_dkv_k(float* dk, float* dv, const float* dout, const float* q, const float* k,
                                const float* v, const float* lse, const float* D, std::int64_t T, std::int64_t NH,
                                std::int64_t NKV, float scale) {
  extern __shared__ float sm[];
  float* Qs = sm;
  float* Gs = sm + attention_tile * HD;
  float* Ls = Gs + attention_tile * HD;
  float* Ds = Ls + attention_tile;
  const std::int64_t b = blockIdx.z, g = blockIdx.y, G = NH / NKV;
  const std::int64_t s0 = static_cast<std::int64_t>(blockIdx.x) * attention_rows, s = s0 + threadIdx.x;
  const bool live = s < T;
  float kr[HD], vr[HD], ak[HD], av[HD];
  for (int d = 0; d < HD; ++d) {
    kr[d] = live ? k[((b * T + s) * NKV + g) * HD + d] : 0.0f;
    vr[d] = live ? v[((b * T + s) * NKV + g) * HD + d] : 0.0f;
    ak[d] = av[d] = 0.0f;
  }
  for (std::int64_t h = g * G; h < (g + 1) * G; ++h)
    for (std::int64_t q0 = s0; q0 < T; q0 += attention_tile) {  // queries before the block's first key see none of it
      for (int e = threadIdx.x; e < attention_tile * HD; e += blockDim.x) {
        const std::int64_t t = q0 + e / HD;
        Qs[e] = t < T ? q[((b * T + t) * NH + h) * HD + e % HD] * scale : 0.0f;
        Gs[e] = t < T ? dout[((b * T + t) * NH + h) * HD + e % HD] : 0.0f;
      }
      for (int e = threadIdx.x; e < attention_tile; e += blockDim.x) {
        const std::int64_t t = q0 + e;
        Ls[e] = t < T ? lse[(b * NH + h) * T + t] : 0.0f;
        Ds[e] = t < T ? D[(b * NH + h) * T + t] : 0.0f;
      }
      __syncthreads();
      for (int j = 0; j < attention_tile; ++j) {
        const std::int64_t t = q0 + j;
        if (!live || t >= T) break;
        if (t < s) continue;  // causal: query t sees key s only when s <= t
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
    dk[((b * T + s) * NKV + g) * HD + d] = ak[d];
    dv[((b * T + s) * NKV + g) * HD + d] = av[d];
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
}  // namespace detail

/// out [B, T, NH, HD] and lse [B, NH, T], as cpu::attention_forward.
inline void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, std::int64_t B,
                              std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                              cudaStream_t s = nullptr) {
  check(B > 0 && T > 0 && NKV > 0 && NH % NKV == 0, "cuda::attention_forward: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::with_head_dim(HD, "cuda::attention_forward", [&]<int D>() {
    const std::size_t shared = 2 * detail::attention_tile * D * sizeof(float);
    detail::attention_forward_k<D><<<detail::attention_grid(T, NH, B), detail::attention_rows, shared, s>>>(
        out, lse, q, k, v, T, NH, NKV, scale);
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
    const std::size_t kv_shared = 2 * detail::attention_tile * Dm * sizeof(float);
    detail::attention_dq_k<Dm><<<detail::attention_grid(T, NH, B), detail::attention_rows, kv_shared, s>>>(
        dq, dout, q, k, v, lse, D, T, NH, NKV, scale);
    const std::size_t q_shared = (2 * detail::attention_tile * Dm + 2 * detail::attention_tile) * sizeof(float);
    detail::attention_dkv_k<Dm><<<detail::attention_grid(T, NKV, B), detail::attention_rows, q_shared, s>>>(
        dk, dv, dout, q, k, v, lse, D, T, NH, NKV, scale);
  });
  detail::launched("cuda::attention_backward");
}

}  // namespace tessera::cuda
