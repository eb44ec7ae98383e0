// The kernels of context-parallel attention (issue 14): a head-tail split over cp ranks,
// each rank's queries against every rank's K/V block, partials merged by log-sum-exp,
// equals causal attention of the whole sequence (forward and backward, GQA); the document
// mask equals a direct O(T^2) reference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/ring_attention.hpp>
#include <tessera/parallel/context_parallel.hpp>

using namespace tessera;

// A namespace of its own: CI compiles this program as one translation unit (TESSERA_UNITY_TESTS).
namespace ring_attention_tests {
namespace {
struct sizes {
  std::int64_t B = 2, T = 32, NH = 4, NKV = 2, HD = 8;
};

std::vector<float> randn(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// Rows of x [B, T, H, HD] at positions p: [B, |p|, H, HD].
std::vector<float> take(const std::vector<float>& x, const std::vector<std::int64_t>& p, std::int64_t B, std::int64_t T,
                        std::int64_t H, std::int64_t HD) {
  std::vector<float> out;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t : p)
      out.insert(out.end(), x.begin() + ((b * T + t) * H) * HD, x.begin() + ((b * T + t + 1) * H) * HD);
  return out;
}
/// Adds y [B, |p|, H, HD] into x at positions p.
void put_add(std::vector<float>& x, const std::vector<float>& y, const std::vector<std::int64_t>& p, std::int64_t B,
             std::int64_t T, std::int64_t H, std::int64_t HD) {
  const auto n = static_cast<std::int64_t>(p.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t e = 0; e < H * HD; ++e)
        x[static_cast<std::size_t>((b * T + p[static_cast<std::size_t>(i)]) * H * HD + e)] +=
            y[static_cast<std::size_t>((b * n + i) * H * HD + e)];
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

/// Ring attention over cp simulated ranks with the split `bal` (head-tail by default); returns
/// the global out, lse and gradients assembled from the ranks' shares (docs: document ids or
/// empty).
struct ring_result {
  std::vector<float> out, lse, dq, dk, dv;
};
ring_result ring(const sizes& z, int cp, const std::vector<float>& q, const std::vector<float>& k,
                 const std::vector<float>& v, const std::vector<float>& dout, const std::vector<std::int32_t>& docs = {},
                 cp_balance_kind bal = cp_balance_kind::head_tail) {
  const std::int64_t B = z.B, T = z.T, NH = z.NH, NKV = z.NKV, HD = z.HD, Tl = T / cp;
  ring_result r;
  r.out.assign(q.size(), 0.0f);
  r.lse.assign(static_cast<std::size_t>(B * NH * T), 0.0f);
  r.dq.assign(q.size(), 0.0f);
  r.dk.assign(k.size(), 0.0f);
  r.dv.assign(v.size(), 0.0f);
  std::vector<std::vector<std::int64_t>> pos(static_cast<std::size_t>(cp));
  std::vector<std::vector<std::int32_t>> doc(static_cast<std::size_t>(cp));
  for (int s = 0; s < cp; ++s) {
    if (bal == cp_balance_kind::per_document) parallel::cp_document_positions(pos[static_cast<std::size_t>(s)], docs.data(), T, cp, s);
    else pos[static_cast<std::size_t>(s)] = parallel::cp_positions(T, cp, s, bal);
    if (!docs.empty())
      for (std::int64_t t : pos[static_cast<std::size_t>(s)]) doc[static_cast<std::size_t>(s)].push_back(docs[static_cast<std::size_t>(t)]);
  }
  auto span = [&](int s) {
    return cpu::token_span{pos[static_cast<std::size_t>(s)].data(),
                           docs.empty() ? nullptr : doc[static_cast<std::size_t>(s)].data(), Tl};
  };
  std::vector<std::vector<float>> dk_owner(static_cast<std::size_t>(cp)), dv_owner(static_cast<std::size_t>(cp));
  for (int s = 0; s < cp; ++s) {
    dk_owner[static_cast<std::size_t>(s)].assign(static_cast<std::size_t>(B * Tl * NKV * HD), 0.0f);
    dv_owner[static_cast<std::size_t>(s)].assign(static_cast<std::size_t>(B * Tl * NKV * HD), 0.0f);
  }
  for (int me = 0; me < cp; ++me) {
    const auto& p = pos[static_cast<std::size_t>(me)];
    const auto qm = take(q, p, B, T, NH, HD), dom = take(dout, p, B, T, NH, HD);
    std::vector<float> out(qm.size(), 0.0f), lse(static_cast<std::size_t>(B * NH * Tl),
                                                 -std::numeric_limits<float>::infinity());
    std::vector<float> ob(qm.size()), lb(lse.size());
    for (int step = 0; step < cp; ++step) {  // the ring: my block first, then rank me-1's, ...
      const int s = (me - step + cp) % cp;
      const auto ks = take(k, pos[static_cast<std::size_t>(s)], B, T, NKV, HD),
                 vs = take(v, pos[static_cast<std::size_t>(s)], B, T, NKV, HD);
      if (cpu::visibility(span(me), span(s)) == cpu::block_visibility::none) continue;
      cpu::attention_block_forward(ob.data(), lb.data(), qm.data(), ks.data(), vs.data(), span(me), span(s), B, NH,
                                   NKV, HD);
      cpu::attention_merge(out.data(), lse.data(), ob.data(), lb.data(), B, Tl, NH, HD);
    }
    std::vector<float> D(lse.size()), dqm(qm.size(), 0.0f);
    cpu::attention_delta(D.data(), dom.data(), out.data(), B, Tl, NH, HD);
    for (int step = 0; step < cp; ++step) {
      const int s = (me - step + cp) % cp;
      const auto ks = take(k, pos[static_cast<std::size_t>(s)], B, T, NKV, HD),
                 vs = take(v, pos[static_cast<std::size_t>(s)], B, T, NKV, HD);
      cpu::attention_block_backward(dqm.data(), dk_owner[static_cast<std::size_t>(s)].data(),
                                    dv_owner[static_cast<std::size_t>(s)].data(), dom.data(), qm.data(), ks.data(),
                                    vs.data(), lse.data(), D.data(), span(me), span(s), B, NH, NKV, HD);
    }
    put_add(r.out, out, p, B, T, NH, HD);
    put_add(r.dq, dqm, p, B, T, NH, HD);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < NH; ++h)
        for (std::int64_t i = 0; i < Tl; ++i)
          r.lse[static_cast<std::size_t>((b * NH + h) * T + p[static_cast<std::size_t>(i)])] =
              lse[static_cast<std::size_t>((b * NH + h) * Tl + i)];
  }
  for (int s = 0; s < cp; ++s) {  // the owners' dk, dv
    put_add(r.dk, dk_owner[static_cast<std::size_t>(s)], pos[static_cast<std::size_t>(s)], B, T, NKV, HD);
    put_add(r.dv, dv_owner[static_cast<std::size_t>(s)], pos[static_cast<std::size_t>(s)], B, T, NKV, HD);
  }
  return r;
}

/// Causal (and same-document) attention computed directly in double: out, and the gradients
/// by finite-free formulas (softmax Jacobian), for the document test.
void reference(const sizes& z, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
               const std::vector<std::int32_t>& docs, std::vector<float>& out) {
  const std::int64_t B = z.B, T = z.T, NH = z.NH, NKV = z.NKV, HD = z.HD, G = NH / NKV;
  out.assign(q.size(), 0.0f);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        std::vector<double> w(static_cast<std::size_t>(T), 0.0);
        double mx = -1e300, sum = 0;
        for (std::int64_t s = 0; s <= t; ++s) {
          if (!docs.empty() && docs[static_cast<std::size_t>(s)] != docs[static_cast<std::size_t>(t)]) continue;
          double d = 0;
          for (std::int64_t e = 0; e < HD; ++e)
            d += static_cast<double>(q[static_cast<std::size_t>(((b * T + t) * NH + h) * HD + e)]) *
                 k[static_cast<std::size_t>(((b * T + s) * NKV + h / G) * HD + e)];
          w[static_cast<std::size_t>(s)] = d / std::sqrt(static_cast<double>(HD));
          mx = std::max(mx, w[static_cast<std::size_t>(s)]);
        }
        for (std::int64_t s = 0; s <= t; ++s) {
          if (!docs.empty() && docs[static_cast<std::size_t>(s)] != docs[static_cast<std::size_t>(t)]) {
            w[static_cast<std::size_t>(s)] = 0;
            continue;
          }
          w[static_cast<std::size_t>(s)] = std::exp(w[static_cast<std::size_t>(s)] - mx);
          sum += w[static_cast<std::size_t>(s)];
        }
        for (std::int64_t e = 0; e < HD; ++e) {
          double o = 0;
          for (std::int64_t s = 0; s <= t; ++s)
            o += w[static_cast<std::size_t>(s)] * v[static_cast<std::size_t>(((b * T + s) * NKV + h / G) * HD + e)];
          out[static_cast<std::size_t>(((b * T + t) * NH + h) * HD + e)] = static_cast<float>(o / sum);
        }
      }
}
}  // namespace

TEST_CASE("ring attention: head-tail shards over cp ranks, merged by log-sum-exp, equal causal attention (fwd + bwd)") {
  for (int cp : {1, 2, 4}) {
    CAPTURE(cp);
    sizes z;
    const std::int64_t nq = z.B * z.T * z.NH * z.HD, nk = z.B * z.T * z.NKV * z.HD;
    const auto q = randn(static_cast<std::size_t>(nq), 1), k = randn(static_cast<std::size_t>(nk), 2),
               v = randn(static_cast<std::size_t>(nk), 3), dout = randn(static_cast<std::size_t>(nq), 4);
    std::vector<float> out(q.size()), lse(static_cast<std::size_t>(z.B * z.NH * z.T)), dq(q.size()), dk(k.size()),
        dv(v.size());
    cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), z.B, z.T, z.NH, z.NKV, z.HD);
    cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                            lse.data(), z.B, z.T, z.NH, z.NKV, z.HD);
    const ring_result r = ring(z, cp, q, k, v, dout);
    CHECK(max_abs_diff(r.out, out) < 2e-6);
    CHECK(max_abs_diff(r.lse, lse) < 2e-6);
    CHECK(max_abs_diff(r.dq, dq) < 2e-5);
    CHECK(max_abs_diff(r.dk, dk) < 2e-5);
    CHECK(max_abs_diff(r.dv, dv) < 2e-5);
  }
}

TEST_CASE("ring attention: a document mask attends within each document only") {
  sizes z;
  z.T = 48;
  const std::int64_t nq = z.B * z.T * z.NH * z.HD, nk = z.B * z.T * z.NKV * z.HD;
  const auto q = randn(static_cast<std::size_t>(nq), 5), k = randn(static_cast<std::size_t>(nk), 6),
             v = randn(static_cast<std::size_t>(nk), 7), dout = randn(static_cast<std::size_t>(nq), 8);
  std::vector<std::int32_t> docs(static_cast<std::size_t>(z.T));
  for (std::int64_t t = 0; t < z.T; ++t) docs[static_cast<std::size_t>(t)] = t < 7 ? 0 : t < 30 ? 1 : 2;
  std::vector<float> want;
  reference(z, q, k, v, docs, want);
  const ring_result one = ring(z, 1, q, k, v, dout, docs);
  for (int cp : {1, 2, 4}) {
    CAPTURE(cp);
    const ring_result r = ring(z, cp, q, k, v, dout, docs);
    CHECK(max_abs_diff(r.out, want) < 2e-6);
    // the gradients do not depend on how the sequence is split
    CHECK(max_abs_diff(r.dq, one.dq) < 2e-5);
    CHECK(max_abs_diff(r.dk, one.dk) < 2e-5);
    CHECK(max_abs_diff(r.dv, one.dv) < 2e-5);
  }
  // and they are not the causal ones: the mask reaches the backward
  const ring_result causal_grads = ring(z, 1, q, k, v, dout);
  CHECK(max_abs_diff(causal_grads.dk, one.dk) > 1e-3);
  // and without documents the reference is the causal kernel (the reference itself checked)
  std::vector<float> causal, out(q.size()), lse(static_cast<std::size_t>(z.B * z.NH * z.T));
  reference(z, q, k, v, {}, causal);
  cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), z.B, z.T, z.NH, z.NKV, z.HD);
  CHECK(max_abs_diff(causal, out) < 2e-6);
}

TEST_CASE("ring attention: blocks of several tiles -- skipped tile pairs, every split, short and long documents") {
  // 384 tokens: up to six 64-token tiles per block, so tile pairs past the diagonal or
  // across documents are skipped; documents of 1, 5, 70, 130 and 178 tokens
  sizes z;
  z.T = 384;
  const std::int64_t nq = z.B * z.T * z.NH * z.HD, nk = z.B * z.T * z.NKV * z.HD;
  const auto q = randn(static_cast<std::size_t>(nq), 15), k = randn(static_cast<std::size_t>(nk), 16),
             v = randn(static_cast<std::size_t>(nk), 17), dout = randn(static_cast<std::size_t>(nq), 18);
  std::vector<std::int32_t> docs(static_cast<std::size_t>(z.T));
  for (std::int64_t t = 0; t < z.T; ++t) docs[static_cast<std::size_t>(t)] = t < 1 ? 0 : t < 6 ? 1 : t < 76 ? 2 : t < 206 ? 3 : 4;
  for (const bool with_docs : {false, true}) {
    const std::vector<std::int32_t> d = with_docs ? docs : std::vector<std::int32_t>{};
    std::vector<float> want;
    reference(z, q, k, v, d, want);
    const ring_result one = ring(z, 1, q, k, v, dout, d);
    CHECK(max_abs_diff(one.out, want) < 5e-6);
    for (int cp : {2, 3, 4})
      for (cp_balance_kind bal : {cp_balance_kind::head_tail, cp_balance_kind::none, cp_balance_kind::per_document}) {
        if (bal == cp_balance_kind::per_document && !with_docs) continue;
        CAPTURE(with_docs);
        CAPTURE(cp);
        CAPTURE(static_cast<int>(bal));
        const ring_result r = ring(z, cp, q, k, v, dout, d, bal);
        CHECK(max_abs_diff(r.out, want) < 5e-6);
        CHECK(max_abs_diff(r.dq, one.dq) < 2e-5);
        CHECK(max_abs_diff(r.dk, one.dk) < 2e-5);
        CHECK(max_abs_diff(r.dv, one.dv) < 2e-5);
      }
  }
  // cp 1 without documents is the causal kernel of whole sequences, gradients included
  const ring_result one = ring(z, 1, q, k, v, dout);
  std::vector<float> out(q.size()), lse(static_cast<std::size_t>(z.B * z.NH * z.T)), dq(q.size()), dk(k.size()), dv(v.size());
  cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), z.B, z.T, z.NH, z.NKV, z.HD);
  cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                          lse.data(), z.B, z.T, z.NH, z.NKV, z.HD);
  CHECK(max_abs_diff(one.out, out) < 2e-6);
  CHECK(max_abs_diff(one.dq, dq) < 2e-5);
  CHECK(max_abs_diff(one.dk, dk) < 2e-5);
  CHECK(max_abs_diff(one.dv, dv) < 2e-5);
}

TEST_CASE("ring attention: block pairs of the head-tail split are full, partial or skipped") {
  // T = 8 on cp = 2: rank 0 holds positions 0,1 and 6,7; rank 1 holds 2,3 and 4,5
  const auto p0 = parallel::cp_positions(8, 2, 0, cp_balance_kind::head_tail),
             p1 = parallel::cp_positions(8, 2, 1, cp_balance_kind::head_tail);
  CHECK(p0 == std::vector<std::int64_t>{0, 1, 6, 7});
  CHECK(p1 == std::vector<std::int64_t>{2, 3, 4, 5});
  const cpu::token_span s0{p0.data(), nullptr, 4}, s1{p1.data(), nullptr, 4};
  CHECK(cpu::visibility(s0, s0) == cpu::block_visibility::some);  // diagonal
  CHECK(cpu::visibility(s0, s1) == cpu::block_visibility::some);  // the tail sees all of rank 1, the head none
  CHECK(cpu::visibility(s1, s0) == cpu::block_visibility::some);
  const std::int64_t late[] = {6, 7}, early[] = {0, 1};
  CHECK(cpu::visibility({late, nullptr, 2}, {early, nullptr, 2}) == cpu::block_visibility::all);
  CHECK(cpu::visibility({early, nullptr, 2}, {late, nullptr, 2}) == cpu::block_visibility::none);
  CHECK(parallel::cp_seq_problem(10, 2, cp_balance_kind::head_tail, 1).find("seq_len (10) is not divisible by 2 x cp (2) = 4") !=
        std::string::npos);
}
}  // namespace ring_attention_tests
