// tessera/kernels/cuda/attention_masks.cuh: the masks the CUDA attention kernels take as a
// type -- causal_mask (one sequence) and span_mask (context parallel's block pairs: token
// positions and document ids) --, the block's tile skipping under a mask (tile_needed) and
// the f32 kernels' block shape. Device code shared by attention.cuh, ring_attention.cuh and
// the tensor-core kernels (attention_tc_kernels.cuh).
// tessera-requires: cuda (device code: nvcc, or a host compiler with TESSERA_CUDA_EMULATION
// and tests/support/cuda_emulation.hpp included first -- the host tests of the kernels)
#pragma once

#include <array>

#include <cstdint>

#include <tessera/kernels/cpu/ring_attention.hpp>

namespace tessera::cuda::detail {
inline constexpr int attention_rows = 64;  // rows (threads) per block
inline constexpr int attention_tile = 32;  // streamed rows per shared-memory tile

/// The causal mask of one sequence: query t sees key s when s <= t. The kernels take a mask
/// type: this one, or context parallel's span_mask (below). `key_end` bounds the keys a
/// block of queries needs, `query_begin` the queries a block of keys needs (the causal mask
/// skips the keys after the block's last query and the queries before its first key).
struct causal_mask {
  static constexpr bool skips_tiles = false;  // key_end and query_begin bound it exactly
  __device__ bool sees(std::int64_t t, std::int64_t s) const { return s <= t; }
  /// Whether every query from t on sees every key up to s (the tensor-core kernels then skip
  /// the per-element test).
  __device__ bool sees_all(std::int64_t t, std::int64_t s) const { return s <= t; }
  __device__ std::int64_t key_end(std::int64_t last_query, std::int64_t Tk) const {
    return last_query + 1 < Tk ? last_query + 1 : Tk;
  }
  __device__ std::int64_t query_begin(std::int64_t first_key) const { return first_key; }
};

/// The end of the keys the block of queries [t0, t0 + attention_rows) needs under `mask`.
template <class Mask>
__device__ inline std::int64_t block_key_end(const Mask& mask, std::int64_t t0, std::int64_t Tq, std::int64_t Tk) {
  const std::int64_t last = t0 + attention_rows - 1 < Tq - 1 ? t0 + attention_rows - 1 : Tq - 1;
  return mask.key_end(last, Tk);
}

/// Whether any live row of the block sees one of the streamed rows [r0, r0 + Count) before
/// `end` (`sees(r)` for this thread's row; the tensor-core kernels give each thread half a
/// tile): under a mask whose bounds do not say so (Mask::skips_tiles, context parallel's
/// spans), the block skips a tile no row of it sees -- its load and its arithmetic, which
/// would add nothing. The same for every thread of the block (__syncthreads_or, which is
/// also the barrier before the tile's loads).
template <class Mask, int Count = attention_tile, class Sees>
__device__ inline bool tile_needed(bool live, std::int64_t r0, std::int64_t end, Sees sees) {
  if constexpr (!Mask::skips_tiles) {
    return true;
  } else {
    bool any = false;
    for (int j = 0; j < Count && live && !any && r0 + j < end; ++j) any = sees(r0 + j);
    return __syncthreads_or(any) != 0;
  }
}

/// The mask of a block pair (attention.cuh's kernels take it in place of causal_mask): query
/// t sees key s when kpos[s] <= qpos[t] and, with documents, kdoc[s] == qdoc[t]. Positions
/// need not be sorted, so no bound on the rows to visit: the kernels test each tile instead.
struct span_mask {
  static constexpr bool skips_tiles = true;
  const std::int64_t* qpos;
  const std::int32_t* qdoc;  // null: no documents
  const std::int64_t* kpos;
  const std::int32_t* kdoc;
  __device__ bool sees(std::int64_t t, std::int64_t s) const {
    return kpos[s] <= qpos[t] && (!qdoc || qdoc[t] == kdoc[s]);
  }
  __device__ bool sees_all(std::int64_t, std::int64_t) const { return false; }
  __device__ std::int64_t key_end(std::int64_t, std::int64_t Tk) const { return Tk; }
  __device__ std::int64_t query_begin(std::int64_t) const { return 0; }
  /// The device memory it reads (host side: the CUDA emulation checks a launch's reach through it).
  std::array<const void*, 4> device_pointers() const { return {qpos, qdoc, kpos, kdoc}; }
};
inline span_mask mask_of(const cpu::token_span& qs, const cpu::token_span& ks) {
  return {qs.pos, qs.doc, ks.pos, ks.doc};
}
}  // namespace tessera::cuda::detail
