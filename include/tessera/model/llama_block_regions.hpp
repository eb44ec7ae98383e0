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

// Async TP runs a reduce region's GEMMs (the row-parallel linears' forward, the
// column-parallel ones' input gradient) on parts of the sequence. Their rowwise casts' scale
// groups span the TP ranks (the row-parallel input and weight, the column-parallel output
// gradient and weight), so their amaxes are max-reduced over tp. The whole tensors' amaxes are
// reduced once before the ring -- the all-reduces the region makes when it runs whole, in the
// same order -- and each part's GEMM takes its rows' slice and the weight's, where it made
// its own all-reduces (B x tp of them a GEMM, the weight's each time). The scales are those of
// the whole tensor either way.

/// The amax reduction of the part of rows r0 .. r0 + n of a linear whose whole tensors'
/// amaxes were reduced (f8_whole_amaxes): op[0]'s rows, then op[1]'s (the weight's), in the
/// order the backends' Float8 GEMMs ask for them (kernels/cpu/float8_linear.hpp). Not
/// `prepared` (the default: a region run whole): the hooks reduce instead.
template <class K>
struct f8_part_reduce {
  const float* rows = nullptr;    ///< op[0]'s amaxes, one a row of the whole tensor (nullptr: none spans)
  const float* weight = nullptr;  ///< op[1]'s
  std::int64_t r0 = 0, n = 0, n_weight = 0;
  bool prepared = false;
  int calls = 0;
  void operator()(float* amax, std::int64_t count) {
    const bool first = calls++ == 0 && rows != nullptr;
    const float* src = first ? rows + r0 : weight;
    check(src != nullptr && count == (first ? n : n_weight),
          "llama: async TP's Float8 parts: an amax reduction the region did not prepare (tessera bug)");
    K::copy(amax, src, count);
  }
};
template <class K>
struct f8_whole_amaxes {
  const float* rows = nullptr;
  const float* weight = nullptr;
  std::int64_t n_weight = 0;
  bool prepared = false;  ///< reduced before the parts (a region in parts with amax staging)
  f8_part_reduce<K> part(std::int64_t r0, std::int64_t n) const { return {rows, weight, r0, n, n_weight, prepared}; }
};
/// Where a region in parts keeps the whole tensors' amaxes (the TP hooks' staging of
/// f8_part_amax_floats), or nullptr when it runs whole or reduces none.
template <class Hooks>
float* f8_part_amaxes(const llama_dims& d, Hooks& h, bool whole) {
  const std::int64_t n = f8_part_amax_floats(d);
  return n > 0 && h.overlaps(whole) ? h.amax_staging(n) : nullptr;
}
/// Linear r's reduce-side GEMM's spanning amaxes over the whole tensors (x0 [N, C or OC] the
/// activation operand, W the weight), reduced over tp, into `buf` (advanced past them).
template <class K, class Hooks>
f8_whole_amaxes<K> f8_reduce_whole(param_role r, const float* x0, const float* W, const llama_dims& d, Hooks& h,
                                   float*& buf) {
  f8_whole_amaxes<K> a;
  if (!d.f8.covers(r) || buf == nullptr) return a;
  a.prepared = true;
  const auto [C, OC] = block_linear_features(r, d);
  const auto op = cpu::f8_gemm_operands(f8_reduce_side_gemm(r), f8_casts_of(d.f8), d.N(), C, OC, f8_split_of(r, d));
  if constexpr (K::float8) {
    if (op[0].spans()) {
      check(op[0].cast->granularity == cpu::f8_granularity::per_row,
            "llama: async TP runs a region in parts only with per-row activation scales (tessera bug)");
      K::f8_amax(buf, x0, op[0].rows, op[0].cols, op[0].cast->granularity);
      h.reduce_amax(buf, op[0].scales());
      a.rows = buf;
      buf += op[0].scales();
    }
    if (op[1].spans()) {
      K::f8_amax(buf, W, op[1].rows, op[1].cols, op[1].cast->granularity);
      h.reduce_amax(buf, op[1].scales());
      a.weight = buf, a.n_weight = op[1].scales();
      buf += op[1].scales();
    }
  }
  return a;
}

/// out [N, OC] = in [N, C] . W [OC, C]^T: the block's linear `r`, with Float8 operands when
/// d.f8 covers it (their amaxes reduced by the hooks, or, for async TP's part, `part`'s).
template <class K = cpu_kernels, class Hooks>
void linear_forward(float* out, const float* in, const float* W, std::int64_t N, std::int64_t C, std::int64_t OC,
                    param_role r, const llama_dims& d, basic_block_scratch<typename K::space>& k, Hooks& h,
                    const f8_part_reduce<K>& part = {}) {
  if (!d.f8.covers(r)) return K::matmul_forward(out, in, W, N, C, OC);
  need<K>(K::float8, "a Float8 linear");
  if constexpr (K::float8) {
    const auto f8 = [&](auto&& reduce) {
      const linear_out l{out, W, OC};
      K::f8_matmuls_forward(in, N, C, {&l, 1}, f8_casts_of(d.f8), k.f8a.data(), k.f8b.data(), f8_split_of(r, d), reduce);
    };
    part.prepared ? f8(f8_part_reduce<K>(part)) : f8(amax_reduce(h));
  }
}
/// din += dout . W (with write_din, din = dout . W: what it held is not read), dW += dout^T . in
/// for linear `r` (either may be nullptr), as linear_forward.
template <class K = cpu_kernels, class Hooks>
void linear_backward(float* din, float* dW, const float* dout, const float* in, const float* W, std::int64_t N,
                     std::int64_t C, std::int64_t OC, param_role r, const llama_dims& d,
                     basic_block_scratch<typename K::space>& k, Hooks& h, const f8_part_reduce<K>& part = {},
                     bool write_din = false) {
  if (!d.f8.covers(r)) return K::matmul_backward(din, dW, dout, in, W, N, C, OC, write_din);
  need<K>(K::float8, "a Float8 linear");
  if constexpr (K::float8) {
    const auto f8 = [&](auto&& reduce) {
      const linear_grad l{dW, dout, W, OC};
      K::f8_matmuls_backward(din, in, N, C, {&l, 1}, f8_casts_of(d.f8), k.f8a.data(), k.f8b.data(), f8_split_of(r, d),
                             reduce, write_din);
    };
    part.prepared ? f8(f8_part_reduce<K>(part)) : f8(amax_reduce(h));
  }
}
/// A linear of a group that reads one input (q, k, v; w1, w3), run when `on`.
struct grouped_linear {
  bool on;
  param_role r;
  linear_out l;
};
/// Whether a group's linears (roles rs) run as one Float8 group, K::f8_matmuls_forward /
/// _backward (the input's operand cast once): all Float8, under one split.
inline bool f8_one_group(std::span<const param_role> rs, const llama_dims& d) {
  return !rs.empty() && std::all_of(rs.begin(), rs.end(), [&](param_role r) {
    return d.f8.covers(r) && f8_split_of(r, d) == f8_split_of(rs.front(), d);
  });
}
/// The group's linears on `in` [N, C]: as one K::matmuls_forward (the input's operand
/// prepared once) when none is Float8, as one K::f8_matmuls_forward when all are (f8_one_group),
/// else one by one.
template <class K = cpu_kernels, class Hooks>
void grouped_forward(const float* in, std::int64_t N, std::int64_t C, std::initializer_list<grouped_linear> g,
                     const llama_dims& d, basic_block_scratch<typename K::space>& k, Hooks& h) {
  std::array<linear_out, 3> ls{};
  std::array<param_role, 3> rs{};
  std::size_t n = 0;
  for (const grouped_linear& x : g)
    if (x.on) rs.at(n) = x.r, ls.at(n++) = x.l;
  const std::span<const linear_out> group(ls.data(), n);
  const bool f8 = std::any_of(rs.begin(), rs.begin() + n, [&](param_role r) { return d.f8.covers(r); });
  if (!f8) return K::matmuls_forward(in, N, C, group);
  if (!f8_one_group({rs.data(), n}, d)) {
    for (std::size_t i = 0; i < n; ++i) linear_forward<K>(ls[i].out, in, ls[i].w, N, C, ls[i].OC, rs[i], d, k, h);
    return;
  }
  need<K>(K::float8, "a Float8 linear");
  if constexpr (K::float8)
    K::f8_matmuls_forward(in, N, C, group, f8_casts_of(d.f8), k.f8a.data(), k.f8b.data(), f8_split_of(rs[0], d),
                          amax_reduce(h));
}
/// A linear's backward in a group (din += dout . W, dW += dout^T . in when not nullptr).
struct grouped_grad {
  param_role r;
  linear_grad l;
};
/// The group's backward, din accumulating in the group's order (with write_din, written by the
/// first: what it held is not read): one K::matmuls_backward when none is Float8, one
/// K::f8_matmuls_backward when all are (f8_one_group) and no part reduces, else one by one.
/// `parts` (async TP's part of a region): each linear's amax reduction, in the group's order.
template <class K = cpu_kernels, class Hooks>
void grouped_backward(float* din, const float* in, std::int64_t N, std::int64_t C,
                      std::initializer_list<grouped_grad> g, const llama_dims& d,
                      basic_block_scratch<typename K::space>& k, Hooks& h,
                      std::span<const f8_part_reduce<K>> parts = {}, bool write_din = false) {
  std::array<linear_grad, 3> ls{};
  std::array<param_role, 3> rs{};
  std::size_t n = 0;
  for (const grouped_grad& x : g) rs.at(n) = x.r, ls.at(n++) = x.l;
  const std::span<const linear_grad> group(ls.data(), n);
  if (std::none_of(rs.begin(), rs.begin() + n, [&](param_role r) { return d.f8.covers(r); }))
    return K::matmuls_backward(din, in, N, C, group, write_din);
  if (parts.empty() && f8_one_group({rs.data(), n}, d)) {
    need<K>(K::float8, "a Float8 linear");
    if constexpr (K::float8)
      K::f8_matmuls_backward(din, in, N, C, group, f8_casts_of(d.f8), k.f8a.data(), k.f8b.data(),
                             f8_split_of(rs[0], d), amax_reduce(h), write_din);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!din && !ls[i].dw) continue;
    const f8_part_reduce<K> part = i < parts.size() ? parts[i] : f8_part_reduce<K>{};
    linear_backward<K>(din, ls[i].dw, ls[i].dout, in, ls[i].w, N, C, ls[i].OC, rs[i], d, k, h, part, write_din);
    write_din = false;
  }
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
/// Accumulates din [N, D] (with write_din, writes it) and the weight gradients of g that are
/// not nullptr; leaves dh1, dh3 in k.ffn.
template <class K = cpu_kernels, class Hooks>
void feed_forward_backward(float* din, float* dw1, float* dw3, float* dw2, const float* dout, const float* in,
                           const basic_block_saved<typename K::space>& s, const block_params& w, const llama_dims& d,
                           basic_block_scratch<typename K::space>& k, Hooks& h, bool write_din = false) {
  const std::int64_t N = d.N(), D = d.D, F = d.F;
  if (!d.f8.any())
    return K::feed_forward_backward(din, dw1, dw3, dw2, dout, in, s.h1.data(), s.h3.data(), s.act.data(), w.w1,
                                    w.w3, w.w2, N, D, F, k.ffn.data(), write_din);
  float* dh1 = k.ffn.data();  // dact (written), then dh1 in place
  float* dh3 = dh1 + N * F;
  linear_backward<K>(dh1, dw2, dout, s.act.data(), w.w2, N, F, D, param_role::ffn_w2, d, k, h, {}, true);
  K::swiglu_backward(dh1, dh3, dh1, s.h1.data(), s.h3.data(), N * F);
  linear_backward<K>(din, dw1, dh1, in, w.w1, N, D, F, param_role::ffn_w1, d, k, h, {}, write_din);
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
  const bool whole = runs_whole(d.f8, tp_region::wo);
  float* amaxes = f8_part_amaxes(d, h, whole);
  const f8_whole_amaxes<K> wa = f8_reduce_whole<K>(param_role::attention_o, s.att.data(), w.wo, d, h, amaxes);
  auto gemm = [&](float* out, std::int64_t r0, std::int64_t n) {
    linear_forward<K>(out, s.att.data() + r0 * Hq, w.wo, n, Hq, D, param_role::attention_o, d, k, h, wa.part(r0, n));
  };
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
  float* amaxes = f8_part_amaxes(d, h, whole_out);
  const f8_whole_amaxes<K> a2 = f8_reduce_whole<K>(param_role::ffn_w2, s.act.data(), w.w2, d, h, amaxes);
  auto gemm = [&](float* o, std::int64_t r0, std::int64_t n) {
    linear_forward<K>(o, s.act.data() + r0 * F, w.w2, n, F, D, param_role::ffn_w2, d, k, h, a2.part(r0, n));
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
    const float* dout = h.gather(dres, k.dgath.data());
    feed_forward_backward<K>(dfull, dw1, dw3, dw2, dout, s.fn_seen, s, w, d, k, h, true);
    return {dout, h.reduce(dfull, k.dtmp.data())};
  }
  float* dh1 = k.ffn.data();  // dact (each part's rows written), then dh1 in place
  float* dh3 = dh1 + N * F;
  const float* dout = h.gather_each(dres, k.dgath.data(), D, d.B, d.T, whole_out,
                                    [&](const float* in, std::int64_t r0, std::int64_t n) {
                                      linear_backward<K>(dh1 + r0 * F, nullptr, in, s.act.data() + r0 * F, w.w2, n, F,
                                                         D, param_role::ffn_w2, d, k, h, {}, true);
                                    });
  if (dw2) linear_backward<K>(nullptr, dw2, dout, s.act.data(), w.w2, N, F, D, param_role::ffn_w2, d, k, h);
  K::swiglu_backward(dh1, dh3, dh1, s.h1.data(), s.h3.data(), N * F);
  grouped_backward<K>(nullptr, s.fn_seen, N, D,
                      {{param_role::ffn_w1, {dw1, dh1, w.w1, F}}, {param_role::ffn_w3, {dw3, dh3, w.w3, F}}}, d, k, h);
  float* amaxes = f8_part_amaxes(d, h, whole_in);
  const f8_whole_amaxes<K> a1 = f8_reduce_whole<K>(param_role::ffn_w1, dh1, w.w1, d, h, amaxes),
                           a3 = f8_reduce_whole<K>(param_role::ffn_w3, dh3, w.w3, d, h, amaxes);
  auto gemms = [&](float* out, std::int64_t r0, std::int64_t n) {
    const f8_part_reduce<K> parts[] = {a1.part(r0, n), a3.part(r0, n)};
    grouped_backward<K>(out, s.fn_seen + r0 * D, n, D,
                        {{param_role::ffn_w1, {nullptr, dh1 + r0 * F, w.w1, F}},
                         {param_role::ffn_w3, {nullptr, dh3 + r0 * F, w.w3, F}}},
                        d, k, h, parts, true);
  };
  return {dout, h.reduce_each(dfull, k.dtmp.data(), D, d.B, d.T, whole_in, gemms, adder<K>())};
}
/// wo's backward from dres [Nr, D]: k.datt = its input gradient (written); dwo accumulates
/// when not nullptr. Returns dres as the GEMMs saw it (gathered).
template <class K = cpu_kernels, class Hooks>
const float* wo_backward(float* dres, float* dwo, const basic_block_saved<typename K::space>& s,
                         basic_block_scratch<typename K::space>& k, const block_params& w, const llama_dims& d,
                         Hooks& h) {
  const std::int64_t N = d.N(), D = d.D, Hq = d.Hq();
  const bool whole = runs_whole(d.f8, tp_region::wo);
  if (!h.overlaps(whole)) {
    const float* dout = h.gather(dres, k.dgath.data());
    linear_backward<K>(k.datt.data(), dwo, dout, s.att.data(), w.wo, N, Hq, D, param_role::attention_o, d, k, h, {},
                       true);
    return dout;
  }
  const float* dout = h.gather_each(dres, k.dgath.data(), D, d.B, d.T, whole,
                                    [&](const float* in, std::int64_t r0, std::int64_t n) {
                                      linear_backward<K>(k.datt.data() + r0 * Hq, nullptr, in, s.att.data() + r0 * Hq,
                                                         w.wo, n, Hq, D, param_role::attention_o, d, k, h, {}, true);
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
  // the weight gradients (dfull too, written, when the region does not overlap), then the input's
  auto group = [&](float* din, std::int64_t r0, std::int64_t n, bool dw,
                   std::span<const f8_part_reduce<K>> parts = {}) {
    grouped_backward<K>(din, s.an_seen + r0 * D, n, D,
                        {{r::attention_q, {dw ? dwq : nullptr, k.dq.data() + r0 * Hq, w.wq, Hq}},
                         {r::attention_k, {dw ? dwk : nullptr, k.dk.data() + r0 * Hk, w.wk, Hk}},
                         {r::attention_v, {dw ? dwv : nullptr, k.dv.data() + r0 * Hk, w.wv, Hk}}},
                        d, k, h, parts, true);
  };
  if (!h.overlaps(whole)) {
    group(dfull, 0, N, true);
    return h.reduce(dfull, k.dtmp.data());
  }
  group(nullptr, 0, N, true);
  float* amaxes = f8_part_amaxes(d, h, whole);
  const f8_whole_amaxes<K> aq = f8_reduce_whole<K>(r::attention_q, k.dq.data(), w.wq, d, h, amaxes),
                           ak = f8_reduce_whole<K>(r::attention_k, k.dk.data(), w.wk, d, h, amaxes),
                           av = f8_reduce_whole<K>(r::attention_v, k.dv.data(), w.wv, d, h, amaxes);
  auto gemms = [&](float* out, std::int64_t r0, std::int64_t n) {
    const f8_part_reduce<K> parts[] = {aq.part(r0, n), ak.part(r0, n), av.part(r0, n)};
    group(out, r0, n, false, parts);
  };
  return h.reduce_each(dfull, k.dtmp.data(), D, d.B, d.T, whole, gemms, adder<K>());
}
}  // namespace detail

}  // namespace tessera
