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
// The device code is pointwise_kernels.cuh, which the host tests also run through a CUDA
// emulation (tests/kernels/test_pointwise_emulated.cpp); this file launches it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <string>
#include <vector>

#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cuda/launch.cuh>
#include <tessera/kernels/cuda/pointwise_kernels.cuh>
#include <tessera/kernels/pointwise.hpp>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/dtype.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera::cuda {

namespace detail {
/// buf (a host thread's device scratch) grown to at least n elements, its data; growing waits
/// for the device first, whose queued kernels may still read the old buffer (never shrunk).
template <class T>
T* grown(tensor<T, cuda_space>& buf, std::int64_t n, const char* what) {
  if (static_cast<std::int64_t>(buf.numel()) < n) {
    cuda_check(cudaDeviceSynchronize(), std::string("cudaDeviceSynchronize (") + what + ")");
    buf = tensor<T, cuda_space>({n});
  }
  return buf.data();
}
inline void launched(const char* what) { cuda_check(cudaGetLastError(), std::string(what) + ": kernel launch"); }
/// The compute capability of the current device, major * 10 + minor (asked once per thread).
inline int compute_capability() {
  thread_local int cc = -1;
  if (cc < 0) {
    int dev = 0, major = 0, minor = 0;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
    cuda_check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "cudaDeviceGetAttribute");
    cc = major * 10 + minor;
  }
  return cc;
}
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
  TESSERA_LAUNCH(blocks, detail::threads, 0, s, detail::sum_squares_k)(part, g, n);
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
  TESSERA_LAUNCH(detail::blocks_for(n), detail::threads, 0, st, detail::scale_k)(g, n, s);
  detail::launched("cuda::scale_inplace");
}

/// y = a + b (n elements; b may alias y): the residual connections.
inline void add(float* y, const float* a, const float* b, std::int64_t n, cudaStream_t s = nullptr) {
  TESSERA_LAUNCH(detail::blocks_for(n), detail::threads, 0, s, detail::add_k)(y, a, b, n);
  detail::launched("cuda::add");
}
/// y = x rounded to bf16 (nearest even; n elements): a bf16 GEMM's operands. In groups of 4
/// (16-byte loads, 8-byte stores) where x and y are aligned for them, the rest one by one.
inline void to_bf16(bf16* y, const float* x, std::int64_t n, cudaStream_t s = nullptr) {
  if (n <= 0) return;
  detail::in_fours(n, detail::aligned(x, 16) && detail::aligned(y, 8),
                   [&]<int V>(std::integral_constant<int, V>, std::int64_t i, std::int64_t count) {
                     TESSERA_LAUNCH(detail::blocks_for(count), detail::threads, 0, s, detail::to_bf16_k<V>)(
                         reinterpret_cast<detail::bf16_group<V>*>(y + i),
                         reinterpret_cast<const detail::f32_group<V>*>(x + i), count);
                   });
  detail::launched("cuda::to_bf16");
}
/// y = x widened to f32 (exact; n elements): FSDP's bf16 gathers into the f32 compute copy.
inline void from_bf16(float* y, const bf16* x, std::int64_t n, cudaStream_t s = nullptr) {
  if (n <= 0) return;
  TESSERA_LAUNCH(detail::blocks_for(n), detail::threads, 0, s, detail::from_bf16_k)(y, x, n);
  detail::launched("cuda::from_bf16");
}
/// out = silu(h1) * h3 (n elements; in groups of 4 where the pointers are aligned for them).
inline void swiglu_forward(float* out, const float* h1, const float* h3, std::int64_t n, cudaStream_t s = nullptr) {
  using detail::aligned, detail::f32_group;
  if (n <= 0) return;
  detail::in_fours(n, aligned(out, 16) && aligned(h1, 16) && aligned(h3, 16),
                   [&]<int V>(std::integral_constant<int, V>, std::int64_t i, std::int64_t count) {
                     TESSERA_LAUNCH(detail::blocks_for(count), detail::threads, 0, s, detail::swiglu_forward_k<V>)(
                         reinterpret_cast<f32_group<V>*>(out + i), reinterpret_cast<const f32_group<V>*>(h1 + i),
                         reinterpret_cast<const f32_group<V>*>(h3 + i), count);
                   });
  detail::launched("cuda::swiglu_forward");
}
/// WRITES dh1, dh3 (they may alias h1, h3 or dout), as cpu::swiglu_backward; in groups of 4
/// as swiglu_forward.
inline void swiglu_backward(float* dh1, float* dh3, const float* dout, const float* h1, const float* h3, std::int64_t n,
                            cudaStream_t s = nullptr) {
  using detail::aligned, detail::f32_group;
  if (n <= 0) return;
  detail::in_fours(n, aligned(dh1, 16) && aligned(dh3, 16) && aligned(dout, 16) && aligned(h1, 16) && aligned(h3, 16),
                   [&]<int V>(std::integral_constant<int, V>, std::int64_t i, std::int64_t count) {
                     TESSERA_LAUNCH(detail::blocks_for(count), detail::threads, 0, s, detail::swiglu_backward_k<V>)(
                         reinterpret_cast<f32_group<V>*>(dh1 + i), reinterpret_cast<f32_group<V>*>(dh3 + i),
                         reinterpret_cast<const f32_group<V>*>(dout + i), reinterpret_cast<const f32_group<V>*>(h1 + i),
                         reinterpret_cast<const f32_group<V>*>(h3 + i), count);
                   });
  detail::launched("cuda::swiglu_backward");
}
/// RoPE of [B, T, NH, HD] with the tables cos, sin [T, HD / 2] (cpu::rope_table's; out may
/// alias inp); `inverse` rotates back (the backward). Two pairs a thread where HD / 2 is even
/// and the pointers are aligned for their groups, 32-bit indices where they fit (rope_k).
inline void rope_apply(float* out, const float* inp, const float* cos, const float* sin, std::int64_t B, std::int64_t T,
                       std::int64_t NH, std::int64_t HD, bool inverse,
                       cpu::rope_style style = cpu::rope_style::interleaved, cudaStream_t s = nullptr) {
  using detail::aligned;
  const bool interleaved = style == cpu::rope_style::interleaved;
  const std::int64_t h = HD / 2, rows = B * T;
  if (rows * NH * h <= 0) return;
  const std::size_t x_bytes = interleaved ? 16 : 8;  // a thread's two pairs: 4 floats, or 2 and 2
  const bool twos = h % 2 == 0 && aligned(out, x_bytes) && aligned(inp, x_bytes) && aligned(cos, 8) && aligned(sin, 8);
  const float sign = inverse ? -1.0f : 1.0f;
  auto launch = [&]<class I, int P>(I, std::integral_constant<int, P>) {
    TESSERA_LAUNCH(detail::blocks_for(rows * NH * (h / P)), detail::threads, 0, s, detail::rope_k<I, P>)(
        out, inp, cos, sin, static_cast<I>(rows), static_cast<I>(T), static_cast<I>(NH), static_cast<I>(HD),
        interleaved, sign);
  };
  // 32 bits: every element's offset, and the last thread index plus a grid's stride
  const bool narrow = rows * NH * HD + std::int64_t{65535} * detail::threads <= std::int64_t{0xffffffff};
  if (narrow && twos) launch(std::uint32_t{}, std::integral_constant<int, 2>{});
  else if (narrow) launch(std::uint32_t{}, std::integral_constant<int, 1>{});
  else if (twos) launch(std::int64_t{}, std::integral_constant<int, 2>{});
  else launch(std::int64_t{}, std::integral_constant<int, 1>{});
  detail::launched("cuda::rope_apply");
}
/// One AdamW step over n elements with the step's scalars (cpu::adamw_update computes them);
/// `rounded` (or null): the new parameters rounded to bf16 there too, in the same pass.
inline void adamw_update(float* p, const float* g, float* m, float* v, std::int64_t n,
                         const pointwise::adamw_scalars& k, cudaStream_t s = nullptr, bf16* rounded = nullptr) {
  using detail::aligned, detail::f32_group, detail::bf16_group;
  const bool grouped = aligned(p, 16) && aligned(g, 16) && aligned(m, 16) && aligned(v, 16) && aligned(rounded, 8);
  detail::in_fours(n, grouped, [&]<int V>(std::integral_constant<int, V>, std::int64_t i, std::int64_t count) {
    auto* pg = reinterpret_cast<f32_group<V>*>(p + i);
    auto* gg = reinterpret_cast<const f32_group<V>*>(g + i);
    auto* mg = reinterpret_cast<f32_group<V>*>(m + i);
    auto* vg = reinterpret_cast<f32_group<V>*>(v + i);
    if (rounded)
      TESSERA_LAUNCH(detail::blocks_for(count), detail::threads, 0, s, detail::adamw_k<V, true>)(
          pg, gg, mg, vg, count, k, reinterpret_cast<bf16_group<V>*>(rounded + i));
    else
      TESSERA_LAUNCH(detail::blocks_for(count), detail::threads, 0, s, detail::adamw_k<V>)(pg, gg, mg, vg, count, k,
                                                                                           nullptr);
  });
  detail::launched("cuda::adamw_update");
}
/// out [N, C], rstd [N] as cpu::rmsnorm_forward.
inline void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, std::int64_t N, std::int64_t C,
                            float eps = 1e-5f, cudaStream_t s = nullptr) {
  if (N == 0) return;
  TESSERA_LAUNCH(static_cast<unsigned>(N), detail::threads, 0, s, detail::rmsnorm_forward_k)(out, rstd, inp, w, C, eps);
  detail::launched("cuda::rmsnorm_forward");
}
/// ACCUMULATES dinp [N, C] and dw [C] (either may be null), as cpu::rmsnorm_backward.
inline void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                             const float* rstd, std::int64_t N, std::int64_t C, cudaStream_t s = nullptr) {
  if (dinp && N > 0) {
    TESSERA_LAUNCH(static_cast<unsigned>(N), detail::threads, 0, s, detail::rmsnorm_backward_input_k)(
        dinp, dout, inp, w, rstd, C);
    detail::launched("cuda::rmsnorm_backward (input)");
  }
  if (dw && C > 0) {  // two passes: chunks of 256 rows on many blocks, then the chunks in order
    constexpr std::int64_t step = 256;
    const std::int64_t chunks = N > 0 ? (N + step - 1) / step : 1;
    thread_local tensor<float, cuda_space> scratch;
    float* part = detail::grown(scratch, chunks * C, "RMSNorm's weight-gradient partial sums");
    TESSERA_LAUNCH(detail::column_chunk_grid(N, C, step), dim3(32, 8), 0, s, detail::rmsnorm_backward_weight_part_k)(
        part, dout, inp, rstd, N, C, step);
    TESSERA_LAUNCH(detail::blocks_for(C), detail::threads, 0, s, detail::rmsnorm_backward_weight_k)(dw, part, chunks, C);
    detail::launched("cuda::rmsnorm_backward (weight)");
  }
}
/// out [N, C] = rows of the table's shard [v0, v0 + Vl) (zero rows for other tokens). The
/// ids must have been checked on the host (cpu::check_tokens) before they were copied.
inline void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, std::int64_t N, std::int64_t v0,
                              std::int64_t Vl, std::int64_t C, cudaStream_t s = nullptr) {
  TESSERA_LAUNCH(detail::blocks_for(N * C), detail::threads, 0, s, detail::embedding_forward_k)(
      out, tokens, wte, N, v0, Vl, C);
  detail::launched("cuda::embedding_forward");
}
/// ACCUMULATES dwte's shard rows from dout [N, C] (deterministic: the CPU's order and bits).
/// The rows split into parts by their index's low bits, so that C x parts threads (about 2^18)
/// share the work.
inline void embedding_backward(float* dwte, const float* dout, const std::int32_t* tokens, std::int64_t N,
                               std::int64_t v0, std::int64_t Vl, std::int64_t C, cudaStream_t s = nullptr) {
  if (C <= 0) return;
  std::int64_t parts = 1;
  while (parts < 64 && C * parts * 2 <= (std::int64_t{1} << 18)) parts *= 2;
  TESSERA_LAUNCH(detail::blocks_for(C * parts), detail::threads, 0, s, detail::embedding_backward_k)(
      dwte, dout, tokens, N, v0, Vl, C, parts);
  detail::launched("cuda::embedding_backward");
}

}  // namespace tessera::cuda
