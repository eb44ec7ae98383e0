// tessera/kernels/cuda/ring_attention.cuh: context parallel's attention kernels on the GPU,
// with cpu/ring_attention.hpp's interface and layouts -- attention of a rank's queries
// against one block of keys and values under the mask of the tokens' global positions (and
// document ids), the log-sum-exp merge of partial outputs, and the block backward:
//   q, out_b, dq, dout [B, Tq, NH, HD];  k, v, dk, dv [B, Tk, NKV, HD];  lse [B, NH, Tq]
// The token spans' positions and document ids are in device memory.
// tessera-requires: cuda (compiled by nvcc: include from a .cu translation unit)
//
// The kernels are attention.cuh's (device code in attention_kernels.cuh: one thread per query row, or per key row for dk and dv;
// key or query rows streamed through shared memory; no atomics) under the spans' mask
// (span_mask) in place of the causal one: key j is seen by query i when kpos[j] <= qpos[i] and, with
// documents, kdoc[j] == qdoc[i]. A row that sees no key of the block gets out 0 and lse
// -inf, as on the CPU. The block backward ACCUMULATES dq, dk, dv (the blocks of every rank
// add up), as the CPU's does. A thread block skips a tile of keys (forward, dq) or queries
// (dk, dv) that none of its rows sees (attention.cuh's tile_needed: each row tests the tile's
// 32 positions and document ids, then one __syncthreads_or) -- the CPU kernel's tile skipping
// by bounds, decided per thread block of 64 rows against tiles of 32; skipped tiles add
// nothing, so the results are those of visiting every tile.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/ring_attention.hpp>
#include <tessera/kernels/cuda/attention.cuh>
#include <tessera/kernels/cuda/attention_kernels.cuh>
#include <tessera/kernels/cuda/attention_masks.cuh>
#include <tessera/kernels/cuda/launch.cuh>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/kernels/pointwise.hpp>

namespace tessera::cuda {

/// out_b [B, Tq, NH, HD], lse_b [B, NH, Tq] of queries `qs` against block `ks`, as
/// cpu::attention_block_forward (spans in device memory).
inline void attention_block_forward(float* out_b, float* lse_b, const float* q, const float* k, const float* v,
                                    const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                    std::int64_t NH, std::int64_t NKV, std::int64_t HD, cudaStream_t s = nullptr) {
  check(B > 0 && qs.n > 0 && ks.n > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_block_forward: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::with_head_dim(HD, "cuda::attention_block_forward", [&]<int D>() {
    detail::launch_forward<D>(out_b, lse_b, q, k, v, detail::mask_of(qs, ks), B, qs.n, ks.n, NH, NKV, scale, s);
  });
  detail::launched("cuda::attention_block_forward");
}

/// Folds (out_b, lse_b) into (out, lse), as cpu::attention_merge.
inline void attention_merge(float* out, float* lse, const float* out_b, const float* lse_b, std::int64_t B,
                            std::int64_t Tq, std::int64_t NH, std::int64_t HD, cudaStream_t s = nullptr) {
  TESSERA_LAUNCH(detail::blocks_for(B * NH * Tq), detail::threads, 0, s, detail::merge_k)(
      out, lse, out_b, lse_b, B, Tq, NH, HD);
  detail::launched("cuda::attention_merge");
}

/// D [B, NH, Tq] = rowsum(dout . out), as cpu::attention_delta.
inline void attention_delta(float* D, const float* dout, const float* out, std::int64_t B, std::int64_t Tq,
                            std::int64_t NH, std::int64_t HD, cudaStream_t s = nullptr) {
  detail::with_head_dim(HD, "cuda::attention_delta", [&]<int Dm>() {
    TESSERA_LAUNCH(detail::attention_delta_blocks(B * NH * Tq), detail::threads, 0, s, detail::attention_delta_k<Dm>)(
        D, dout, out, B, Tq, NH);
  });
  detail::launched("cuda::attention_delta");
}

/// The block's share of the backward, ACCUMULATED into dq, dk, dv, as
/// cpu::attention_block_backward (spans in device memory).
inline void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                     const float* k, const float* v, const float* lse, const float* D,
                                     const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                     std::int64_t NH, std::int64_t NKV, std::int64_t HD, cudaStream_t s = nullptr) {
  check(B > 0 && qs.n > 0 && ks.n > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_block_backward: bad sizes (NH must be a multiple of NKV)");
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  detail::with_head_dim(HD, "cuda::attention_block_backward", [&]<int Dm>() {
    detail::launch_backward<Dm, true>(dq, dk, dv, dout, q, k, v, lse, D, detail::mask_of(qs, ks), B, qs.n, ks.n, NH,
                                      NKV, scale, s);
  });
  detail::launched("cuda::attention_block_backward");
}

}  // namespace tessera::cuda
