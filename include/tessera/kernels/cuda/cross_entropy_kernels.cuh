// tessera/kernels/cuda/cross_entropy_kernels.cuh: the device code of cross_entropy.cuh (which
// has the entry points and says what they compute): one block per token row, block
// reductions, the vocabulary-parallel phases.
// nvcc compiles it for the GPU; a host compiler with TESSERA_CUDA_EMULATION defined and
// tests/support/cuda_emulation.hpp included first runs it on the host
// (tests/kernels/test_pointwise_emulated.cpp).
// tessera-requires: cuda (device code: see above)
#pragma once

#ifndef TESSERA_CUDA_EMULATION
#include <cuda_runtime.h>
#endif

#include <cmath>
#include <cstdint>

#include <tessera/kernels/cuda/pointwise_kernels.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda::detail {
/// y[v] = f(x[v], v) over a row of V elements, this thread's part: by fours (16-byte loads and
/// stores, each group read whole before it is written: y may be x) where both rows are 16-byte
/// aligned and V a multiple of 4, else one by one. y null: f(x[v], v) only reads.
template <class F>
__device__ inline void over_row(float* y, const float* x, std::int64_t V, F&& f) {
  if (aligned(x, 16) && aligned(y, 16) && V % 4 == 0) {
    for (std::int64_t i = threadIdx.x; i < V / 4; i += threads) {
      f32_group<4> g = reinterpret_cast<const f32_group<4>*>(x)[i];
      for (int j = 0; j < 4; ++j) g.v[j] = f(g.v[j], 4 * i + j);
      if (y) reinterpret_cast<f32_group<4>*>(y)[i] = g;
    }
  } else {
    for (std::int64_t v = threadIdx.x; v < V; v += threads) {
      const float r = f(x[v], v);
      if (y) y[v] = r;
    }
  }
}
/// One block per row: the row's max and sum of e^(x - max) in one pass (each thread's running
/// max and sum, rescaled when its max grows, then combined by two block reductions in a fixed
/// order), then dlogits in a second.
static __global__ void cross_entropy_k(float* dlogits, float* losses, const float* logits, const std::int32_t* targets,
                                std::int64_t V, float scale) {
  __shared__ float sh[threads];
  const std::int64_t row = blockIdx.x;
  const float* x = logits + row * V;
  float* d = dlogits + row * V;
  const std::int32_t t = targets[row];
  float m = -3.402823466e38f, s = 0.0f;
  over_row(nullptr, x, V, [&](float xv, std::int64_t) {
    if (xv > m) s = s * pointwise::fast_exp(m - xv) + 1.0f, m = xv;
    else s += pointwise::fast_exp(xv - m);
    return xv;
  });
  const float mx = block_max(m, sh);
  const float lse = mx + logf(block_sum(s * pointwise::fast_exp(m - mx), sh));
  const float xt = t >= 0 ? x[t] : 0.0f;  // every thread reads it before any writes the row
  __syncthreads();
  if (threadIdx.x == 0) losses[row] = t >= 0 ? lse - xt : 0.0f;
  over_row(d, x, V, [&](float xv, std::int64_t v) {
    return t < 0 ? 0.0f : scale * pointwise::fast_exp(xv - lse) - (v == t ? scale : 0.0f);
  });
}

static __global__ void ce_shard_row_max_k(float* rowmax, const float* logits, std::int64_t Vl) {
  __shared__ float sh[threads];
  const float* x = logits + blockIdx.x * Vl;
  float m = -3.402823466e38f;
  for (std::int64_t v = threadIdx.x; v < Vl; v += threads) m = x[v] > m ? x[v] : m;
  m = block_max(m, sh);
  if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}
static __global__ void ce_shard_row_stats_k(float* stats, const float* logits, const float* rowmax,
                                     const std::int32_t* targets, std::int64_t v0, std::int64_t Vl) {
  __shared__ float sh[threads];
  const std::int64_t row = blockIdx.x;
  const float* x = logits + row * Vl;
  const float m = rowmax[row];
  float s = 0;
  for (std::int64_t v = threadIdx.x; v < Vl; v += threads) s += pointwise::fast_exp(x[v] - m);
  s = block_sum(s, sh);
  if (threadIdx.x == 0) {
    const std::int64_t t = static_cast<std::int64_t>(targets[row]) - v0;
    stats[2 * row] = s;
    stats[2 * row + 1] = (targets[row] >= 0 && t >= 0 && t < Vl) ? x[t] : 0.0f;
  }
}
static __global__ void ce_shard_finish_k(float* dlogits, float* losses, const float* logits, const float* rowmax,
                                  const float* stats, const std::int32_t* targets, std::int64_t v0, std::int64_t Vl,
                                  float scale) {
  const std::int64_t row = blockIdx.x;
  const std::int32_t t = targets[row];
  const float lse = rowmax[row] + logf(stats[2 * row]);
  if (threadIdx.x == 0) losses[row] = t >= 0 ? lse - stats[2 * row + 1] : 0.0f;
  if (!dlogits) return;
  const float* x = logits + row * Vl;
  float* d = dlogits + row * Vl;
  const std::int64_t tl = static_cast<std::int64_t>(t) - v0;  // outside [0, Vl): another shard's target
  for (std::int64_t v = threadIdx.x; v < Vl; v += threads)
    d[v] = t < 0 ? 0.0f : scale * pointwise::fast_exp(x[v] - lse) - (v == tl ? scale : 0.0f);
}
}  // namespace tessera::cuda::detail
