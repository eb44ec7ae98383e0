// tessera/model/llama_block.hpp: one Llama 3 transformer block, written as llm.c writes a
// layer: named parameter views, a named struct of what forward keeps for backward, and
// block_forward / block_backward whose signatures carry every buffer and shape.
// tessera-requires: openblas
//
//   mid = x + wo(attention(rope(wq(n1)), rope(wk(n1)), wv(n1))),   n1 = attention_norm(x)
//   out = mid + w2(silu(w1(n2)) * w3(n2)),                           n2 = ffn_norm(mid)
//
// A block runs on a shard (llama_shard.hpp): its own heads and FFN columns, and the rows
// of the residual stream it holds. The hooks are where a layout changes (the parallel
// layer runs its plans there; serial_hooks does nothing):
//   gather(in, out)   residual rows -> every token, in front of a column-parallel region;
//   reduce(in, out)   partial sums -> residual rows, after a row-parallel region;
//   attention_forward / attention_backward: the attention itself (context parallel swaps
//                     it; local_attention calls the backend's kernels).
// The kernels are a backend's (kernels/backend.hpp): block_forward<K> calls K's on memory of
// K::space; K is cpu_kernels unless named (model/device_llama.hpp runs them on CUDA).
// Both return the buffer holding the result (their input when nothing moves).
//
// Gradients follow one rule (docs/kernels.md): parameter gradients accumulate (+=);
// block_backward turns the gradient of the block's output, held in `dres`, into the
// gradient of its input, in place.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/float8_linear.hpp>
#include <tessera/model/llama_float8.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

/// A block's parameters by name (T = const float: the weights; T = float: their gradients).
/// Shapes on a shard with h query heads, k KV heads, f FFN columns (hd = head_dim, D = dim):
/// wq [h hd, D], wk and wv [k hd, D], wo [D, h hd], w1 and w3 [f, D], w2 [D, f], norms [D].
template <class T>
struct block_weights {
  T* attention_norm = nullptr;
  T* wq = nullptr;
  T* wk = nullptr;
  T* wv = nullptr;
  T* wo = nullptr;
  T* ffn_norm = nullptr;
  T* w1 = nullptr;
  T* w2 = nullptr;
  T* w3 = nullptr;
};
using block_params = block_weights<const float>;
using block_grads = block_weights<float>;

/// The views of `p[k]` in block_roles order (attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3).
template <class T>
constexpr block_weights<T> block_weights_from(T* const* p) {
  return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]};
}

/// What block_forward keeps for block_backward (sizes: block_saved_sizes, same order), in
/// memory of `Space`.
template <class Space = host_space>
struct basic_block_saved {
  using buffer = tensor<float, Space>;
  buffer an;       ///< attention_norm(x)          [Nr, D]
  buffer rstd1;    ///< its 1 / rms                 [Nr]
  buffer an_full;  ///< every token's an (seq split) [N, D]
  buffer q, k, v;  ///< after RoPE (q, k)          [N, h hd], [N, k hd]
  buffer att;      ///< attention output           [N, h hd]
  buffer lse;      ///< its log-sum-exp            [B, h, T]
  buffer mid;      ///< x + attention branch       [Nr, D]
  buffer fn;       ///< ffn_norm(mid)              [Nr, D]
  buffer rstd2;    ///< [Nr]
  buffer fn_full;  ///< [N, D] (seq split)
  buffer h1, h3, act;  ///< w1 n2, w3 n2, silu(h1) h3 [N, f]
  const float* an_seen = nullptr;  ///< the norm output as the column-parallel GEMMs saw it
  const float* fn_seen = nullptr;

  void allocate(const llama_dims& d) {
    const auto n = block_saved_sizes(d);
    buffer* f[] = {&an, &rstd1, &an_full, &q, &k, &v, &att, &lse, &mid, &fn, &rstd2, &fn_full, &h1, &h3, &act};
    for (std::size_t i = 0; i < n.size(); ++i) *f[i] = buffer({n[i]});
  }
};
using block_saved = basic_block_saved<>;

/// Scratch every block uses in turn (sizes: block_scratch_sizes, same order), and the RoPE
/// tables of the current sequence length.
template <class Space = host_space>
struct basic_block_scratch {
  using buffer = tensor<float, Space>;
  buffer proj;   ///< a row-parallel GEMM's output (partial under a split)  [N, D]
  buffer dres;   ///< gradient of the residual stream                       [Nr, D]
  buffer dtmp;   ///< a reduced gradient                                    [Nr, D]
  buffer dfull;  ///< every token's input gradient (partial under a split)  [N, D]
  buffer dgath;  ///< dres gathered to every token (seq split)             [N, D]
  buffer datt, dq, dk, dv, ffn;
  buffer cos, sin;  ///< RoPE tables [T, hd / 2] ([B, T, hd / 2] per row: llama_dims::rope_rows)
  buffer f8a, f8b;  ///< Float8 linears' quantized operands (empty without them)

  void allocate(const llama_dims& d) {
    const auto n = block_scratch_sizes(d);
    buffer* f[] = {&proj, &dres, &dtmp, &dfull, &dgath, &datt, &dq, &dk, &dv, &ffn, &cos, &sin, &f8a, &f8b};
    for (std::size_t i = 0; i < n.size(); ++i) *f[i] = buffer({n[i]});
  }
};
using block_scratch = basic_block_scratch<>;

/// The RoPE settings of a model config (the tables block_scratch holds).
inline cpu::rope_config rope_config_of(const llama_config& c) {
  return {.theta = c.rope_theta, .scaling = c.rope_scaling, .factor = c.rope_scale_factor,
          .low_freq_factor = c.rope_low_freq_factor, .high_freq_factor = c.rope_high_freq_factor,
          .original_context = c.rope_original_context};
}

/// Fills the RoPE tables of `k` for the tokens of `d` at `positions` (empty: 0..T-1; per
/// row, llama_dims::rope_rows: B x T of them, row after row). Made on the host (copied to
/// K's memory where that is not the host's).
template <class K = cpu_kernels>
void rope_tables(basic_block_scratch<typename K::space>& k, const llama_dims& d, const llama_config& c,
                 const std::vector<std::int64_t>& positions) {
  check(positions.empty() ? !d.rope_rows : static_cast<std::int64_t>(positions.size()) == d.rope_T(),
        "llama: set_positions() gave " + std::to_string(positions.size()) + " positions for " +
            std::to_string(d.rope_T()) + " tokens");
  const std::int64_t* pos = positions.empty() ? nullptr : positions.data();
  if constexpr (K::space::host_accessible) {
    cpu::rope_table(k.cos.data(), k.sin.data(), d.rope_T(), d.hd, rope_config_of(c), pos);
  } else {
    std::vector<float> cos(static_cast<std::size_t>(d.rope_T() * d.hd / 2)), sin(cos.size());
    cpu::rope_table(cos.data(), sin.data(), d.rope_T(), d.hd, rope_config_of(c), pos);
    K::to_device(k.cos.data(), cos.data(), static_cast<std::int64_t>(cos.size()));
    K::to_device(k.sin.data(), sin.data(), static_cast<std::int64_t>(sin.size()));
  }
}

/// Attention on this rank's heads of whole sequences: backend K's kernels.
template <class K = cpu_kernels>
struct basic_local_attention {
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, const llama_dims& d) {
    K::attention_forward(out, lse, q, k, v, d.B, d.T, d.heads, d.kv_heads, d.hd);
  }
  void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                          const float* v, const float* out, const float* lse, const llama_dims& d) {
    K::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, d.B, d.T, d.heads, d.kv_heads, d.hd);
  }
};
using local_attention = basic_local_attention<>;

/// The hooks of a single rank: every layout change is the identity.
template <class K = cpu_kernels>
struct basic_serial_hooks : basic_local_attention<K> {
  void forward_begin(std::int64_t) {}
  void forward_end(std::int64_t) {}
  void backward_begin(std::int64_t) {}
  void backward_end(std::int64_t) {}
  const float* gather(const float* in, float*) { return in; }
  const float* reduce(const float* in, float*) { return in; }
  /// Loss on part of the vocabulary: [B*T] row maxima reduced (max), [B*T, 2] sums (sum), in place.
  void reduce_row_max(float*) {}
  void reduce_row_stats(float*) {}
  /// Logits [B*T, Vl] -> [B*T, V], and the gradient back.
  void gather_logits(const float*, float*) {}
  void slice_logits(const float*, float*) {}
  /// Float8 scales: the amaxes [n] of groups other ranks hold parts of, max-reduced in place.
  void reduce_amax(float*, std::int64_t) {}
};
using serial_hooks = basic_serial_hooks<>;

namespace detail {
inline void zero(float* p, std::int64_t n) { cpu_kernels::zero(p, n); }
/// y = a + b elementwise (b may alias y).
inline void add(float* y, const float* a, const float* b, std::int64_t n) { cpu_kernels::add(y, a, b, n); }
/// Refuses what backend K has not built (its flags, kernels/backend.hpp).
template <class K>
void need(bool has, const char* what) {
  check(has, std::string("llama: ") + what + " on the " + std::string(K::name) +
                 " kernel backend is not built (docs/cuda.md); run it on cpu_kernels");
}

/// The Float8 casts' amax reduction across the ranks that share a scale group (the hooks').
template <class Hooks>
auto amax_reduce(Hooks& h) {
  return [&h](float* amax, std::int64_t n) { h.reduce_amax(amax, n); };
}
/// out [N, OC] = in [N, C] . W [OC, C]^T: the block's linear `r`, with Float8 operands when
/// d.f8 covers it.
template <class K = cpu_kernels, class Hooks>
void linear_forward(float* out, const float* in, const float* W, std::int64_t N, std::int64_t C, std::int64_t OC,
                    param_role r, const llama_dims& d, basic_block_scratch<typename K::space>& k, Hooks& h) {
  if (!d.f8.covers(r)) return K::matmul_forward(out, in, W, N, C, OC);
  need<K>(K::float8, "a Float8 linear");
  if constexpr (K::float8)
    K::f8_matmul_forward(out, in, W, N, C, OC, f8_casts_of(d.f8), k.f8a.data(), k.f8b.data(), f8_split_of(r, d),
                         amax_reduce(h));
}
/// din += dout . W, dW += dout^T . in for linear `r` (either may be nullptr), as linear_forward.
template <class K = cpu_kernels, class Hooks>
void linear_backward(float* din, float* dW, const float* dout, const float* in, const float* W, std::int64_t N,
                     std::int64_t C, std::int64_t OC, param_role r, const llama_dims& d,
                     basic_block_scratch<typename K::space>& k, Hooks& h) {
  if (!d.f8.covers(r)) return K::matmul_backward(din, dW, dout, in, W, N, C, OC);
  need<K>(K::float8, "a Float8 linear");
  if constexpr (K::float8)
    K::f8_matmul_backward(din, dW, dout, in, W, N, C, OC, f8_casts_of(d.f8), k.f8a.data(), k.f8b.data(),
                          f8_split_of(r, d), amax_reduce(h));
}
/// The feed-forward branch (swiglu.hpp's feed_forward_forward / _backward, which run when no
/// linear of it is Float8; the same kernels in the same order otherwise).
template <class K = cpu_kernels, class Hooks>
void feed_forward_forward(float* out, float* h1, float* h3, float* act, const float* in, const block_params& w,
                          const llama_dims& d, basic_block_scratch<typename K::space>& k, Hooks& h) {
  const std::int64_t N = d.N(), D = d.D, F = d.F;
  if (!d.f8.any()) return K::feed_forward_forward(out, h1, h3, act, in, w.w1, w.w3, w.w2, N, D, F);
  linear_forward<K>(h1, in, w.w1, N, D, F, param_role::ffn_w1, d, k, h);
  linear_forward<K>(h3, in, w.w3, N, D, F, param_role::ffn_w3, d, k, h);
  K::swiglu_forward(act, h1, h3, N * F);
  linear_forward<K>(out, act, w.w2, N, F, D, param_role::ffn_w2, d, k, h);
}
/// Accumulates din [N, D] and the weight gradients of g that are not nullptr; leaves dh1, dh3
/// in k.ffn.
template <class K = cpu_kernels, class Hooks>
void feed_forward_backward(float* din, float* dw1, float* dw3, float* dw2, const float* dout, const float* in,
                           const basic_block_saved<typename K::space>& s, const block_params& w, const llama_dims& d,
                           basic_block_scratch<typename K::space>& k, Hooks& h) {
  const std::int64_t N = d.N(), D = d.D, F = d.F;
  if (!d.f8.any())
    return K::feed_forward_backward(din, dw1, dw3, dw2, dout, in, s.h1.data(), s.h3.data(), s.act.data(), w.w1,
                                    w.w3, w.w2, N, D, F, k.ffn.data());
  float* dh1 = k.ffn.data();  // dact, then dh1 in place
  float* dh3 = dh1 + N * F;
  K::zero(dh1, N * F);
  linear_backward<K>(dh1, dw2, dout, s.act.data(), w.w2, N, F, D, param_role::ffn_w2, d, k, h);
  K::swiglu_backward(dh1, dh3, dh1, s.h1.data(), s.h3.data(), N * F);
  linear_backward<K>(din, dw1, dh1, in, w.w1, N, D, F, param_role::ffn_w1, d, k, h);
  linear_backward<K>(din, dw3, dh3, in, w.w3, N, D, F, param_role::ffn_w3, d, k, h);
}
}  // namespace detail

/// out [Nr, D] = the block applied to x [Nr, D] (this shard's residual rows).
template <class K = cpu_kernels, class Hooks>
void block_forward(float* out, const float* x, const block_params& w, basic_block_saved<typename K::space>& s,
                   basic_block_scratch<typename K::space>& k, const llama_dims& d, Hooks& h) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D, Hq = d.Hq(), Hk = d.Hk();
  // attention branch: mid = x + R(wo(attention(rope(q), rope(k), v))), q, k, v = w{q,k,v}(G(norm(x)))
  K::rmsnorm_forward(s.an.data(), s.rstd1.data(), x, w.attention_norm, Nr, D, d.eps);
  s.an_seen = h.gather(s.an.data(), s.an_full.data());
  detail::linear_forward<K>(s.q.data(), s.an_seen, w.wq, N, D, Hq, param_role::attention_q, d, k, h);
  detail::linear_forward<K>(s.k.data(), s.an_seen, w.wk, N, D, Hk, param_role::attention_k, d, k, h);
  detail::linear_forward<K>(s.v.data(), s.an_seen, w.wv, N, D, Hk, param_role::attention_v, d, k, h);
  K::rope_forward(s.q.data(), s.q.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.heads, d.hd);
  K::rope_forward(s.k.data(), s.k.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.kv_heads, d.hd);
  h.attention_forward(s.att.data(), s.lse.data(), s.q.data(), s.k.data(), s.v.data(), d);
  detail::linear_forward<K>(k.proj.data(), s.att.data(), w.wo, N, Hq, D, param_role::attention_o, d, k, h);
  K::add(s.mid.data(), x, h.reduce(k.proj.data(), s.mid.data()), Nr * D);
  // feed-forward branch: out = mid + R(w2(silu(w1 n2) * w3 n2)), n2 = G(norm(mid))
  K::rmsnorm_forward(s.fn.data(), s.rstd2.data(), s.mid.data(), w.ffn_norm, Nr, D, d.eps);
  s.fn_seen = h.gather(s.fn.data(), s.fn_full.data());
  detail::feed_forward_forward<K>(k.proj.data(), s.h1.data(), s.h3.data(), s.act.data(), s.fn_seen, w, d, k, h);
  K::add(out, s.mid.data(), h.reduce(k.proj.data(), out), Nr * D);
}

/// dres [Nr, D]: in, the gradient of the block's output; out, of its input x. Parameter
/// gradients accumulate into g. The gather (G) of forward has the reduce (R) as its
/// backward and the other way round.
template <class K = cpu_kernels, class Hooks>
void block_backward(float* dres, const block_grads& g, const float* x, const block_params& w,
                    const basic_block_saved<typename K::space>& s, basic_block_scratch<typename K::space>& k,
                    const llama_dims& d, Hooks& h) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D, Hq = d.Hq(), Hk = d.Hk();
  float* dfull = k.dfull.data();
  // feed-forward branch
  K::zero(dfull, N * D);
  detail::feed_forward_backward<K>(dfull, g.w1, g.w3, g.w2, h.gather(dres, k.dgath.data()), s.fn_seen, s, w, d, k, h);
  K::rmsnorm_backward(dres, g.ffn_norm, h.reduce(dfull, k.dtmp.data()), s.mid.data(), w.ffn_norm, s.rstd2.data(),
                        Nr, D);
  // attention branch
  K::zero(k.datt.data(), N * Hq);
  detail::linear_backward<K>(k.datt.data(), g.wo, h.gather(dres, k.dgath.data()), s.att.data(), w.wo, N, Hq, D,
                          param_role::attention_o, d, k, h);
  h.attention_backward(k.dq.data(), k.dk.data(), k.dv.data(), k.datt.data(), s.q.data(), s.k.data(), s.v.data(),
                       s.att.data(), s.lse.data(), d);
  K::rope_backward(k.dq.data(), k.dq.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.heads, d.hd);
  K::rope_backward(k.dk.data(), k.dk.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.kv_heads, d.hd);
  K::zero(dfull, N * D);
  detail::linear_backward<K>(dfull, g.wq, k.dq.data(), s.an_seen, w.wq, N, D, Hq, param_role::attention_q, d, k, h);
  detail::linear_backward<K>(dfull, g.wk, k.dk.data(), s.an_seen, w.wk, N, D, Hk, param_role::attention_k, d, k, h);
  detail::linear_backward<K>(dfull, g.wv, k.dv.data(), s.an_seen, w.wv, N, D, Hk, param_role::attention_v, d, k, h);
  K::rmsnorm_backward(dres, g.attention_norm, h.reduce(dfull, k.dtmp.data()), x, w.attention_norm, s.rstd1.data(),
                        Nr, D);
}

}  // namespace tessera
