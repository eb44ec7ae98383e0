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
// The device code is attention_kernels.cuh (which the host tests also run through a CUDA
// emulation); this file launches it. The exponentials are pointwise::fast_exp, the CPU's. Not yet: tensor-core tiles (mma /
// wgmma) and the split of one row over a warp -- the performance work that needs a GPU to
// measure; docs/cuda.md.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cuda/attention_kernels.cuh>
#include <tessera/kernels/cuda/attention_masks.cuh>
#include <tessera/kernels/cuda/launch.cuh>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda {

namespace detail {
/// Calls f.template operator()<HD>() and returns true when HD is one of Dims; false
/// otherwise (the kernels are instantiated for those head dims only).
template <int... Dims, class F>
bool dispatch_head_dim(std::int64_t HD, F&& f) {
  return ((HD == Dims ? (f.template operator()<Dims>(), true) : false) || ...);
}
/// Calls f.template operator()<HD>() for a head dim the f32 kernels take, else throws.
template <class F>
void with_head_dim(std::int64_t HD, const char* who, F&& f) {
  // (256 would need more than the 48 KiB of shared memory a block gets by default)
  if (!dispatch_head_dim<8, 16, 32, 64, 128>(HD, f))
    throw error(std::string(who) + ": head_dim " + std::to_string(HD) +
                " is not one the CUDA attention is built for (8, 16, 32, 64, 128)");
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
  const std::size_t shared = kv_tile_bytes<HD>;
  TESSERA_LAUNCH(attention_grid(Tq, NH, B), attention_rows, shared, s, attention_forward_k<HD, Mask>)(
      out, lse, q, k, v, mask, Tq, Tk, NH, NKV, scale);
}
template <int HD, bool Accumulate, class Mask>
void launch_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                     const float* v, const float* lse, const float* D, const Mask& mask, std::int64_t B,
                     std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale, cudaStream_t s) {
  const std::size_t kv_shared = kv_tile_bytes<HD>;
  TESSERA_LAUNCH(attention_grid(Tq, NH, B), attention_rows, kv_shared, s, attention_dq_k<HD, Mask, Accumulate>)(
      dq, dout, q, k, v, lse, D, mask, Tq, Tk, NH, NKV, scale);
  const std::size_t q_shared = q_tile_bytes<HD>;
  TESSERA_LAUNCH(attention_grid(Tk, NKV, B), attention_rows, q_shared, s, attention_dkv_k<HD, Mask, Accumulate>)(
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
    TESSERA_LAUNCH(detail::attention_delta_blocks(B * NH * T), detail::threads, 0, s, detail::attention_delta_k<Dm>)(
        D, dout, out, B, T, NH);
    detail::launch_backward<Dm, false>(dq, dk, dv, dout, q, k, v, lse, D, detail::causal_mask{}, B, T, T, NH, NKV,
                                       scale, s);
  });
  detail::launched("cuda::attention_backward");
}

}  // namespace tessera::cuda
