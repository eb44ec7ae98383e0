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
// FlashAttention-2's order and register reuse (Dao, arXiv 2307.08691) on mma.sync's
// m16n8k16 bf16 tensor-core instruction: a block of 4 warps owns 64 rows (warp w rows
// 16w..16w+15) and streams tiles of 64 rows of the other side through shared memory. The
// streamed operands are staged once per call (stage_k): rounded to bf16 as rows [B, Tp, N,
// HD] and, for the forward's V, as per-head transposes [B, N, HD, Tp], Tp the length rounded
// up to a whole tile; tiles arrive by cp.async through two shared-memory stages (the next
// one's copies in flight while this one's products run), fragments by ldmatrix.x4 -- the
// backward's B operands (K, dO, Q as they multiply dS, P^T, dS^T) by ldmatrix.x4.trans from
// the row tiles (attention_tc_tiles.cuh).
//   forward  Q's fragments, S = Q K^T, the online softmax (the 4 lanes of a row reduce its
//            max with shuffles; ex2.approx for the exponentials), P and O stay in
//            registers: S's accumulators, rounded to bf16, are P's A fragments for O = O *
//            corr + P V; three blocks an SM. forward_path::wide (TESSERA_ATTENTION_FORWARD=wide;
//            attention_tc_wide.cuh) runs 128 rows a block instead, two row tiles a warp, each
//            K and V fragment feeding both (Q read from shared memory each tile): the same
//            bits; not yet measured on a GPU;
//   dk, dv   per key tile and each query head of the group, 32 queries a step: S^T = K Q^T,
//            dP^T = V dO^T, dv += P^T dO and dk += dS^T Q, the same way; and with
//            dq_path::fused dq: the step's dS^T through shared memory, dS K added to dq's 32
//            rows in a fixed order of key blocks, each block waiting for its turn -- 5
//            products in all, as FlashAttention-2 (whose dq atomics add in no fixed order);
//            deterministic, as FlashAttention-3's deterministic mode;
//   dq       (dq_path::separate, the default) its own kernel: S = Q K^T and dP = dO V^T
//            again, dS = P (dP - D) rounded to bf16 as the A fragments of dq += dS K -- 7
//            products in all, every row of dq written by one warp.
// On an H200 (2026-11-29, 8,192 tokens, 32 / 8 heads of 128) the fused backward took 23.9 ms
// and the separate one 10.6: the turns cost more than the two products they save, so
// `separate` is the default.
// A tile every row of the block sees whole skips the per-element mask (Mask::sees_all).
// The mask is a type, as in attention.cuh (causal_mask, span_mask with tile skipping).
// Needs sm_80 or newer and a head dim of 16, 32, 64 or 128; the entry points below fall back
// to the f32 kernels elsewhere (tc_attention_supported says which). Shared memory at head dim
// 128: 70 KiB (forward), 108 KiB (dk, dv and dq fused; 103 without dq), 103.5 KiB (dq) a
// block. The staging buffers and the dq turns are this host thread's (grown to the largest
// call, never shrunk): calls from one host thread are ordered on one stream.
// The device code is attention_tc_kernels.cuh, which the host tests also run through a CUDA
// emulation that executes mma.sync and ldmatrix on the warp's registers in the PTX ISA's
// layouts (tests/kernels/test_attention_emulated.cpp: against references exact about where
// the kernels round; under ThreadSanitizer and ASan in CI); it runs blocks one after the
// other in launch order, so a block that waits for a turn no earlier block passed is an
// error there (on a GPU, a hang).
// Not yet: wgmma and TMA (Hopper's own instructions) -- measured against FlashAttention-2
// and cuDNN in docs/performance.md, "On GPUs". The environment variable TESSERA_DQ_PATH=fused
// makes the fused dq the default (default_dq_path); a block of the fused kernel that waits
// 10 s for its turn stops the kernel with a message that says so (wait_turn,
// attention_tc_tiles.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/ring_attention.hpp>
#include <tessera/kernels/cuda/attention.cuh>
#include <tessera/kernels/cuda/attention_library.hpp>
#include <tessera/kernels/cuda/attention_tc_kernels.cuh>
#include <tessera/kernels/cuda/attention_tc_wide.cuh>
#include <tessera/kernels/cuda/launch.cuh>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/cuda/ring_attention.cuh>
#include <tessera/kernels/pointwise.hpp>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera::cuda {

/// How the tensor-core attention's backward computes dq: `fused` adds it inside the dk/dv
/// kernel in a fixed order of key blocks (5 tensor-core products where dq_k's recomputation of
/// S and dP makes 7; deterministic); `separate` launches dq_k beside dkv_k (every row of dq
/// written by one warp). Both give the same results up to the order of dq's f32 sums; on an
/// H200 `separate` took 10.6 ms where `fused` took 23.9 (docs/performance.md, "On GPUs").
enum class dq_path { fused, separate };

/// The dq_path named by `value` (TESSERA_DQ_PATH's): "fused", "separate", or nullptr or
/// empty for the default, separate; anything else is refused with what to give.
inline dq_path dq_path_named(const char* value) {
  return detail::choice_named<dq_path>(
      "TESSERA_DQ_PATH", value, {{"separate", dq_path::separate}, {"fused", dq_path::fused}},
      "give 'separate' (dq from its own kernel, the default) or 'fused' (dq inside the dk/dv kernel)");
}
/// The path the *_bf16 backwards take when not given one (cuda_bf16_kernels' attention): the
/// environment variable TESSERA_DQ_PATH, read once -- a switch between the two without a
/// rebuild.
inline dq_path default_dq_path() {
  static const dq_path p = dq_path_named(std::getenv("TESSERA_DQ_PATH"));
  return p;
}

/// Which kernel the tensor-core attention's forward runs: `narrow`, forward_k (4 warps of 16
/// rows, 64 rows a block; measured on an H200: 236.7 TFLOP/s at 8B's shapes), or `wide`,
/// forward_wide_k (4 warps of 2 x 16 rows, 128 a block: each K and V fragment feeds both row
/// tiles; attention_tc_wide.cuh; not yet measured on a GPU). The same results, bit for bit.
enum class forward_path { narrow, wide };

/// The forward_path named by `value` (TESSERA_ATTENTION_FORWARD's): "narrow", "wide", or
/// nullptr or empty for the default, narrow; anything else is refused with what to give.
inline forward_path forward_path_named(const char* value) {
  return detail::choice_named<forward_path>(
      "TESSERA_ATTENTION_FORWARD", value, {{"narrow", forward_path::narrow}, {"wide", forward_path::wide}},
      "give 'narrow' (64 rows a block, the default) or 'wide' (128 rows a block, two row tiles a warp)");
}
/// The forward the *_bf16 forwards run when not given one (cuda_bf16_kernels' attention): the
/// environment variable TESSERA_ATTENTION_FORWARD, read once, or what set_default_forward_path
/// set since.
inline forward_path default_forward_path() {
  return detail::setting<forward_path, forward_path_named>("TESSERA_ATTENTION_FORWARD");
}
/// Sets the default forward (bench_gpu_llama times a step both ways in one process); not
/// synchronized: set it before work is launched from several host threads.
inline void set_default_forward_path(forward_path p) {
  detail::setting<forward_path, forward_path_named>("TESSERA_ATTENTION_FORWARD") = p;
}

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
/// This host thread's bf16 staging buffers (cuda_kernels::release_scratch frees them).
inline tensor<bf16, cuda_space> (&staging_buffers())[7] {
  thread_local tensor<bf16, cuda_space> bufs[7];
  return bufs;
}
/// This host thread's bf16 staging buffer i, at least n elements (detail::grown).
inline bf* staging(int i, std::int64_t n) {
  return reinterpret_cast<bf*>(grown(staging_buffers()[i], n, "tensor-core attention's staging buffers"));
}
/// x [B, T, N, HD] staged for the kernels: its rows (rows_too) in staging buffer i, its
/// transpose (transposed) in buffer i + 1.
template <int HD>
staged stage(const float* x, std::int64_t B, std::int64_t T, std::int64_t N, int i, bool rows_too, bool transposed,
             cudaStream_t st) {
  const std::int64_t Tp = staged_length(T), n = B * Tp * N * HD;
  bf* r = rows_too ? staging(i, n) : nullptr;
  bf* t = transposed ? staging(i + 1, n) : nullptr;
  allow_shared(stage_k<HD>, stage_bytes<HD>);
  TESSERA_LAUNCH(dim3(static_cast<unsigned>(Tp / cols), static_cast<unsigned>(N), static_cast<unsigned>(B)), threads,
                 stage_bytes<HD>, st, stage_k<HD>)(r, t, x, T, Tp, N);
  return {r, t, Tp};
}
template <int HD, class Mask>
void launch_forward(float* out, float* lse, const float* q, const float* k, const float* v, const Mask& mask,
                    std::int64_t B, std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale,
                    forward_path path, cudaStream_t st) {
  const staged ks = stage<HD>(k, B, Tk, NKV, 0, true, false, st), vs = stage<HD>(v, B, Tk, NKV, 2, false, true, st);
  if (path == forward_path::wide) {
    allow_shared(forward_wide_k<HD, Mask>, wide_forward_bytes<HD>);
    TESSERA_LAUNCH(wide_grid(Tq, NH, B), threads, wide_forward_bytes<HD>, st, forward_wide_k<HD, Mask>)(
        out, lse, q, ks, vs, mask, Tq, Tk, NH, NKV, scale);
    return;
  }
  allow_shared(forward_k<HD, Mask>, forward_bytes<HD>);
  TESSERA_LAUNCH(tc_grid(Tq, NH, B), threads, forward_bytes<HD>, st, forward_k<HD, Mask>)(
      out, lse, q, ks, vs, mask, Tq, Tk, NH, NKV, scale);
}
/// This host thread's dq turns (dkv_k's FusedDq), at least n ints: a float buffer's words
/// (tensors hold floating-point element types; the kernel reads and writes them as ints only).
inline int* turns(std::int64_t n) {
  static_assert(sizeof(int) == sizeof(float));
  thread_local tensor<float, cuda_space> buf;
  return reinterpret_cast<int*>(grown(buf, n, "tensor-core attention's dq turns"));
}
template <int HD, bool Accumulate, class Mask>
void launch_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                     const float* v, const float* lse, const float* D, const Mask& mask, std::int64_t B,
                     std::int64_t Tq, std::int64_t Tk, std::int64_t NH, std::int64_t NKV, float scale, dq_path path,
                     cudaStream_t st) {
  // the fused kernel adds dq two floats at a time
  if (path == dq_path::fused && reinterpret_cast<std::uintptr_t>(dq) % 8 != 0) path = dq_path::separate;
  const staged qs = stage<HD>(q, B, Tq, NH, 3, true, false, st), gs = stage<HD>(dout, B, Tq, NH, 5, true, false, st);
  if (path == dq_path::separate) {
    const staged ks = stage<HD>(k, B, Tk, NKV, 0, true, false, st), vs = stage<HD>(v, B, Tk, NKV, 2, true, false, st);
    allow_shared(dq_k<HD, Mask, Accumulate>, dq_bytes<HD>);
    TESSERA_LAUNCH(tc_grid(Tq, NH, B), threads, dq_bytes<HD>, st, dq_k<HD, Mask, Accumulate>)(
        dq, dout, q, ks, vs, lse, D, mask, Tq, Tk, NH, NKV, scale);
    allow_shared(dkv_k<HD, Mask, Accumulate>, dkv_bytes<HD>);
    TESSERA_LAUNCH(tc_grid(Tk, NKV, B), threads, dkv_bytes<HD>, st, dkv_k<HD, Mask, Accumulate>)(
        dk, dv, nullptr, nullptr, gs, qs, k, v, lse, D, mask, Tq, Tk, NH, NKV, scale);
    return;
  }
  const std::int64_t n = B * NH * dq_turns(Tq);
  int* t = turns(n);
  cuda_check(cudaMemsetAsync(t, 0, static_cast<std::size_t>(n) * sizeof(int), st), "cudaMemsetAsync (dq turns)");
  if (!Accumulate && Mask::skips_tiles)  // rows no key block sees get no write
    cuda_check(cudaMemsetAsync(dq, 0, static_cast<std::size_t>(B * Tq * NH * HD) * sizeof(float), st),
               "cudaMemsetAsync (dq)");
  allow_shared(dkv_k<HD, Mask, Accumulate, true>, dkvq_bytes<HD>);
  TESSERA_LAUNCH(tc_grid(Tk, NKV, B), threads, dkvq_bytes<HD>, st, dkv_k<HD, Mask, Accumulate, true>)(
      dk, dv, dq, t, gs, qs, k, v, lse, D, mask, Tq, Tk, NH, NKV, scale);
}
}  // namespace detail::tc

/// Whether the tensor-core kernels run head dim HD on the current device: sm_80 or newer
/// (bf16 WMMA) and HD one of 16, 32, 64, 128. Where not, the *_bf16 functions below run the
/// f32 kernels (exact operands instead of rounded ones).
inline bool tc_attention_supported(std::int64_t HD) {
  return detail::compute_capability() >= 80 && detail::tc::with_head_dim(HD, [&]<int>() {});
}

/// attention_forward with bf16 operands on the tensor cores (the top of this file); `path`:
/// which forward kernel (default_forward_path() when not given).
inline void attention_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v,
                                   std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                                   cudaStream_t s = nullptr, forward_path path = default_forward_path()) {
  if (!tc_attention_supported(HD)) return attention_forward(out, lse, q, k, v, B, T, NH, NKV, HD, s);
  check(B > 0 && T > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_forward_bf16: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::tc::with_head_dim(HD, [&]<int Dm>() {
    detail::tc::launch_forward<Dm>(out, lse, q, k, v, detail::causal_mask{}, B, T, T, NH, NKV, scale, path, s);
  });
  detail::launched("cuda::attention_forward_bf16");
}

/// attention_backward with bf16 operands on the tensor cores; `D` is scratch of B * NH * T
/// floats; `path`: how dq is computed (dq_path; default_dq_path() when not given; a dq not
/// 8-byte aligned takes `separate`).
inline void attention_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                    const float* k, const float* v, const float* out, const float* lse, float* D,
                                    std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                                    cudaStream_t s = nullptr, dq_path path = default_dq_path()) {
  if (!tc_attention_supported(HD)) return attention_backward(dq, dk, dv, dout, q, k, v, out, lse, D, B, T, NH, NKV, HD, s);
  check(B > 0 && T > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_backward_bf16: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  attention_delta(D, dout, out, B, T, NH, HD, s);
  detail::tc::with_head_dim(HD, [&]<int Dm>() {
    detail::tc::launch_backward<Dm, false>(dq, dk, dv, dout, q, k, v, lse, D, detail::causal_mask{}, B, T, T, NH, NKV,
                                           scale, path, s);
  });
  detail::launched("cuda::attention_backward_bf16");
}

/// attention_block_forward (context parallel) with bf16 operands on the tensor cores; `path`
/// as for attention_forward_bf16.
inline void attention_block_forward_bf16(float* out_b, float* lse_b, const float* q, const float* k, const float* v,
                                         const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                         std::int64_t NH, std::int64_t NKV, std::int64_t HD, cudaStream_t s = nullptr,
                                         forward_path path = default_forward_path()) {
  if (!tc_attention_supported(HD)) return attention_block_forward(out_b, lse_b, q, k, v, qs, ks, B, NH, NKV, HD, s);
  check(B > 0 && qs.n > 0 && ks.n > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_block_forward_bf16: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::tc::with_head_dim(HD, [&]<int Dm>() {
    detail::tc::launch_forward<Dm>(out_b, lse_b, q, k, v, detail::mask_of(qs, ks), B, qs.n, ks.n, NH, NKV, scale, path,
                                   s);
  });
  detail::launched("cuda::attention_block_forward_bf16");
}

/// attention_block_backward (context parallel; ACCUMULATES dq, dk, dv) with bf16 operands
/// on the tensor cores; `path` as for attention_backward_bf16.
inline void attention_block_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                          const float* k, const float* v, const float* lse, const float* D,
                                          const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                          std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                                          cudaStream_t s = nullptr, dq_path path = default_dq_path()) {
  if (!tc_attention_supported(HD))
    return attention_block_backward(dq, dk, dv, dout, q, k, v, lse, D, qs, ks, B, NH, NKV, HD, s);
  check(B > 0 && qs.n > 0 && ks.n > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_block_backward_bf16: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::tc::with_head_dim(HD, [&]<int Dm>() {
    detail::tc::launch_backward<Dm, true>(dq, dk, dv, dout, q, k, v, lse, D, detail::mask_of(qs, ks), B, qs.n, ks.n,
                                          NH, NKV, scale, path, s);
  });
  detail::launched("cuda::attention_block_backward_bf16");
}

}  // namespace tessera::cuda
