// tessera/kernels/cuda/backend.cuh: `cuda_kernels`, the kernel backend (kernels/backend.hpp)
// of the current CUDA device: device memory (cuda_space) and the CUDA kernels, with the CPU
// kernels' signatures, so that the Llama's parts run on a GPU unchanged (model/device_llama.hpp).
// tessera-requires: cuda (compiled by nvcc: include from a .cu translation unit)
//
// Everything is queued on the legacy default stream, in order; the host waits where it
// reads a result (a loss, a count, a norm) and in synchronize(). The GEMMs go through one
// cuBLASLt handle per host thread (cuda::blas, f32 operands and accumulation). Attention's
// backward, the per-token losses and the Float8 linears' scales use scratch that grows to the
// largest batch seen, per host thread. The Float8 linears run on the FP8 tensor cores where
// cuBLASLt can (kernels/cuda/float8_linear.cuh). Loss parallel's vocabulary-parallel
// cross-entropy is kernels/cuda/cross_entropy.cuh's.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cuda/attention.cuh>
#include <tessera/kernels/cuda/attention_cudnn.cuh>
#include <tessera/kernels/cuda/attention_tc.cuh>
#include <tessera/kernels/cuda/cross_entropy.cuh>
#include <tessera/kernels/cuda/float8_linear.cuh>
#include <tessera/kernels/cuda/gemm.hpp>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/cuda/ring_attention.cuh>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

struct cuda_kernels : composed_feed_forward<cuda_kernels>, composed_linears<cuda_kernels>, space_transfers<cuda_space> {
  static constexpr std::string_view name = "cuda";
  static constexpr bool float8 = true;
  static constexpr bool vocab_parallel = true;
  /// What the memory estimate of a GPU adds for this backend (model/cuda_workspace.hpp: its
  /// scratch and cuBLASLt's workspace): bf16 operand slots (cuda_bf16_kernels), and whether
  /// the tensor-core attention, with its staging, runs at head dim hd.
  static constexpr bool device_workspace = true;
  static constexpr bool bf16_operands = false;
  static bool tc_attention(std::int64_t) { return false; }
  /// The bytes of cuDNN's workspace when its attention runs this backend's causal attention
  /// at these sizes (cuda_bf16_kernels under TESSERA_ATTENTION=cudnn), else -1.
  static std::int64_t cudnn_attention_workspace(std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                                std::int64_t) {
    return -1;
  }

  static void add(float* y, const float* a, const float* b, std::int64_t n) { cuda::add(y, a, b, n); }

  static void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, std::int64_t N, std::int64_t C,
                              float eps) {
    cuda::rmsnorm_forward(out, rstd, inp, w, N, C, eps);
  }
  static void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                               const float* rstd, std::int64_t N, std::int64_t C) {
    cuda::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C);
  }
  static void matmul_forward(float* out, const float* inp, const float* w, std::int64_t N, std::int64_t C,
                             std::int64_t OC) {
    cuda::matmul_forward(blas(), out, inp, w, N, C, OC);
  }
  static void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                              std::int64_t N, std::int64_t C, std::int64_t OC, bool write_dinp = false) {
    const bool write_dw = writes_gradient<cuda_kernels>(dw, OC * C);  // a pending gradient (pending_gradients.hpp)
    cuda::matmul_backward(blas(), dinp, dw, dout, inp, w, N, C, OC, write_dinp, write_dw);
  }
  static void rope_forward(float* out, const float* inp, const float* cos, const float* sin, std::int64_t B,
                           std::int64_t T, std::int64_t NH, std::int64_t HD) {
    cuda::rope_apply(out, inp, cos, sin, B, T, NH, HD, false);
  }
  static void rope_backward(float* dinp, const float* dout, const float* cos, const float* sin, std::int64_t B,
                            std::int64_t T, std::int64_t NH, std::int64_t HD) {
    cuda::rope_apply(dinp, dout, cos, sin, B, T, NH, HD, true);
  }
  static void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, std::int64_t B,
                                std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_forward(out, lse, q, k, v, B, T, NH, NKV, HD);
  }
  static void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* lse, std::int64_t B, std::int64_t T,
                                 std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, scratch<float>(0, B * NH * T), B, T, NH, NKV, HD);
  }
  /// Context parallel's attention (cuda/ring_attention.cuh), as cpu_kernels' (spans in device
  /// memory).
  static void attention_block_forward(float* out_b, float* lse_b, const float* q, const float* k, const float* v,
                                      const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                      std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_block_forward(out_b, lse_b, q, k, v, qs, ks, B, NH, NKV, HD);
  }
  static void attention_merge(float* out, float* lse, const float* out_b, const float* lse_b, std::int64_t B,
                              std::int64_t Tq, std::int64_t NH, std::int64_t HD) {
    cuda::attention_merge(out, lse, out_b, lse_b, B, Tq, NH, HD);
  }
  static void attention_delta(float* D, const float* dout, const float* out, std::int64_t B, std::int64_t Tq,
                              std::int64_t NH, std::int64_t HD) {
    cuda::attention_delta(D, dout, out, B, Tq, NH, HD);
  }
  static void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                       const float* k, const float* v, const float* lse, const float* D,
                                       const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                       std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_block_backward(dq, dk, dv, dout, q, k, v, lse, D, qs, ks, B, NH, NKV, HD);
  }
  static void swiglu_forward(float* out, const float* h1, const float* h3, std::int64_t n) {
    cuda::swiglu_forward(out, h1, h3, n);
  }
  static void swiglu_backward(float* dh1, float* dh3, const float* dout, const float* h1, const float* h3,
                              std::int64_t n) {
    cuda::swiglu_backward(dh1, dh3, dout, h1, h3, n);
  }
  /// The ids are device memory, checked on the host before they were copied (device_llama).
  static void embedding_forward(float* out, const std::int32_t* ids, const float* table, std::int64_t N,
                                std::int64_t, std::int64_t v0, std::int64_t Vl, std::int64_t C) {
    cuda::embedding_forward(out, ids, table, N, v0, Vl, C);
  }
  static void embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, std::int64_t N,
                                 std::int64_t, std::int64_t v0, std::int64_t Vl, std::int64_t C) {
    cuda::embedding_backward(dtable, dout, ids, N, v0, Vl, C);
  }
  /// Copies the targets to the host and counts them there (N ids).
  static std::int64_t count_targets(const std::int32_t* targets, std::int64_t N, std::int64_t V) {
    std::vector<std::int32_t> h(static_cast<std::size_t>(N));
    to_host(h.data(), targets, N);
    return cpu::count_targets(h.data(), N, V);
  }
  /// Without a backward the gradient goes to scratch of N x V floats.
  static float cross_entropy_forward(const float* logits, const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                     std::int64_t count) {
    tensor<float, cuda_space> d({N * V});
    return cross_entropy_forward_backward(d.data(), logits, targets, N, V, count, 0.0f);
  }
  /// `count`: count_targets' (the mean's denominator).
  static float cross_entropy_forward_backward(float* dlogits, const float* logits, const std::int32_t* targets,
                                              std::int64_t N, std::int64_t V, std::int64_t count, float grad_scale) {
    float* losses = scratch<float>(1, N);
    cuda::cross_entropy_forward_backward(dlogits, losses, logits, targets, N, V, count, grad_scale);
    return cuda::mean_loss(losses, N, count);
  }
  static void ce_shard_row_max(float* rowmax, const float* logits, std::int64_t N, std::int64_t Vl) {
    cuda::ce_shard_row_max(rowmax, logits, N, Vl);
  }
  static void ce_shard_row_stats(float* stats, const float* logits, const float* rowmax, const std::int32_t* targets,
                                 std::int64_t N, std::int64_t v0, std::int64_t Vl) {
    cuda::ce_shard_row_stats(stats, logits, rowmax, targets, N, v0, Vl);
  }
  static float ce_shard_finish(float* dlogits, const float* logits, const float* rowmax, const float* stats,
                               const std::int32_t* targets, std::int64_t N, std::int64_t /*V*/, std::int64_t v0,
                               std::int64_t Vl, std::int64_t count, float scale) {
    float* losses = scratch<float>(1, N);
    cuda::ce_shard_finish(dlogits, losses, logits, rowmax, stats, targets, N, v0, Vl, scale);
    return cuda::mean_loss(losses, N, count);
  }
  template <class Reduce>
  static void f8_matmuls_forward(const float* inp, std::int64_t N, std::int64_t C, std::span<const linear_out> ls,
                                 const cpu::f8_linear_casts& c, float* a, float* b, cpu::f8_split split,
                                 Reduce&& reduce) {
    cuda::f8_matmuls_forward<cuda_kernels>(f8_workspace_for(N, C, widest(ls)), inp, N, C, ls, c, a, b, split, reduce);
  }
  /// The weight gradients pending in the active store (pending_gradients.hpp) are written.
  template <class Reduce>
  static void f8_matmuls_backward(float* dinp, const float* inp, std::int64_t N, std::int64_t C,
                                  std::span<const linear_grad> ls, const cpu::f8_linear_casts& c, float* a, float* b,
                                  cpu::f8_split split, Reduce&& reduce, bool write_dinp = false) {
    cuda::f8_matmuls_backward<cuda_kernels>(f8_workspace_for(N, C, widest(ls)), dinp, inp, N, C, ls, c, a, b, split,
                                            reduce, write_dinp, writes_gradient<cuda_kernels>);
  }
  /// Float8's FP8 all-gather of a weight block, as cpu_kernels' (device memory throughout).
  static void abs_max(float* amax, const float* x, std::int64_t n) {
    cuda::f8_amax(amax, x, 1, n, cpu::f8_granularity::tensorwise);
  }
  static void f8_amax(float* amax, const float* x, std::int64_t rows, std::int64_t cols, cpu::f8_granularity g) {
    cuda::f8_amax(amax, x, rows, cols, g);
  }
  static void f8_quantize(std::uint8_t* codes, const float* x, const float* scale, std::int64_t n, cpu::f8_cast c) {
    cuda::f8_quantize(codes, x, scale, 1, n, c);
  }
  static void f8_dequantize(float* out, const std::uint8_t* codes, const float* scale, std::int64_t n,
                            cpu::f8_cast c) {
    cuda::f8_dequantize(out, codes, scale, 1, n, c);
  }
  static void adamw_update(float* p, const float* g, float* m, float* v, std::int64_t n, std::int64_t step,
                           const cpu::adamw_config& cfg) {
    cuda::adamw_update(p, g, m, v, n, cpu::adamw_step_scalars(step, cfg));
  }
  static double sum_of_squares(const float* g, std::int64_t n) { return cuda::sum_of_squares(g, n); }
  static void to_bf16(bf16* y, const float* x, std::int64_t n) { cuda::to_bf16(y, x, n); }
  static void from_bf16(float* y, const bf16* x, std::int64_t n) { cuda::from_bf16(y, x, n); }
  static void scale_inplace(float* g, std::int64_t n, float s) { cuda::scale_inplace(g, n, s); }

  /// The MFU denominator of this rank's GPU: a measured cuBLASLt f32 GEMM peak (no TF32).
  static double gemm_peak_flops() { return cuda::gemm_peak_flops(blas()); }

  /// This host thread's cuBLASLt handle (on the default stream).
  static cuda::blas& blas() {
    thread_local cuda::blas b;
    return b;
  }
  /// Frees this host thread's scratch buffers (f32 and bf16, the tensor-core attention's
  /// staging, cuDNN's attention's buffers and workspace; the next call that needs one allocates
  /// it again): what a step's memory estimate counts as the backend's scratch
  /// (model/cuda_workspace.hpp) belongs to the steps run since. Then the current device's
  /// cached blocks go back to CUDA (cuda_space::release_cached).
  static void release_scratch() {
    synchronize();  // queued kernels may still read them
    for (auto& b : scratch_slots<float>()) b = {};
    for (auto& b : scratch_slots<bf16>()) b = {};
    for (auto& b : cuda::detail::tc::staging_buffers()) b = {};  // the tensor-core attention's
    cuda::release_cudnn_attention_buffers();
    cuda_space::release_cached();  // and the device's freed blocks back to CUDA (what the next row sees as free)
  }

 protected:
  /// Scratch buffer `i` of this host thread, at least n elements of T (grown, never shrunk).
  template <class T>
  static T* scratch(int i, std::int64_t n) {
    tensor<T, cuda_space>& b = scratch_slots<T>()[static_cast<std::size_t>(i)];
    if (static_cast<std::int64_t>(b.numel()) < n) {
      synchronize();  // the old buffer may still be read by queued kernels
      b = tensor<T, cuda_space>({n});
    }
    return b.data();
  }
  template <class T>
  static std::array<tensor<T, cuda_space>, 5>& scratch_slots() {
    thread_local std::array<tensor<T, cuda_space>, 5> bufs;
    return bufs;
  }
  /// The widest OC of a group (its workspace holds every linear's scales: none re-allocates it).
  template <class L>
  static std::int64_t widest(std::span<const L> ls) {
    std::int64_t w = 0;
    for (const L& l : ls) w = std::max(w, l.OC);
    return w;
  }
  /// The Float8 linears' GEMM handle and scales (float scratch slots 2 and 3).
  static cuda::f8_workspace f8_workspace_for(std::int64_t N, std::int64_t C, std::int64_t OC) {
    const std::int64_t n = std::max({N, C, OC});
    return {&blas(), scratch<float>(2, n), scratch<float>(3, n)};
  }
};
static_assert(kernel_backend<cuda_kernels>);

/// cuda_kernels with bf16 GEMM operands (kernels/backend.hpp): each linear's f32 inputs are
/// rounded into bf16 scratch (cuda::to_bf16) and multiplied on the tensor cores with f32
/// accumulation and output (cuBLASLt); attention (causal, and context parallel's blocks)
/// runs on the tensor cores too, q, k, v and dout rounded to bf16 as they are loaded
/// (cuda/attention_tc.cuh). cpu_bf16_kernels computes the same on the host, except that it
/// keeps attention's probabilities in f32. The Float8 linears are cuda_kernels' (FP8 GEMMs;
/// an emulated one multiplies in f32), as cpu_bf16_kernels' are cpu_kernels'.
struct cuda_bf16_kernels : cuda_kernels,
                           composed_feed_forward<cuda_bf16_kernels>,
                           bf16_operand_linears<cuda_bf16_kernels> {
  static constexpr std::string_view name = "cuda-bf16";
  static constexpr bool bf16_operands = true;
  /// The GEMMs' operand type, and rounding into it (kept weights: kernels/rounded_weights.hpp).
  using operand_type = bf16;
  static void round_into(bf16* y, const float* x, std::int64_t n) { cuda::to_bf16(y, x, n); }
  /// AdamW that also writes the new parameters rounded into r, in the same pass.
  static void adamw_update_rounded(float* p, const float* g, float* m, float* v, std::int64_t n, std::int64_t step,
                                   const cpu::adamw_config& cfg, bf16* r) {
    cuda::adamw_update(p, g, m, v, n, cpu::adamw_step_scalars(step, cfg), nullptr, r);
  }
  static bool tc_attention(std::int64_t hd) { return cuda::tc_attention_supported(hd); }
  using composed_feed_forward<cuda_bf16_kernels>::feed_forward_forward;
  using composed_feed_forward<cuda_bf16_kernels>::feed_forward_backward;
  using bf16_operand_linears<cuda_bf16_kernels>::matmul_forward;
  using bf16_operand_linears<cuda_bf16_kernels>::matmul_backward;
  using bf16_operand_linears<cuda_bf16_kernels>::matmuls_forward;
  using bf16_operand_linears<cuda_bf16_kernels>::matmuls_backward;

  /// The MFU denominator: a measured cuBLASLt GEMM peak with bf16 operands (the GEMMs this
  /// backend runs).
  static double gemm_peak_flops() { return cuda::gemm_peak_flops<bf16>(blas()); }
  static std::int64_t cudnn_attention_workspace(std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                                                std::int64_t HD) {
    if (cuda::default_attention_library() != cuda::attention_library::cudnn) return -1;
    return cuda::cudnn_attention_workspace(B, T, NH, NKV, HD);
  }
  /// The causal attention: tessera's tensor-core kernels, or cuDNN's fused attention when
  /// TESSERA_ATTENTION=cudnn (cuda/attention_library.hpp, cuda/attention_cudnn.cuh).
  static void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, std::int64_t B,
                                std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    if (cuda::default_attention_library() == cuda::attention_library::cudnn)
      return cuda::attention_forward_cudnn(out, lse, q, k, v, B, T, NH, NKV, HD);
    cuda::attention_forward_bf16(out, lse, q, k, v, B, T, NH, NKV, HD);
  }
  static void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* lse, std::int64_t B, std::int64_t T,
                                 std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    if (cuda::default_attention_library() == cuda::attention_library::cudnn)
      return cuda::attention_backward_cudnn(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HD);
    cuda::attention_backward_bf16(dq, dk, dv, dout, q, k, v, out, lse, scratch<float>(0, B * NH * T), B, T, NH, NKV,
                                  HD);
  }
  static void attention_block_forward(float* out_b, float* lse_b, const float* q, const float* k, const float* v,
                                      const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                      std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_block_forward_bf16(out_b, lse_b, q, k, v, qs, ks, B, NH, NKV, HD);
  }
  static void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                       const float* k, const float* v, const float* lse, const float* D,
                                       const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                       std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_block_backward_bf16(dq, dk, dv, dout, q, k, v, lse, D, qs, ks, B, NH, NKV, HD);
  }
 private:
  friend bf16_operand_linears<cuda_bf16_kernels>;
  /// The GEMMs on rounded operands (bf16_operand_linears): cuBLASLt's with bf16 operands.
  static void operand_forward(float* out, const bf16* inp, const bf16* w, std::int64_t N, std::int64_t C,
                              std::int64_t OC) {
    cuda::matmul_forward<bf16>(blas(), out, inp, w, N, C, OC);
  }
  static void operand_backward(float* dinp, float* dw, const bf16* dout, const bf16* inp, const bf16* w,
                               std::int64_t N, std::int64_t C, std::int64_t OC, bool write_dinp) {
    cuda::matmul_backward<bf16>(blas(), dinp, dw, dout, inp, w, N, C, OC, write_dinp,
                                writes_gradient<cuda_bf16_kernels>(dw, OC * C));
  }
  /// x rounded to bf16 in this thread's bf16 scratch slot i.
  static const bf16* operand(const float* x, std::int64_t n, int i) {
    bf16* y = cuda_kernels::scratch<bf16>(i, n);
    round_into(y, x, n);
    return y;
  }
};
static_assert(kernel_backend<cuda_bf16_kernels>);

}  // namespace tessera
