// tessera/kernels/cuda/pointwise.cuh: the CUDA kernels of the per-element and per-row
// operations -- SwiGLU, RoPE, AdamW, RMSNorm, the embedding -- forward and backward, and the
// gradient norm's sum of squares, with
// the CPU kernels' interfaces (kernels/cpu/*.hpp) on device pointers and a stream.
// tessera-requires: cuda (compiled by nvcc: include from a .cu translation unit)
//
// The per-element math is kernels/pointwise.hpp's, the functions the CPU kernels call, so
// the two paths compute the same formulas; they differ only where a GPU rounds differently
// (nvcc contracts a * b + c into one FMA) and in the order of row sums (RMSNorm: a block
// reduction here, 16 lanes on the CPU). tests/gpu/test_cuda_kernels.cu compares every
// kernel with its CPU kernel on a GPU and states the tolerances.
//
// Reductions are deterministic: RMSNorm's weight gradient and the embedding's table
// gradient give each column to one thread, which walks the rows in order (as the CPU
// kernels split channels over threads), instead of atomics.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/pointwise.hpp>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/dtype.hpp>

namespace tessera::cuda {

namespace detail {
inline constexpr int threads = 256;

/// Blocks for a grid-stride loop over n elements.
inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}
inline void launched(const char* what) { cuda_check(cudaGetLastError(), std::string(what) + ": kernel launch"); }

#define TESSERA_GRID_STRIDE(i, n) \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

static __global__ void swiglu_forward_k(float* out, const float* h1, const float* h3, std::int64_t n) {
  TESSERA_GRID_STRIDE(i, n) out[i] = pointwise::swiglu(h1[i], h3[i]);
}
static __global__ void swiglu_backward_k(float* dh1, float* dh3, const float* dout, const float* h1, const float* h3,
                                  std::int64_t n) {
  TESSERA_GRID_STRIDE(i, n) {
    const pointwise::pair d = pointwise::swiglu_grad(dout[i], h1[i], h3[i]);
    dh1[i] = d.first;
    dh3[i] = d.second;
  }
}
static __global__ void add_k(float* y, const float* a, const float* b, std::int64_t n) {
  TESSERA_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}
static __global__ void to_bf16_k(bf16* y, const float* x, std::int64_t n) {
  TESSERA_GRID_STRIDE(i, n) y[i] = bf16(x[i]);
}
static __global__ void from_bf16_k(float* y, const bf16* x, std::int64_t n) {
  TESSERA_GRID_STRIDE(i, n) y[i] = static_cast<float>(x[i]);
}
static __global__ void adamw_k(float* p, const float* g, float* m, float* v, std::int64_t n, pointwise::adamw_scalars k) {
  TESSERA_GRID_STRIDE(i, n) pointwise::adamw(p[i], m[i], v[i], g[i], k);
}
/// One thread per rotated pair: row r of [B * T, NH], pair i of head hd.
static __global__ void rope_k(float* out, const float* inp, const float* cos, const float* sin, std::int64_t rows,
                       std::int64_t T, std::int64_t NH, std::int64_t HD, bool interleaved, float sign) {
  const std::int64_t h = HD / 2, n = rows * NH * h;
  TESSERA_GRID_STRIDE(e, n) {
    const std::int64_t i = e % h, head = (e / h) % NH, r = e / (h * NH), t = r % T;
    const float* x = inp + (r * NH + head) * HD;
    float* y = out + (r * NH + head) * HD;
    const std::int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + h;
    const pointwise::pair q = pointwise::rope_rotate(x[a], x[b], cos[t * h + i], sign * sin[t * h + i]);
    y[a] = q.first;
    y[b] = q.second;
  }
}
/// v reduced by `op` over the block's threads (blockDim.x == threads, a tree in a fixed
/// order: deterministic), returned to every thread.
template <class Op>
__device__ inline float block_reduce(float v, float* shared, Op op) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = threads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();
  return total;
}
__device__ inline float block_sum(float v, float* shared) {
  return block_reduce(v, shared, [](float a, float b) { return a + b; });
}
__device__ inline float block_max(float v, float* shared) {
  return block_reduce(v, shared, [](float a, float b) { return a > b ? a : b; });
}
/// One block per row.
static __global__ void rmsnorm_forward_k(float* out, float* rstd, const float* inp, const float* w, std::int64_t C,
                                  float eps) {
  __shared__ float sh[threads];
  const std::int64_t row = blockIdx.x;
  const float* x = inp + row * C;
  float ss = 0;
  for (std::int64_t c = threadIdx.x; c < C; c += threads) ss += x[c] * x[c];
  const float r = 1.0f / sqrtf(block_sum(ss, sh) / static_cast<float>(C) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  for (std::int64_t c = threadIdx.x; c < C; c += threads) out[row * C + c] = pointwise::rmsnorm_scale(x[c], r, w[c]);
}
static __global__ void rmsnorm_backward_input_k(float* dinp, const float* dout, const float* inp, const float* w,
                                         const float* rstd, std::int64_t C) {
  __shared__ float sh[threads];
  const std::int64_t row = blockIdx.x;
  const float* x = inp + row * C;
  const float* g = dout + row * C;
  float dot = 0;
  for (std::int64_t c = threadIdx.x; c < C; c += threads) dot += g[c] * w[c] * x[c];
  const float r = rstd[row];
  const float k = r * r * r * block_sum(dot, sh) / static_cast<float>(C);
  for (std::int64_t c = threadIdx.x; c < C; c += threads)
    dinp[row * C + c] += pointwise::rmsnorm_grad(x[c], g[c], w[c], r, k);
}
/// One thread per column, rows in order (deterministic).
static __global__ void rmsnorm_backward_weight_k(float* dw, const float* dout, const float* inp, const float* rstd,
                                          std::int64_t N, std::int64_t C) {
  TESSERA_GRID_STRIDE(c, C) {
    float acc = dw[c];
    for (std::int64_t i = 0; i < N; ++i) acc += dout[i * C + c] * inp[i * C + c] * rstd[i];
    dw[c] = acc;
  }
}
/// Rows [v0, v0 + Vl) of the table (a vocabulary shard): other tokens give zero rows.
static __global__ void embedding_forward_k(float* out, const std::int32_t* tokens, const float* wte, std::int64_t N,
                                    std::int64_t v0, std::int64_t Vl, std::int64_t C) {
  TESSERA_GRID_STRIDE(e, N * C) {
    const std::int64_t i = e / C, c = e % C, t = tokens[i] - v0;
    out[e] = t >= 0 && t < Vl ? wte[t * C + c] : 0.0f;
  }
}
/// One thread per column, tokens in order (deterministic; no atomics).
static __global__ void embedding_backward_k(float* dwte, const float* dout, const std::int32_t* tokens, std::int64_t N,
                                     std::int64_t v0, std::int64_t Vl, std::int64_t C) {
  TESSERA_GRID_STRIDE(c, C) {
    for (std::int64_t i = 0; i < N; ++i) {
      const std::int64_t t = tokens[i] - v0;
      if (t >= 0 && t < Vl) dwte[t * C + c] += dout[i * C + c];
    }
  }
}
/// Per-block sums of g^2 in double (grid-stride), into part[blockIdx.x]: a fixed tree, so
/// the same bits every run.
static __global__ void sum_squares_k(double* part, const float* g, std::int64_t n) {
  __shared__ double sh[threads];
  double acc = 0;
  TESSERA_GRID_STRIDE(i, n) acc += static_cast<double>(g[i]) * g[i];
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int s = threads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}
static __global__ void scale_k(float* g, std::int64_t n, float s) {
  TESSERA_GRID_STRIDE(i, n) g[i] *= s;
}
#undef TESSERA_GRID_STRIDE
}  // namespace detail

/// The sum of g^2 over n device floats, in double (the piece a distributed run all-reduces
/// before the square root, as cpu::sum_of_squares); per-block sums summed on the host.
inline double sum_of_squares(const float* g, std::int64_t n, cudaStream_t s = nullptr) {
  const unsigned blocks = detail::blocks_for(n) < 1024 ? detail::blocks_for(n) : 1024;
  double* part = static_cast<double*>(cuda_space::allocate(blocks * sizeof(double)));
  struct release {
    double* p;
    std::size_t n;
    ~release() { cuda_space::deallocate(p, n); }
  } r{part, blocks * sizeof(double)};
  detail::sum_squares_k<<<blocks, detail::threads, 0, s>>>(part, g, n);
  detail::launched("cuda::sum_of_squares");
  std::vector<double> h(blocks);
  cuda_check(cudaStreamSynchronize(s), "cuda::sum_of_squares");
  copy_to_host(h.data(), part, blocks * sizeof(double));
  double total = 0;
  for (double p : h) total += p;
  return total;
}

/// Multiplies n device floats by s (gradient clipping's step, as cpu::scale_inplace).
inline void scale_inplace(float* g, std::int64_t n, float s, cudaStream_t st = nullptr) {
  detail::scale_k<<<detail::blocks_for(n), detail::threads, 0, st>>>(g, n, s);
  detail::launched("cuda::scale_inplace");
}

/// y = a + b (n elements; b may alias y): the residual connections.
inline void add(float* y, const float* a, const float* b, std::int64_t n, cudaStream_t s = nullptr) {
  detail::add_k<<<detail::blocks_for(n), detail::threads, 0, s>>>(y, a, b, n);
  detail::launched("cuda::add");
}
/// y = x rounded to bf16 (nearest even; n elements): a bf16 GEMM's operands.
inline void to_bf16(bf16* y, const float* x, std::int64_t n, cudaStream_t s = nullptr) {
  if (n <= 0) return;
  detail::to_bf16_k<<<detail::blocks_for(n), detail::threads, 0, s>>>(y, x, n);
  detail::launched("cuda::to_bf16");
}
/// y = x widened to f32 (exact; n elements): FSDP's bf16 gathers into the f32 compute copy.
inline void from_bf16(float* y, const bf16* x, std::int64_t n, cudaStream_t s = nullptr) {
  if (n <= 0) return;
  detail::from_bf16_k<<<detail::blocks_for(n), detail::threads, 0, s>>>(y, x, n);
  detail::launched("cuda::from_bf16");
}
/// out = silu(h1) * h3 (n elements).
inline void swiglu_forward(float* out, const float* h1, const float* h3, std::int64_t n, cudaStream_t s = nullptr) {
  detail::swiglu_forward_k<<<detail::blocks_for(n), detail::threads, 0, s>>>(out, h1, h3, n);
  detail::launched("cuda::swiglu_forward");
}
/// WRITES dh1, dh3 (they may alias h1, h3 or dout), as cpu::swiglu_backward.
inline void swiglu_backward(float* dh1, float* dh3, const float* dout, const float* h1, const float* h3, std::int64_t n,
                            cudaStream_t s = nullptr) {
  detail::swiglu_backward_k<<<detail::blocks_for(n), detail::threads, 0, s>>>(dh1, dh3, dout, h1, h3, n);
  detail::launched("cuda::swiglu_backward");
}
/// RoPE of [B, T, NH, HD] with the tables cos, sin [T, HD / 2] (cpu::rope_table's; out may
/// alias inp); `inverse` rotates back (the backward).
inline void rope_apply(float* out, const float* inp, const float* cos, const float* sin, std::int64_t B, std::int64_t T,
                       std::int64_t NH, std::int64_t HD, bool inverse,
                       cpu::rope_style style = cpu::rope_style::interleaved, cudaStream_t s = nullptr) {
  detail::rope_k<<<detail::blocks_for(B * T * NH * (HD / 2)), detail::threads, 0, s>>>(
      out, inp, cos, sin, B * T, T, NH, HD, style == cpu::rope_style::interleaved, inverse ? -1.0f : 1.0f);
  detail::launched("cuda::rope_apply");
}
/// One AdamW step over n elements with the step's scalars (cpu::adamw_update computes them).
inline void adamw_update(float* p, const float* g, float* m, float* v, std::int64_t n,
                         const pointwise::adamw_scalars& k, cudaStream_t s = nullptr) {
  detail::adamw_k<<<detail::blocks_for(n), detail::threads, 0, s>>>(p, g, m, v, n, k);
  detail::launched("cuda::adamw_update");
}
/// out [N, C], rstd [N] as cpu::rmsnorm_forward.
inline void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, std::int64_t N, std::int64_t C,
                            float eps = 1e-5f, cudaStream_t s = nullptr) {
  if (N == 0) return;
  detail::rmsnorm_forward_k<<<static_cast<unsigned>(N), detail::threads, 0, s>>>(out, rstd, inp, w, C, eps);
  detail::launched("cuda::rmsnorm_forward");
}
/// ACCUMULATES dinp [N, C] and dw [C] (either may be null), as cpu::rmsnorm_backward.
inline void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                             const float* rstd, std::int64_t N, std::int64_t C, cudaStream_t s = nullptr) {
  if (dinp && N > 0) {
    detail::rmsnorm_backward_input_k<<<static_cast<unsigned>(N), detail::threads, 0, s>>>(dinp, dout, inp, w, rstd, C);
    detail::launched("cuda::rmsnorm_backward (input)");
  }
  if (dw) {
    detail::rmsnorm_backward_weight_k<<<detail::blocks_for(C), detail::threads, 0, s>>>(dw, dout, inp, rstd, N, C);
    detail::launched("cuda::rmsnorm_backward (weight)");
  }
}
/// out [N, C] = rows of the table's shard [v0, v0 + Vl) (zero rows for other tokens). The
/// ids must have been checked on the host (cpu::check_tokens) before they were copied.
inline void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, std::int64_t N, std::int64_t v0,
                              std::int64_t Vl, std::int64_t C, cudaStream_t s = nullptr) {
  detail::embedding_forward_k<<<detail::blocks_for(N * C), detail::threads, 0, s>>>(out, tokens, wte, N, v0, Vl, C);
  detail::launched("cuda::embedding_forward");
}
/// ACCUMULATES dwte's shard rows from dout [N, C].
inline void embedding_backward(float* dwte, const float* dout, const std::int32_t* tokens, std::int64_t N,
                               std::int64_t v0, std::int64_t Vl, std::int64_t C, cudaStream_t s = nullptr) {
  detail::embedding_backward_k<<<detail::blocks_for(C), detail::threads, 0, s>>>(dwte, dout, tokens, N, v0, Vl, C);
  detail::launched("cuda::embedding_backward");
}

}  // namespace tessera::cuda
