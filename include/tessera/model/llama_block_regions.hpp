// tessera/model/llama_block_regions.hpp: the linears of a block (llama_block.hpp), alone and
// in the regions around tensor parallel's layout changes.
// tessera-requires: openblas
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>

#include <tessera/model/llama_block_parts.hpp>

namespace tessera {

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
/// A linear of a group that reads one input (q, k, v; w1, w3), run when `on`.
struct grouped_linear {
  bool on;
  param_role r;
  linear_out l;
};
/// The group's linears on `in` [N, C]: as one K::matmuls_forward (the input's operand
/// prepared once) when none is Float8, else one by one.
template <class K = cpu_kernels, class Hooks>
void grouped_forward(const float* in, std::int64_t N, std::int64_t C, std::initializer_list<grouped_linear> g,
                     const llama_dims& d, basic_block_scratch<typename K::space>& k, Hooks& h) {
  std::array<linear_out, 3> ls{};
  std::size_t n = 0;
  const bool f8 = std::any_of(g.begin(), g.end(), [&](const grouped_linear& x) { return x.on && d.f8.covers(x.r); });
  for (const grouped_linear& x : g)
    if (!x.on) continue;
    else if (f8) linear_forward<K>(x.l.out, in, x.l.w, N, C, x.l.OC, x.r, d, k, h);
    else ls.at(n++) = x.l;
  K::matmuls_forward(in, N, C, std::span<const linear_out>(ls.data(), n));
}
/// A linear's backward in a group (din += dout . W, dW += dout^T . in when not nullptr).
struct grouped_grad {
  param_role r;
  linear_grad l;
};
/// The group's backward, din accumulating in the group's order: one K::matmuls_backward when
/// none is Float8, else one by one.
template <class K = cpu_kernels, class Hooks>
void grouped_backward(float* din, const float* in, std::int64_t N, std::int64_t C,
                      std::initializer_list<grouped_grad> g, const llama_dims& d,
                      basic_block_scratch<typename K::space>& k, Hooks& h) {
  std::array<linear_grad, 3> ls{};
  std::size_t n = 0;
  const bool f8 = std::any_of(g.begin(), g.end(), [&](const grouped_grad& x) { return d.f8.covers(x.r); });
  for (const grouped_grad& x : g)
    if (f8) {
      if (din || x.l.dw) linear_backward<K>(din, x.l.dw, x.l.dout, in, x.l.w, N, C, x.l.OC, x.r, d, k, h);
    } else {
      ls.at(n++) = x.l;
    }
  K::matmuls_backward(din, in, N, C, std::span<const linear_grad>(ls.data(), n));
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

// The regions around tensor parallel's layout changes. Each is a gather G in front of
// column-parallel GEMMs, or row-parallel GEMMs in front of a reduce R, in forward and in
// backward. Without async TP (the hooks do not overlap) a region runs as it always did: the
// collective, then the GEMMs over every token (or the other way round). Under async TP
// (tensor_parallel's async_tp) the hooks run G as ring steps, handing each arrived part of
// the sequence to the region's GEMMs, and R as ring steps, asking for the GEMM of the part
// sent next (parallel/tensor_parallel.hpp). A region with a Float8 tensorwise linear runs
// whole: its scale needs every row before the first GEMM. Rowwise scales are per row (and
// per weight row or column), so those regions run in parts, each part's casts as a whole
// tensor's rows would be.

/// K::add, as the ring's reduce-scatter accumulates with it.
template <class K>
auto adder() {
  return [](float* y, const float* a, const float* b, std::int64_t n) { K::add(y, a, b, n); };
}
/// The gradients a backward region hands on: its input gradient as the GEMMs saw it
/// (gathered), and the reduced gradient of the norm in front of the region.
struct region_grads {
  const float* dout = nullptr;
  const float* dn = nullptr;
};

/// q, k, v (those asked for) from s.an: gathered first when `gather` (else s.an_seen as kept).
template <class K = cpu_kernels, class Hooks>
void qkv_forward(basic_block_saved<typename K::space>& s, basic_block_scratch<typename K::space>& k,
                 const block_params& w, const llama_dims& d, Hooks& h, bool gather, bool q, bool kk, bool v) {
  if (!gather && !(q || kk || v)) return;
  const std::int64_t D = d.D, Hq = d.Hq(), Hk = d.Hk();
  auto gemms = [&](const float* in, std::int64_t r0, std::int64_t n) {
    grouped_forward<K>(in, n, D,
                       {{q, param_role::attention_q, {s.q.data() + r0 * Hq, w.wq, Hq}},
                        {kk, param_role::attention_k, {s.k.data() + r0 * Hk, w.wk, Hk}},
                        {v, param_role::attention_v, {s.v.data() + r0 * Hk, w.wv, Hk}}},
                       d, k, h);
  };
  const bool whole = runs_whole(d.f8, tp_region::qkv);
  if (gather)
    s.an_seen = h.gather_each(s.an.data(), s.an_full.data(), D, d.B, d.T, whole, gemms);
  else
    h.each_part(s.an_seen, D, d.B, d.T, whole, gemms);
}
/// mid = x + R(wo(att)).
template <class K = cpu_kernels, class Hooks>
void wo_forward(const float* x, basic_block_saved<typename K::space>& s, basic_block_scratch<typename K::space>& k,
                const block_params& w, const llama_dims& d, Hooks& h) {
  const std::int64_t D = d.D, Hq = d.Hq();
  auto gemm = [&](float* out, std::int64_t r0, std::int64_t n) {
    linear_forward<K>(out, s.att.data() + r0 * Hq, w.wo, n, Hq, D, param_role::attention_o, d, k, h);
  };
  const bool whole = runs_whole(d.f8, tp_region::wo);
  K::add(s.mid.data(), x, h.reduce_each(k.proj.data(), s.mid.data(), D, d.B, d.T, whole, gemm, adder<K>()),
         d.Nr() * D);
}
/// h1 and h3 (those asked for) from s.fn: gathered first when `gather` (else s.fn_seen as kept).
template <class K = cpu_kernels, class Hooks>
void ffn_in_forward(basic_block_saved<typename K::space>& s, basic_block_scratch<typename K::space>& k,
                    const block_params& w, const llama_dims& d, Hooks& h, bool gather, bool w1, bool w3) {
  if (!gather && !(w1 || w3)) return;
  const std::int64_t D = d.D, F = d.F;
  auto gemms = [&](const float* in, std::int64_t r0, std::int64_t n) {
    grouped_forward<K>(in, n, D,
                       {{w1, param_role::ffn_w1, {s.h1.data() + r0 * F, w.w1, F}},
                        {w3, param_role::ffn_w3, {s.h3.data() + r0 * F, w.w3, F}}},
                       d, k, h);
  };
  const bool whole = runs_whole(d.f8, tp_region::w13);
  if (gather)
    s.fn_seen = h.gather_each(s.fn.data(), s.fn_full.data(), D, d.B, d.T, whole, gemms);
  else
    h.each_part(s.fn_seen, D, d.B, d.T, whole, gemms);
}
/// out = mid + R(w2(silu(w1 G(fn)) * w3 G(fn))): the feed-forward branch (its fused kernels
/// when neither region overlaps).
template <class K = cpu_kernels, class Hooks>
void ffn_forward(float* out, basic_block_saved<typename K::space>& s, basic_block_scratch<typename K::space>& k,
                 const block_params& w, const llama_dims& d, Hooks& h) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D, F = d.F;
  const bool whole_in = runs_whole(d.f8, tp_region::w13), whole_out = runs_whole(d.f8, tp_region::w2);
  if (!h.overlaps(whole_in) && !h.overlaps(whole_out)) {
    s.fn_seen = h.gather(s.fn.data(), s.fn_full.data());
    feed_forward_forward<K>(k.proj.data(), s.h1.data(), s.h3.data(), s.act.data(), s.fn_seen, w, d, k, h);
    K::add(out, s.mid.data(), h.reduce(k.proj.data(), out), Nr * D);
    return;
  }
  ffn_in_forward<K>(s, k, w, d, h, true, true, true);
  K::swiglu_forward(s.act.data(), s.h1.data(), s.h3.data(), N * F);
  auto gemm = [&](float* o, std::int64_t r0, std::int64_t n) {
    linear_forward<K>(o, s.act.data() + r0 * F, w.w2, n, F, D, param_role::ffn_w2, d, k, h);
  };
  K::add(out, s.mid.data(), h.reduce_each(k.proj.data(), out, D, d.B, d.T, whole_out, gemm, adder<K>()), Nr * D);
}

/// The feed-forward branch's backward from dres [Nr, D]: leaves dh1, dh3 in k.ffn; the weight
/// gradients not nullptr accumulate.
template <class K = cpu_kernels, class Hooks>
region_grads ffn_backward(float* dres, float* dw1, float* dw3, float* dw2, const basic_block_saved<typename K::space>& s,
                          basic_block_scratch<typename K::space>& k, const block_params& w, const llama_dims& d,
                          Hooks& h) {
  const std::int64_t N = d.N(), D = d.D, F = d.F;
  float* dfull = k.dfull.data();
  const bool whole_in = runs_whole(d.f8, tp_region::w13), whole_out = runs_whole(d.f8, tp_region::w2);
  if (!h.overlaps(whole_in) && !h.overlaps(whole_out)) {
    K::zero(dfull, N * D);
    const float* dout = h.gather(dres, k.dgath.data());
    feed_forward_backward<K>(dfull, dw1, dw3, dw2, dout, s.fn_seen, s, w, d, k, h);
    return {dout, h.reduce(dfull, k.dtmp.data())};
  }
  float* dh1 = k.ffn.data();  // dact, then dh1 in place
  float* dh3 = dh1 + N * F;
  K::zero(dh1, N * F);
  const float* dout = h.gather_each(dres, k.dgath.data(), D, d.B, d.T, whole_out,
                                    [&](const float* in, std::int64_t r0, std::int64_t n) {
                                      linear_backward<K>(dh1 + r0 * F, nullptr, in, s.act.data() + r0 * F, w.w2, n, F,
                                                         D, param_role::ffn_w2, d, k, h);
                                    });
  if (dw2) linear_backward<K>(nullptr, dw2, dout, s.act.data(), w.w2, N, F, D, param_role::ffn_w2, d, k, h);
  K::swiglu_backward(dh1, dh3, dh1, s.h1.data(), s.h3.data(), N * F);
  grouped_backward<K>(nullptr, s.fn_seen, N, D,
                      {{param_role::ffn_w1, {dw1, dh1, w.w1, F}}, {param_role::ffn_w3, {dw3, dh3, w.w3, F}}}, d, k, h);
  auto gemms = [&](float* out, std::int64_t r0, std::int64_t n) {
    K::zero(out, n * D);
    grouped_backward<K>(out, s.fn_seen + r0 * D, n, D,
                        {{param_role::ffn_w1, {nullptr, dh1 + r0 * F, w.w1, F}},
                         {param_role::ffn_w3, {nullptr, dh3 + r0 * F, w.w3, F}}},
                        d, k, h);
  };
  return {dout, h.reduce_each(dfull, k.dtmp.data(), D, d.B, d.T, whole_in, gemms, adder<K>())};
}
/// wo's backward from dres [Nr, D]: k.datt = its input gradient; dwo accumulates when not
/// nullptr. Returns dres as the GEMMs saw it (gathered).
template <class K = cpu_kernels, class Hooks>
const float* wo_backward(float* dres, float* dwo, const basic_block_saved<typename K::space>& s,
                         basic_block_scratch<typename K::space>& k, const block_params& w, const llama_dims& d,
                         Hooks& h) {
  const std::int64_t N = d.N(), D = d.D, Hq = d.Hq();
  const bool whole = runs_whole(d.f8, tp_region::wo);
  K::zero(k.datt.data(), N * Hq);
  if (!h.overlaps(whole)) {
    const float* dout = h.gather(dres, k.dgath.data());
    linear_backward<K>(k.datt.data(), dwo, dout, s.att.data(), w.wo, N, Hq, D, param_role::attention_o, d, k, h);
    return dout;
  }
  const float* dout = h.gather_each(dres, k.dgath.data(), D, d.B, d.T, whole,
                                    [&](const float* in, std::int64_t r0, std::int64_t n) {
                                      linear_backward<K>(k.datt.data() + r0 * Hq, nullptr, in, s.att.data() + r0 * Hq,
                                                         w.wo, n, Hq, D, param_role::attention_o, d, k, h);
                                    });
  if (dwo) linear_backward<K>(nullptr, dwo, dout, s.att.data(), w.wo, N, Hq, D, param_role::attention_o, d, k, h);
  return dout;
}
/// q, k, v's backward from k.dq, k.dk, k.dv: returns the reduced gradient of attention_norm's
/// output; the weight gradients not nullptr accumulate.
template <class K = cpu_kernels, class Hooks>
const float* qkv_backward(float* dwq, float* dwk, float* dwv, const basic_block_saved<typename K::space>& s,
                          basic_block_scratch<typename K::space>& k, const block_params& w, const llama_dims& d,
                          Hooks& h) {
  const std::int64_t N = d.N(), D = d.D, Hq = d.Hq(), Hk = d.Hk();
  using r = param_role;
  float* dfull = k.dfull.data();
  const bool whole = runs_whole(d.f8, tp_region::qkv);
  // the weight gradients (dfull too when the region does not overlap), then the input's
  auto group = [&](float* din, std::int64_t r0, std::int64_t n, bool dw) {
    grouped_backward<K>(din, s.an_seen + r0 * D, n, D,
                        {{r::attention_q, {dw ? dwq : nullptr, k.dq.data() + r0 * Hq, w.wq, Hq}},
                         {r::attention_k, {dw ? dwk : nullptr, k.dk.data() + r0 * Hk, w.wk, Hk}},
                         {r::attention_v, {dw ? dwv : nullptr, k.dv.data() + r0 * Hk, w.wv, Hk}}},
                        d, k, h);
  };
  if (!h.overlaps(whole)) {
    K::zero(dfull, N * D);
    group(dfull, 0, N, true);
    return h.reduce(dfull, k.dtmp.data());
  }
  group(nullptr, 0, N, true);
  auto gemms = [&](float* out, std::int64_t r0, std::int64_t n) {
    K::zero(out, n * D);
    group(out, r0, n, false);
  };
  return h.reduce_each(dfull, k.dtmp.data(), D, d.B, d.T, whole, gemms, adder<K>());
}
}  // namespace detail

}  // namespace tessera
