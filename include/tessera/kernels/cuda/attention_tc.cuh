// tessera/kernels/cuda/attention_tc.cuh: attention on the tensor cores -- the causal
// attention and context parallel's block kernels of attention.cuh / ring_attention.cuh, with
// their interfaces and layouts, computing with bf16 operands and f32 accumulation:
//   q, out, dq, dout [B, Tq, NH, HD];  k, v, dk, dv [B, Tk, NKV, HD];  lse [B, NH, Tq]
// tessera-requires: cuda (compiled by nvcc: include from a .cu translation unit)
//
// What is rounded: q, k, v and dout to bf16 (nearest even) as they are loaded, and the
// probabilities P and dS = P (dP - D) before they multiply v, dout, k or q. Scores, the
// running max and sum, the softmax's exponentials (pointwise::fast_exp, the CPU's), lse, D
// and every accumulation stay f32. cpu_bf16_kernels (kernels/backend.hpp) rounds the same
// inputs and computes the rest in f32, which is what tests/gpu/test_cuda_attention.cu
// compares against (tolerances there: P's and dS's rounding is the GPU's alone).
// cuda_bf16_kernels runs its attention here (kernels/cuda/backend.cuh).
//
// FlashAttention-2's order (Dao, arXiv 2307.08691) on WMMA 16 x 16 x 16 bf16 fragments: a
// block of 4 warps owns 64 rows (warp w rows 16w..16w+15) and streams tiles of 64 rows of
// the other side through shared memory.
//   forward  S = Q K^T (fragments, stored f32), the online softmax per row (two lanes a
//            row), P as bf16, O = O * corr + P V with O kept f32 in shared memory (a WMMA
//            accumulator's layout is unspecified, so rows are rescaled there);
//   dq       S = Q K^T and dP = dO V^T, dS = P (dP - D) as bf16, dq += dS K in fragments;
//   dk, dv   per key tile and each query head of the group: S^T = K Q^T, dP^T = V dO^T,
//            dv += P^T dO and dk += dS^T Q in fragments.
// dq and (dk, dv) are separate kernels, every output row written by one warp: no atomics,
// deterministic (FlashAttention-2 adds dq with atomics instead and computes S and dP once).
// The mask is a type, as in attention.cuh (causal_mask, span_mask with tile skipping).
// Needs sm_80 or newer and a head dim of 16, 32, 64 or 128; the entry points below fall back
// to the f32 kernels elsewhere (tc_attention_supported says which). Shared memory: up to
// 121 KiB a block at head dim 128 (the kernels opt in to more than 48 KiB).
// The device code is attention_tc_kernels.cuh, which the host tests also run through a CUDA
// emulation (tests/kernels/test_attention_emulated.cpp: against references exact about
// where the kernels round; under ThreadSanitizer and ASan in CI).
// Not yet: mma.sync / wgmma with the softmax in registers, asynchronous copies, a dq
// accumulated by atomics -- the tuning that needs a GPU to measure (docs/cuda.md).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/ring_attention.hpp>
#include <tessera/kernels/cuda/attention.cuh>
#include <tessera/kernels/cuda/attention_tc_kernels.cuh>
#include <tessera/kernels/cuda/launch.cuh>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/cuda/ring_attention.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda {

namespace detail::tc {

/// Calls f.template operator()<HD>() and returns true for a head dim the kernels take
/// (WMMA's k-steps of 16).
template <class F>
bool with_head_dim(std::int64_t HD, F&& f) {
  return dispatch_head_dim<16, 32, 64, 128>(HD, f);
}
template <class Kernel>
void allow_shared(Kernel kernel, std::size_t bytes) {
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "cudaFuncSetAttribute (tensor-core attention's shared memory)");
}
template <int HD, class Mask>
void launch_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Mask& mask,
                    std::int64_t B, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale,
                    cudaStream_t st) {
  allow_shared(forward_k<HD, Mask>, forward_bytes<HD>);
  TESSERA_LAUNCH(attention_grid(Tq, NH, B), threads, forward_bytes<HD>, st, forward_k<HD, Mask>)(
      out, lse, q, k, v, mask, Tq, Tk, NH, NKV, scale);
}
template <int HD, bool Accumulate, class Mask>
void launch_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                     const float* v, const float* lse, const float* D, const Mask& mask, std::int64_t B,
                     std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale, cudaStream_t st) {
  allow_shared(dq_k<HD, Mask, Accumulate>, dq_bytes<HD>);
  TESSERA_LAUNCH(attention_grid(Tq, NH, B), threads, dq_bytes<HD>, st, dq_k<HD, Mask, Accumulate>)(
      dq, dout, q, k, v, lse, D, mask, Tq, Tk, NH, NKV, scale);
  allow_shared(dkv_k<HD, Mask, Accumulate>, dkv_bytes<HD>);
  TESSERA_LAUNCH(attention_grid(Tk, NKV, B), threads, dkv_bytes<HD>, st, dkv_k<HD, Mask, Accumulate>)(
      dk, dv, dout, q, k, v, lse, D, mask, Tq, Tk, NH, NKV, scale);
}
}  // namespace detail::tc

/// Whether the tensor-core kernels run head dim HD on the current device: sm_80 or newer
/// (bf16 WMMA) and HD one of 16, 32, 64, 128. Where not, the *_bf16 functions below run the
/// f32 kernels (exact operands instead of rounded ones).
inline bool tc_attention_supported(std::int64_t HD) {
  return detail::compute_capability() >= 80 && detail::tc::with_head_dim(HD, [&]<int>() {});
}

/// attention_forward with bf16 operands on the tensor cores (the top of this file).
inline void attention_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v,
                                   std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                                   cudaStream_t s = nullptr) {
  if (!tc_attention_supported(HD)) return attention_forward(out, lse, q, k, v, B, T, NH, NKV, HD, s);
  check(B > 0 && T > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_forward_bf16: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::tc::with_head_dim(HD, [&]<int Dm>() {
    detail::tc::launch_forward<Dm>(out, lse, q, k, v, detail::causal_mask{}, B, T, T, NH, NKV, scale, s);
  });
  detail::launched("cuda::attention_forward_bf16");
}

/// attention_backward with bf16 operands on the tensor cores; `D` is scratch of B * NH * T
/// floats.
inline void attention_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                    const float* k, const float* v, const float* out, const float* lse, float* D,
                                    std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                                    cudaStream_t s = nullptr) {
  if (!tc_attention_supported(HD)) return attention_backward(dq, dk, dv, dout, q, k, v, out, lse, D, B, T, NH, NKV, HD, s);
  check(B > 0 && T > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_backward_bf16: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  attention_delta(D, dout, out, B, T, NH, HD, s);
  detail::tc::with_head_dim(HD, [&]<int Dm>() {
    detail::tc::launch_backward<Dm, false>(dq, dk, dv, dout, q, k, v, lse, D, detail::causal_mask{}, B, T, T, NH, NKV,
                                           scale, s);
  });
  detail::launched("cuda::attention_backward_bf16");
}

/// attention_block_forward (context parallel) with bf16 operands on the tensor cores.
inline void attention_block_forward_bf16(float* out_b, float* lse_b, const float* q, const float* k, const float* v,
                                         const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                         std::int64_t NH, std::int64_t NKV, std::int64_t HD, cudaStream_t s = nullptr) {
  if (!tc_attention_supported(HD)) return attention_block_forward(out_b, lse_b, q, k, v, qs, ks, B, NH, NKV, HD, s);
  check(B > 0 && qs.n > 0 && ks.n > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_block_forward_bf16: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::tc::with_head_dim(HD, [&]<int Dm>() {
    detail::tc::launch_forward<Dm>(out_b, lse_b, q, k, v, detail::mask_of(qs, ks), B, qs.n, ks.n, NH, NKV, scale, s);
  });
  detail::launched("cuda::attention_block_forward_bf16");
}

/// attention_block_backward (context parallel; ACCUMULATES dq, dk, dv) with bf16 operands
/// on the tensor cores.
inline void attention_block_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                          const float* k, const float* v, const float* lse, const float* D,
                                          const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                          std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                                          cudaStream_t s = nullptr) {
  if (!tc_attention_supported(HD))
    return attention_block_backward(dq, dk, dv, dout, q, k, v, lse, D, qs, ks, B, NH, NKV, HD, s);
  check(B > 0 && qs.n > 0 && ks.n > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_block_backward_bf16: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::tc::with_head_dim(HD, [&]<int Dm>() {
    detail::tc::launch_backward<Dm, true>(dq, dk, dv, dout, q, k, v, lse, D, detail::mask_of(qs, ks), B, qs.n, ks.n,
                                          NH, NKV, scale, s);
  });
  detail::launched("cuda::attention_block_backward_bf16");
}

}  // namespace tessera::cuda
