// tessera/kernels/cpu/attention.hpp: causal grouped-query attention, tiled, online softmax.
// tessera-requires: openblas
//
// Shapes (row-major, the natural layout after the q/k/v projections):
//   q, out, dq, dout [B, T, NH, HD];  k, v, dk, dv [B, T, NKV, HD];  lse [B, NH, T]
// Query head h reads key/value head h / (NH / NKV) (GQA; NH % NKV == 0).
//   out[t] = sum_{s <= t} softmax_s(q[t] . k[s] / sqrt(HD)) v[s]
//   lse[t] = log sum_{s <= t} exp(q[t] . k[s] / sqrt(HD))   (saved for backward)
//
// Forward (FlashAttention-2's order): each task owns Br query rows of one head and sweeps
// the key blocks up to the diagonal, keeping a running max and sum per row and rescaling its
// Br x HD accumulator; only a Br x Bc score tile exists at any time (no T x T matrix).
// Backward recomputes the score tiles from q, k and lse (P = exp(S - lse)), with
// D[t] = dout[t] . out[t] and dS = P * (dP - D). One task per (batch, KV head) owns dk and
// dv of that head and dq of its query heads, so no two threads write the same row.
// Backward WRITES dq, dk, dv (they are fresh buffers in a Llama block).
// Tile GEMMs go to single-threaded OpenBLAS; tasks run over the pool.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/detail/vec_math.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/parallel.hpp>

namespace tessera::cpu {

/// Tile sizes (rows of queries, columns of keys).
inline constexpr std::int64_t attention_block_q = 64;
inline constexpr std::int64_t attention_block_k = 64;

namespace detail {
inline void check_attention(std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                            std::int64_t HD) {
  check(B > 0 && T > 0 && NH > 0 && NKV > 0 && HD > 0, "attention: every size must be positive");
  check(NH % NKV == 0, "attention: n_heads (" + std::to_string(NH) +
                           ") must be a multiple of n_kv_heads (" + std::to_string(NKV) + ")");
}
inline std::vector<float>& attention_scratch() {
  thread_local std::vector<float> buf;
  return buf;
}

/// A forward task's online-softmax state over `tr` query rows, in the thread's scratch: the
/// score tile S [Br, Bc], the output accumulator O [tr, HD] and each row's running max m and
/// sum l (FlashAttention-2). Shared by attention_forward and ring_attention.hpp's block forward.
struct softmax_tile {
  float *S, *O, *m, *l;
  std::int64_t HD;
  softmax_tile(std::int64_t tr, std::int64_t hd) : HD(hd) {
    constexpr std::int64_t Br = attention_block_q, Bc = attention_block_k;
    auto& buf = attention_scratch();
    buf.resize(static_cast<std::size_t>(Br * Bc + Br * HD + 2 * Br));
    S = buf.data(), O = S + Br * Bc, m = O + Br * HD, l = m + Br;
    std::fill(O, O + tr * HD, 0.0f);
    std::fill(m, m + tr, -std::numeric_limits<float>::infinity());
    std::fill(l, l + tr, 0.0f);
  }
  /// Row i's new max is `mx` (>= m[i]) and its tile's exp(s - mx) sum to `sum`: rescales
  /// what the row has so far.
  void fold(std::int64_t i, float mx, float sum) {
    const float corr = m[i] == -std::numeric_limits<float>::infinity() ? 0.0f : fast_exp(m[i] - mx);
    l[i] = l[i] * corr + sum;
    m[i] = mx;
    if (corr != 1.0f)
      for (std::int64_t d = 0; d < HD; ++d) O[i * HD + d] *= corr;
  }
  /// Row i's normalised output into `o` [HD] and its log-sum-exp (a row that saw no key:
  /// zeros and -inf).
  void store(std::int64_t i, float* o, float& lse) const {
    const bool none = l[i] == 0.0f;
    const float inv = none ? 0.0f : 1.0f / l[i];
    for (std::int64_t d = 0; d < HD; ++d) o[d] = O[i * HD + d] * inv;
    lse = none ? -std::numeric_limits<float>::infinity() : m[i] + std::log(l[i]);
  }
};
}  // namespace detail

inline void attention_forward(float* out, float* lse, const float* q, const float* k,
                              const float* v, std::int64_t B, std::int64_t T, std::int64_t NH,
                              std::int64_t NKV, std::int64_t HD) {
  detail::check_attention(B, T, NH, NKV, HD);
  constexpr std::int64_t Br = attention_block_q, Bc = attention_block_k;
  const std::int64_t G = NH / NKV, nq = (T + Br - 1) / Br;
  const std::int64_t ldq = NH * HD, ldk = NKV * HD;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  parallel_for_dynamic(B * NH * nq, [&](std::int64_t task) {
    const std::int64_t qi = nq - 1 - task % nq;  // longest rows first
    const std::int64_t bh = task / nq, b = bh / NH, h = bh % NH, g = h / G;
    const std::int64_t t0 = qi * Br, tr = std::min(Br, T - t0);
    detail::softmax_tile st(tr, HD);
    float* S = st.S;
    const float* Q = q + ((b * T + t0) * NH + h) * HD;
    for (std::int64_t k0 = 0; k0 < t0 + tr; k0 += Bc) {
      const std::int64_t tc = std::min(Bc, t0 + tr - k0);
      const float* K = k + ((b * T + k0) * NKV + g) * HD;
      const float* V = v + ((b * T + k0) * NKV + g) * HD;
      gemm_serial(false, true, tr, tc, HD, scale, Q, ldq, K, ldk, 0.0f, S, Bc);
      for (std::int64_t i = 0; i < tr; ++i) {
        float* s = S + i * Bc;
        const std::int64_t valid = std::min(tc, t0 + i - k0 + 1);  // causal: keys <= t0 + i
        if (valid <= 0) {
          std::fill(s, s + tc, 0.0f);
          continue;
        }
        const float bm = detail::reduce_max(s, valid);
        const float mx = bm > st.m[i] ? bm : st.m[i];
        const float sum = detail::exp_sub_inplace(s, valid, mx);
        std::fill(s + valid, s + tc, 0.0f);
        st.fold(i, mx, sum);
      }
      gemm_serial(false, false, tr, HD, tc, 1.0f, S, Bc, V, ldk, 1.0f, st.O, HD);
    }
    for (std::int64_t i = 0; i < tr; ++i)
      st.store(i, out + ((b * T + t0 + i) * NH + h) * HD, lse[(b * NH + h) * T + t0 + i]);
  });
}

inline void attention_backward(float* dq, float* dk, float* dv, const float* dout,
                               const float* q, const float* k, const float* v, const float* out,
                               const float* lse, std::int64_t B, std::int64_t T, std::int64_t NH,
                               std::int64_t NKV, std::int64_t HD) {
  detail::check_attention(B, T, NH, NKV, HD);
  constexpr std::int64_t Br = attention_block_q, Bc = attention_block_k;
  const std::int64_t G = NH / NKV, nq = (T + Br - 1) / Br;
  const std::int64_t ldq = NH * HD, ldk = NKV * HD;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  parallel_for_dynamic(B * NKV, [&](std::int64_t task) {
    const std::int64_t b = task / NKV, g = task % NKV;
    auto& buf = detail::attention_scratch();
    buf.resize(static_cast<std::size_t>(2 * Br * Bc + T));
    float* P = buf.data();
    float* dS = P + Br * Bc;
    float* D = dS + Br * Bc;
    for (std::int64_t t = 0; t < T; ++t) {
      std::fill_n(dk + ((b * T + t) * NKV + g) * HD, HD, 0.0f);
      std::fill_n(dv + ((b * T + t) * NKV + g) * HD, HD, 0.0f);
    }
    for (std::int64_t h = g * G; h < (g + 1) * G; ++h) {
      const float* L = lse + (b * NH + h) * T;
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t off = ((b * T + t) * NH + h) * HD;
        D[t] = detail::dot(dout + off, out + off, HD);
        std::fill_n(dq + off, HD, 0.0f);
      }
      for (std::int64_t qi = 0; qi < nq; ++qi) {
        const std::int64_t t0 = qi * Br, tr = std::min(Br, T - t0);
        const std::int64_t qoff = ((b * T + t0) * NH + h) * HD;
        const float* Q = q + qoff;
        const float* dO = dout + qoff;
        float* dQ = dq + qoff;
        for (std::int64_t k0 = 0; k0 < t0 + tr; k0 += Bc) {
          const std::int64_t tc = std::min(Bc, t0 + tr - k0);
          const std::int64_t koff = ((b * T + k0) * NKV + g) * HD;
          gemm_serial(false, true, tr, tc, HD, scale, Q, ldq, k + koff, ldk, 0.0f, P, Bc);
          for (std::int64_t i = 0; i < tr; ++i) {
            float* p = P + i * Bc;
            const std::int64_t valid = std::max<std::int64_t>(0, std::min(tc, t0 + i - k0 + 1));
            const float li = L[t0 + i];
            for (std::int64_t j = 0; j < valid; ++j) p[j] = detail::fast_exp(p[j] - li);
            std::fill(p + valid, p + tc, 0.0f);
          }
          gemm_serial(true, false, tc, HD, tr, 1.0f, P, Bc, dO, ldq, 1.0f, dv + koff, ldk);
          gemm_serial(false, true, tr, tc, HD, 1.0f, dO, ldq, v + koff, ldk, 0.0f, dS, Bc);
          for (std::int64_t i = 0; i < tr; ++i) {
            const float di = D[t0 + i];
            float* ds = dS + i * Bc;
            const float* p = P + i * Bc;
            for (std::int64_t j = 0; j < tc; ++j) ds[j] = p[j] * (ds[j] - di);
          }
          gemm_serial(false, false, tr, HD, tc, scale, dS, Bc, k + koff, ldk, 1.0f, dQ, ldq);
          gemm_serial(true, false, tc, HD, tr, scale, dS, Bc, Q, ldq, 1.0f, dk + koff, ldk);
        }
      }
    }
  });
}

}  // namespace tessera::cpu
