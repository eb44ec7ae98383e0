// tessera/model/cuda_workspace.hpp: the device memory the CUDA kernel backends keep for a
// training step of one rank's Llama besides its tensors -- their scratch, grown to the largest
// call and kept, and cuBLASLt's workspace -- as host arithmetic (no CUDA needed), for the
// memory estimate of a GPU (device_llama<K>::workspace_bytes_for, train::device_memory_problem).
//
//   const auto w = tessera::cuda::llama_workspace(dims_of(cfg, shard, B, T), true, true);
//   w.total();   // bytes: cuda_bf16_kernels with the tensor-core attention
//
// What each part follows (kernels/cuda/backend.cuh and the headers it includes):
//   blas       the cuBLASLt handle's workspace (cuda::blas, 32 MiB), one per host thread;
//   scratch    cuda_kernels' float scratch: attention's D (B x heads x T), the per-token losses
//              (N), with Float8 linears their two scale buffers (the largest of N, C and OC
//              over those linears), and RMSNorm's weight-gradient partial sums (one row of D
//              per 256 rows);
//   operands   cuda_bf16_kernels' three bf16 slots of rounded GEMM operands, each as large as
//              the largest operand it holds over the linears that are not Float8 and the output
//              layer (slot 0: the forward's input or the backward's output gradient, slot 1: the
//              forward's weight or the backward's input, slot 2: the backward's weight);
//   kept       the bf16 copies of the weights a model keeps (kernels/rounded_weights.hpp:
//              device_llama's, all of its linears that are not Float8 and the output layer;
//              a parallel runtime's, those computed on their stored blocks:
//              memory_estimate::kept_weights), `kept_weights` elements, which then never
//              reach slot 2 or slot 1 as weights;
//   attention  the tensor-core attention's bf16 staging of k and v (KV heads) and q and dout
//              (query heads), T padded to whole tiles of 64 (attention_tc.cuh: buffers 0, 2, 3,
//              5; buffer 3 holds v's transposed tiles in the forward and q's rows in the
//              backward); or, where cuDNN's attention runs (TESSERA_ATTENTION=cudnn;
//              `cudnn_attention`: its workspace's bytes, K::cudnn_attention_workspace), its
//              bf16 buffers (attention_cudnn.cuh: q, out, dout, dq and k, v, dk, dv) and that
//              workspace -- and then no D in the scratch (cuDNN computes its own).
// Not counted: Float8's amax partials (at most 1,024 floats for a tensorwise amax, a row of
// the operand's columns per 256 of its rows for a column amax), the gradient norm's per-block
// sums (at most 1,024 doubles, freed at once), and the turns of the fused dq path
// (TESSERA_DQ_PATH=fused). gpu.cuda_llama checks the estimate against the tracked peak.
#pragma once

#include <algorithm>
#include <cstdint>

#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_float8.hpp>
#include <tessera/model/llama_shard.hpp>

namespace tessera::cuda {

/// cuBLASLt's workspace per handle (cuda::blas's default).
inline constexpr std::int64_t blas_workspace_bytes = std::int64_t{32} << 20;

/// Whether the tensor-core attention takes head dim hd (on sm_80 and newer; else the f32
/// kernels run, with no staging): attention_tc.cuh's with_head_dim list, for host code that
/// cannot include it (the CUDA backends ask tc_attention_supported itself).
constexpr bool tc_attention_head_dim(std::int64_t hd) { return hd == 16 || hd == 32 || hd == 64 || hd == 128; }

/// The parts of llama_workspace, in bytes.
struct workspace_bytes {
  std::int64_t blas = 0, scratch = 0, operands = 0, attention = 0, kept = 0;
  constexpr std::int64_t total() const { return blas + scratch + operands + attention + kept; }
};

/// What a backend keeps for a training step of a Llama of dims d: cuda_kernels
/// (bf16_operands false), cuda_bf16_kernels (true; tc_attention: the tensor-core attention
/// runs, its head dim and the GPU allow it); `kept_weights`: with bf16 operands, the elements of
/// the rounded weights the model keeps (device_llama: bf16_weight_elements of all its blocks; a
/// parallel runtime's: memory_estimate::kept_weights), 0 when it rounds them for each GEMM;
/// `cudnn_attention`: with bf16 operands, the bytes of cuDNN's workspace where its attention
/// runs instead of the tensor-core kernels (K::cudnn_attention_workspace), else -1.
constexpr workspace_bytes llama_workspace(const llama_dims& d, bool bf16_operands, bool tc_attention,
                                          std::int64_t kept_weights = 0,
                                          std::int64_t cudnn_attention = -1) {
  const std::int64_t N = d.N(), D = d.D;
  workspace_bytes w;
  w.blas = blas_workspace_bytes;
  std::int64_t f8_scales = 0;  // floats of each of the Float8 linears' two scale buffers
  std::int64_t s0 = 0, s1 = 0, s2 = 0;  // bf16 operand slots
  const bool kept = bf16_operands && kept_weights > 0;  // every linear's weight is kept, or none is
  const auto bf16_linear = [&](std::int64_t C, std::int64_t OC) {
    s0 = std::max({s0, N * C, N * OC});
    s1 = std::max({s1, kept ? 0 : OC * C, N * C});
    s2 = std::max(s2, kept ? 0 : OC * C);
  };
  for (param_role r : block_linears) {
    const auto [C, OC] = block_linear_features(r, d);
    if (d.f8.covers(r))
      f8_scales = std::max({f8_scales, N, C, OC});
    else
      bf16_linear(C, OC);
  }
  bf16_linear(D, d.Vl);  // the output layer
  const std::int64_t norm_partials = (d.Nr() + 255) / 256 * D;
  const bool cudnn = bf16_operands && cudnn_attention >= 0;
  w.scratch = 4 * ((cudnn ? 0 : d.B * d.heads * d.T) + N + 2 * f8_scales + norm_partials);
  if (bf16_operands) w.operands = 2 * (s0 + s1 + s2);
  if (kept) w.kept = 2 * kept_weights;
  if (cudnn) {
    const std::int64_t kv = d.B * d.T * d.Hk(), q = d.B * d.T * d.Hq();
    w.attention = 2 * (4 * q + 4 * kv) + (cudnn_attention + 3) / 4 * 4;  // the workspace in floats
  } else if (bf16_operands && tc_attention && tc_attention_head_dim(d.hd)) {
    const std::int64_t Tp = (d.T + 63) / 64 * 64, kv = d.B * Tp * d.Hk(), q = d.B * Tp * d.Hq();
    w.attention = 2 * (2 * kv + std::max(kv, q) + q);
  }
  return w;
}

}  // namespace tessera::cuda
