// tessera/kernels/cuda/pointwise_kernels.cuh: the device code of pointwise.cuh (which has the
// entry points and says what they compute): the per-element kernels, the block reductions
// (a fixed tree: deterministic), RMSNorm, the embedding, the sum of squares.
// nvcc compiles it for the GPU; a host compiler with TESSERA_CUDA_EMULATION defined and
// tests/support/cuda_emulation.hpp included first runs it on the host
// (tests/kernels/test_pointwise_emulated.cpp).
// tessera-requires: cuda (device code: see above)
#pragma once

#ifndef TESSERA_CUDA_EMULATION
#include <cuda_runtime.h>
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <tessera/kernels/pointwise.hpp>
#include <tessera/tensor/dtype.hpp>

namespace tessera::cuda::detail {
inline constexpr int threads = 256;

/// Blocks for a grid-stride loop over n elements.
inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

#define TESSERA_GRID_STRIDE(i, n) \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

/// V consecutive elements as one aligned group: one 16-byte load of 4 floats, one 8-byte store
/// of 4 bf16, one 4-byte store of 4 FP8 codes. Memory-bound kernels move their elements in
/// groups where the host launcher has checked the pointers' alignment (aligned()): a warp's
/// 2-byte or 1-byte stores use a fraction of each memory transaction (the bf16 casts ran at
/// 1.9 TB/s of the H200's 4.8 with them; docs/performance.md, "On GPUs").
template <int V>
struct alignas(4 * V) f32_group {
  float v[V];
};
template <int V>
struct alignas(2 * V) bf16_group {
  bf16 v[V];
};
template <int V>
struct alignas(V) u8_group {
  std::uint8_t v[V];
};
/// Whether p is a multiple of `bytes` (a power of two); host launchers and row kernels ask it.
__host__ __device__ inline bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}
/// Calls launch(std::integral_constant<int, V>, first, count) to cover n elements: in groups of
/// 4 (V = 4, `count` groups from element 0) when `grouped` (the pointers aligned for them),
/// then what is left one by one (V = 1) -- how the memory-bound kernels are launched.
template <class F>
void in_fours(std::int64_t n, bool grouped, F&& launch) {
  const std::int64_t groups = grouped ? n / 4 : 0;
  if (groups > 0) launch(std::integral_constant<int, 4>{}, std::int64_t{0}, groups);
  if (n > 4 * groups) launch(std::integral_constant<int, 1>{}, 4 * groups, n - 4 * groups);
}

/// out = silu(h1) * h3 over n groups of V elements.
template <int V>
__global__ void swiglu_forward_k(f32_group<V>* out, const f32_group<V>* h1, const f32_group<V>* h3, std::int64_t n) {
  TESSERA_GRID_STRIDE(i, n) {
    const f32_group<V> a = h1[i], b = h3[i];
    f32_group<V> y;
    for (int j = 0; j < V; ++j) y.v[j] = pointwise::swiglu(a.v[j], b.v[j]);
    out[i] = y;
  }
}
/// SwiGLU's backward over n groups of V elements (each group read whole before it is written:
/// the outputs may alias the inputs).
template <int V>
__global__ void swiglu_backward_k(f32_group<V>* dh1, f32_group<V>* dh3, const f32_group<V>* dout,
                                  const f32_group<V>* h1, const f32_group<V>* h3, std::int64_t n) {
  TESSERA_GRID_STRIDE(i, n) {
    const f32_group<V> g = dout[i], a = h1[i], b = h3[i];
    f32_group<V> d1, d3;
    for (int j = 0; j < V; ++j) {
      const pointwise::pair d = pointwise::swiglu_grad(g.v[j], a.v[j], b.v[j]);
      d1.v[j] = d.first;
      d3.v[j] = d.second;
    }
    dh1[i] = d1;
    dh3[i] = d3;
  }
}
static __global__ void add_k(float* y, const float* a, const float* b, std::int64_t n) {
  TESSERA_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}
/// y = x rounded to bf16, over n groups of V elements.
template <int V>
__global__ void to_bf16_k(bf16_group<V>* y, const f32_group<V>* x, std::int64_t n) {
  TESSERA_GRID_STRIDE(i, n) {
    const f32_group<V> a = x[i];
    bf16_group<V> b;
    for (int j = 0; j < V; ++j) b.v[j] = bf16(a.v[j]);
    y[i] = b;
  }
}
static __global__ void from_bf16_k(float* y, const bf16* x, std::int64_t n) {
  TESSERA_GRID_STRIDE(i, n) y[i] = static_cast<float>(x[i]);
}
/// One AdamW step over n groups of V elements; with Rounded, the new parameters rounded to
/// bf16 into r too (the weights a model keeps rounded: kernels/rounded_weights.hpp).
template <int V, bool Rounded = false>
__global__ void adamw_k(f32_group<V>* p, const f32_group<V>* g, f32_group<V>* m, f32_group<V>* v, std::int64_t n,
                        pointwise::adamw_scalars k, bf16_group<V>* r = nullptr) {
  TESSERA_GRID_STRIDE(i, n) {
    f32_group<V> pi = p[i], mi = m[i], vi = v[i];
    const f32_group<V> gi = g[i];
    for (int j = 0; j < V; ++j) pointwise::adamw(pi.v[j], mi.v[j], vi.v[j], gi.v[j], k);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if constexpr (Rounded) {
      bf16_group<V> b;
      for (int j = 0; j < V; ++j) b.v[j] = bf16(pi.v[j]);
      r[i] = b;
    }
  }
}
/// RoPE over rows [B * T] of NH heads of HD: one thread per P consecutive rotated pairs of a
/// head (P = 2: the pairs' elements and their cos, sin moved as aligned groups), index
/// arithmetic in I (32 bits where the tensor's elements and the grid's stride fit them: a
/// GPU divides 64-bit integers in software, three divisions an element).
template <class I, int P>
__global__ void rope_k(float* out, const float* inp, const float* cos, const float* sin, I rows, I T, I NH, I HD,
                       bool interleaved, float sign) {
  const I h = HD / 2, per_head = h / P, n = rows * NH * per_head;
  for (I e = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); e < n;
       e += static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x)) {
    const I head = e / per_head, i = (e - head * per_head) * P, t = (head / NH) % T;
    const f32_group<P> c = *reinterpret_cast<const f32_group<P>*>(cos + t * h + i),
                       s = *reinterpret_cast<const f32_group<P>*>(sin + t * h + i);
    const float* x = inp + head * HD;
    float* y = out + head * HD;
    if (interleaved) {  // pair i = (x[2i], x[2i + 1])
      f32_group<2 * P> v = *reinterpret_cast<const f32_group<2 * P>*>(x + 2 * i);
      for (int p = 0; p < P; ++p) {
        const pointwise::pair q = pointwise::rope_rotate(v.v[2 * p], v.v[2 * p + 1], c.v[p], sign * s.v[p]);
        v.v[2 * p] = q.first;
        v.v[2 * p + 1] = q.second;
      }
      *reinterpret_cast<f32_group<2 * P>*>(y + 2 * i) = v;
    } else {  // pair i = (x[i], x[i + h])
      f32_group<P> a = *reinterpret_cast<const f32_group<P>*>(x + i), b = *reinterpret_cast<const f32_group<P>*>(x + i + h);
      for (int p = 0; p < P; ++p) {
        const pointwise::pair q = pointwise::rope_rotate(a.v[p], b.v[p], c.v[p], sign * s.v[p]);
        a.v[p] = q.first;
        b.v[p] = q.second;
      }
      *reinterpret_cast<f32_group<P>*>(y + i) = a;
      *reinterpret_cast<f32_group<P>*>(y + i + h) = b;
    }
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
/// A column reduction's first pass, on blocks of 32 columns x 8 row lanes (threadIdx.x,
/// threadIdx.y): part[chunk * cols + c] = op over at(r, c) from 0 for column c = blockIdx.x *
/// 32 + threadIdx.x and the rows [chunk * step, (chunk + 1) * step), chunk = blockIdx.y --
/// each lane over every 8th row in order, then the 8 lanes in order: the same bits every run.
/// Many blocks read a column's rows, where one thread per column over all rows left most SMs
/// idle (Float8's column amaxes, 0.28 s of an 8B step on an H200; docs/performance.md).
template <class At, class Op>
__device__ inline void column_chunk(float* part, std::int64_t rows, std::int64_t cols, std::int64_t step, At at,
                                    Op op) {
  __shared__ float sh[8][33];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * step, r1 = r0 + step < rows ? r0 + step : rows;
  float m = 0.0f;
  if (c < cols)
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += 8) m = op(m, at(r, c));
  sh[threadIdx.y][threadIdx.x] = m;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  for (int i = 1; i < 8; ++i) m = op(m, sh[i][threadIdx.x]);
  part[static_cast<std::int64_t>(blockIdx.y) * cols + c] = m;
}
/// column_chunk's grid for [rows, cols] in chunks of `step` rows (its blocks: 32 x 8 threads).
inline dim3 column_chunk_grid(std::int64_t rows, std::int64_t cols, std::int64_t step) {
  return dim3(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(rows > 0 ? (rows + step - 1) / step : 1));
}
/// RMSNorm's weight gradient, first pass: part[chunk * C + c] = the sum over the chunk's rows
/// i of dout[i, c] inp[i, c] rstd[i] (column_chunk).
static __global__ void rmsnorm_backward_weight_part_k(float* part, const float* dout, const float* inp,
                                                      const float* rstd, std::int64_t N, std::int64_t C,
                                                      std::int64_t step) {
  column_chunk(part, N, C, step,
               [&](std::int64_t i, std::int64_t c) { return dout[i * C + c] * inp[i * C + c] * rstd[i]; },
               [](float a, float b) { return a + b; });
}
/// Second pass: dw[c] += the chunks' sums, in order.
static __global__ void rmsnorm_backward_weight_k(float* dw, const float* part, std::int64_t chunks, std::int64_t C) {
  TESSERA_GRID_STRIDE(c, C) {
    float acc = 0.0f;
    for (std::int64_t k = 0; k < chunks; ++k) acc += part[k * C + c];
    dw[c] += acc;
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
/// dwte [Vl, C] += the rows of dout [N, C] by token: thread (part, c) adds column c of the
/// rows t with t % parts == part (parts a power of two), over the tokens in order -- each
/// element's sum in the CPU kernel's order, the same bits, without atomics. A thread a column
/// alone (parts 1) left most of a GPU idle: 4 ms for 8B's 8,192 tokens of 4,096 columns.
static __global__ void embedding_backward_k(float* dwte, const float* dout, const std::int32_t* tokens, std::int64_t N,
                                            std::int64_t v0, std::int64_t Vl, std::int64_t C, std::int64_t parts) {
  TESSERA_GRID_STRIDE(e, C * parts) {
    const std::int64_t c = e % C, part = e / C;
    for (std::int64_t i = 0; i < N; ++i) {
      const std::int64_t t = tokens[i] - v0;
      if (t >= 0 && t < Vl && (t & (parts - 1)) == part) dwte[t * C + c] += dout[i * C + c];
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
}  // namespace tessera::cuda::detail
