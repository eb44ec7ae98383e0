// tessera/kernels/cpu/ring_attention.hpp: the kernels of context parallel (ring) attention --
// attention of a rank's queries against one block of keys and values, with the mask given by
// global token positions (and, for packed documents, document ids), the log-sum-exp merge
// of partial outputs, and the block backward.
// tessera-requires: openblas
//
// Shapes as in attention.hpp: q, out, dq [B, Tq, NH, HD]; k, v, dk, dv [B, Tk, NKV, HD];
// lse [B, NH, Tq]. qpos [Tq] and kpos [Tk] are the tokens' positions in the whole sequence
// (the same for every batch row); a key is seen when kpos <= qpos and, with documents
// (qdoc / kdoc not null), when it is in the same document. So a rank holding chunks r and
// 2cp-1-r of a head-tail split (parallel::cp_positions) sees exactly the causal pairs of the
// unsplit sequence, and a block pair with no visible key is skipped (block_visibility).
//
// Forward of a block writes its partial (out_b, lse_b) (rows that see no key: out 0, lse
// -inf); attention_merge folds it into the running (out, lse) in f32 with PyTorch's merge
// (torch.distributed.tensor.experimental._attention._SDPAMerger):
//   out -= sigmoid(lse_b - lse) * (out - out_b);   lse -= logsigmoid(lse - lse_b)
// Backward of a block, given the merged out and lse (flash-attention's rule, as in
// attention_backward: P = exp(S - lse), D = dout . out, dS = P (dP - D)), ACCUMULATES dq of
// the queries and dk, dv of the block (they come from several blocks, or several ranks).
// K/V heads travel unrepeated (GQA): query head h reads KV head h / (NH / NKV). A tile pair
// whose bounds show no visible key (all keys later, or no document in common) is skipped in
// both directions, so a diagonal block costs half a full one and documents cost their own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/detail/vec_math.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/parallel.hpp>

namespace tessera::cpu {

/// Positions and documents of one side of a block pair (documents may be null).
struct token_span {
  const std::int64_t* pos = nullptr;
  const std::int32_t* doc = nullptr;
  std::int64_t n = 0;
};

enum class block_visibility : std::uint8_t { none, some, all };

/// Whether the queries of `q` see none, some or all of the keys of `k` (positions only; with
/// documents, `all` needs every pair in one document). For skipping and for the docs' pair
/// rules (full, diagonal, skipped).
inline block_visibility visibility(const token_span& q, const token_span& k) {
  bool any = false, every = true;
  for (std::int64_t i = 0; i < q.n; ++i)
    for (std::int64_t j = 0; j < k.n; ++j) {
      const bool seen = k.pos[j] <= q.pos[i] && (!q.doc || q.doc[i] == k.doc[j]);
      any = any || seen;
      every = every && seen;
    }
  return !any ? block_visibility::none : every ? block_visibility::all : block_visibility::some;
}

namespace detail {
inline bool sees(const token_span& q, std::int64_t i, const token_span& k, std::int64_t j) {
  return k.pos[j] <= q.pos[i] && (!q.doc || q.doc[i] == k.doc[j]);
}
/// The least and greatest position and document of each tile of `n` tokens of a span.
struct tile_bounds {
  std::int64_t pos_lo, pos_hi;
  std::int32_t doc_lo, doc_hi;
};
inline std::vector<tile_bounds> tiles_of(const token_span& s, std::int64_t n) {
  std::vector<tile_bounds> t;
  for (std::int64_t a = 0; a < s.n; a += n) {
    tile_bounds b{s.pos[a], s.pos[a], s.doc ? s.doc[a] : 0, s.doc ? s.doc[a] : 0};
    for (std::int64_t i = a; i < std::min(a + n, s.n); ++i) {
      b.pos_lo = std::min(b.pos_lo, s.pos[i]), b.pos_hi = std::max(b.pos_hi, s.pos[i]);
      if (s.doc) b.doc_lo = std::min(b.doc_lo, s.doc[i]), b.doc_hi = std::max(b.doc_hi, s.doc[i]);
    }
    t.push_back(b);
  }
  return t;
}
/// False when no query of tile q sees a key of tile k: every key after every query, or
/// (documents numbered in order, as document_ids does) no document in common. A tile pair
/// that passes is computed with the exact mask, so the test only has to be safe.
inline bool may_see(const tile_bounds& q, const tile_bounds& k) {
  return k.pos_lo <= q.pos_hi && k.doc_lo <= q.doc_hi && q.doc_lo <= k.doc_hi;
}
}  // namespace detail

/// The partial attention of queries `qs` against the block `ks`: out_b [B, Tq, NH, HD] and
/// lse_b [B, NH, Tq] (a row that sees no key: zeros and -inf).
inline void attention_block_forward(float* out_b, float* lse_b, const float* q, const float* k, const float* v,
                                    const token_span& qs, const token_span& ks, std::int64_t B, std::int64_t NH,
                                    std::int64_t NKV, std::int64_t HD) {
  detail::check_attention(B, std::max<std::int64_t>(qs.n, 1), NH, NKV, HD);
  constexpr std::int64_t Br = attention_block_q, Bc = attention_block_k;
  const std::int64_t Tq = qs.n, Tk = ks.n, G = NH / NKV, nq = (Tq + Br - 1) / Br;
  const std::int64_t ldq = NH * HD, ldk = NKV * HD;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<detail::tile_bounds> qt = detail::tiles_of(qs, Br), kt = detail::tiles_of(ks, Bc);
  parallel_for_dynamic(B * NH * nq, [&](std::int64_t task) {
    const std::int64_t qi = task % nq, bh = task / nq, b = bh / NH, h = bh % NH, g = h / G;
    const std::int64_t t0 = qi * Br, tr = std::min(Br, Tq - t0);
    detail::softmax_tile st(tr, HD);
    float* S = st.S;
    const float* Q = q + ((b * Tq + t0) * NH + h) * HD;
    for (std::int64_t k0 = 0; k0 < Tk; k0 += Bc) {
      if (!detail::may_see(qt[static_cast<std::size_t>(qi)], kt[static_cast<std::size_t>(k0 / Bc)])) continue;
      const std::int64_t tc = std::min(Bc, Tk - k0);
      const float* K = k + ((b * Tk + k0) * NKV + g) * HD;
      const float* V = v + ((b * Tk + k0) * NKV + g) * HD;
      gemm_serial(false, true, tr, tc, HD, scale, Q, ldq, K, ldk, 0.0f, S, Bc);
      for (std::int64_t i = 0; i < tr; ++i) {
        float* s = S + i * Bc;
        float bm = ninf;
        for (std::int64_t j = 0; j < tc; ++j) {
          if (!detail::sees(qs, t0 + i, ks, k0 + j)) s[j] = ninf;
          bm = s[j] > bm ? s[j] : bm;
        }
        if (bm == ninf) {  // sees nothing of this tile
          std::fill(s, s + tc, 0.0f);
          continue;
        }
        const float mx = bm > st.m[i] ? bm : st.m[i];
        float sum = 0;
        for (std::int64_t j = 0; j < tc; ++j) {
          s[j] = s[j] == ninf ? 0.0f : detail::fast_exp(s[j] - mx);
          sum += s[j];
        }
        st.fold(i, mx, sum);
      }
      gemm_serial(false, false, tr, HD, tc, 1.0f, S, Bc, V, ldk, 1.0f, st.O, HD);
    }
    for (std::int64_t i = 0; i < tr; ++i)
      st.store(i, out_b + ((b * Tq + t0 + i) * NH + h) * HD, lse_b[(b * NH + h) * Tq + t0 + i]);
  });
}

/// Folds a block's partial (out_b, lse_b) into the running (out, lse), rows of HD values,
/// `rows` = B * Tq * NH (lse indexed [B, NH, Tq]). Start from out = 0, lse = -inf.
inline void attention_merge(float* out, float* lse, const float* out_b, const float* lse_b, std::int64_t B,
                            std::int64_t Tq, std::int64_t NH, std::int64_t HD) {
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  parallel_for(B * NH * Tq, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const std::int64_t b = r / (NH * Tq), h = (r / Tq) % NH, t = r % Tq;
      const float lb = lse_b[r];
      if (lb == ninf) continue;  // the block showed this row nothing
      float* o = out + ((b * Tq + t) * NH + h) * HD;
      const float* ob = out_b + ((b * Tq + t) * NH + h) * HD;
      if (lse[r] == ninf) {
        std::copy(ob, ob + HD, o);
        lse[r] = lb;
        continue;
      }
      // out -= sigmoid(lse_b - lse) * (out - out_b); lse -= logsigmoid(lse - lse_b)
      const float w = 1.0f / (1.0f + std::exp(lse[r] - lb));
      for (std::int64_t d = 0; d < HD; ++d) o[d] -= w * (o[d] - ob[d]);
      const float x = lse[r] - lb;  // logsigmoid(x) = -log1p(exp(-x)), stable for either sign
      const float logsig = x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
      lse[r] -= logsig;
    }
  }, 64);
}

/// D [B, NH, Tq] = rowsum(dout * out) of the merged output (once per rank, before the blocks).
inline void attention_delta(float* D, const float* dout, const float* out, std::int64_t B, std::int64_t Tq,
                            std::int64_t NH, std::int64_t HD) {
  parallel_for(B * NH * Tq, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const std::int64_t b = r / (NH * Tq), h = (r / Tq) % NH, t = r % Tq;
      const std::int64_t off = ((b * Tq + t) * NH + h) * HD;
      D[r] = detail::dot(dout + off, out + off, HD);
    }
  }, 64);
}

/// The block's share of the backward, given the merged lse and D = attention_delta(...):
/// ACCUMULATES dq [B, Tq, NH, HD] and dk, dv [B, Tk, NKV, HD].
inline void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                     const float* k, const float* v, const float* lse, const float* D,
                                     const token_span& qs, const token_span& ks, std::int64_t B, std::int64_t NH,
                                     std::int64_t NKV, std::int64_t HD) {
  detail::check_attention(B, std::max<std::int64_t>(qs.n, 1), NH, NKV, HD);
  constexpr std::int64_t Br = attention_block_q, Bc = attention_block_k;
  const std::int64_t Tq = qs.n, Tk = ks.n, G = NH / NKV, nq = (Tq + Br - 1) / Br;
  const std::int64_t ldq = NH * HD, ldk = NKV * HD;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  const std::vector<detail::tile_bounds> qt = detail::tiles_of(qs, Br), kt = detail::tiles_of(ks, Bc);
  parallel_for_dynamic(B * NKV, [&](std::int64_t task) {  // one task owns dk, dv of a KV head
    const std::int64_t b = task / NKV, g = task % NKV;
    auto& buf = detail::attention_scratch();
    buf.resize(static_cast<std::size_t>(2 * Br * Bc));
    float* P = buf.data();
    float* dS = P + Br * Bc;
    for (std::int64_t h = g * G; h < (g + 1) * G; ++h) {
      const float* L = lse + (b * NH + h) * Tq;
      const float* Dh = D + (b * NH + h) * Tq;
      for (std::int64_t qi = 0; qi < nq; ++qi) {
        const std::int64_t t0 = qi * Br, tr = std::min(Br, Tq - t0);
        const std::int64_t qoff = ((b * Tq + t0) * NH + h) * HD;
        for (std::int64_t k0 = 0; k0 < Tk; k0 += Bc) {
          if (!detail::may_see(qt[static_cast<std::size_t>(qi)], kt[static_cast<std::size_t>(k0 / Bc)])) continue;
          const std::int64_t tc = std::min(Bc, Tk - k0);
          const std::int64_t koff = ((b * Tk + k0) * NKV + g) * HD;
          gemm_serial(false, true, tr, tc, HD, scale, q + qoff, ldq, k + koff, ldk, 0.0f, P, Bc);
          bool any = false;
          for (std::int64_t i = 0; i < tr; ++i)
            for (std::int64_t j = 0; j < tc; ++j) {
              float& p = P[i * Bc + j];
              const bool seen = detail::sees(qs, t0 + i, ks, k0 + j);
              p = seen ? detail::fast_exp(p - L[t0 + i]) : 0.0f;
              any = any || seen;
            }
          if (!any) continue;
          gemm_serial(true, false, tc, HD, tr, 1.0f, P, Bc, dout + qoff, ldq, 1.0f, dv + koff, ldk);
          gemm_serial(false, true, tr, tc, HD, 1.0f, dout + qoff, ldq, v + koff, ldk, 0.0f, dS, Bc);
          for (std::int64_t i = 0; i < tr; ++i)
            for (std::int64_t j = 0; j < tc; ++j) dS[i * Bc + j] = P[i * Bc + j] * (dS[i * Bc + j] - Dh[t0 + i]);
          gemm_serial(false, false, tr, HD, tc, scale, dS, Bc, k + koff, ldk, 1.0f, dq + qoff, ldq);
          gemm_serial(true, false, tc, HD, tr, scale, dS, Bc, q + qoff, ldq, 1.0f, dk + koff, ldk);
        }
      }
    }
  });
}

}  // namespace tessera::cpu
