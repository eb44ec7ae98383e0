// RoPE (Llama 3.1 frequencies, both pairings) and tiled causal GQA attention.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/rope.hpp>

#include "fd.hpp"

using namespace tessera::cpu;
using tt::check_grad;
using tt::randn;

TEST_CASE("rope: Llama 3.1 frequency scaling") {
  const std::int64_t HD = 128;
  std::vector<float> f(HD / 2), plain(HD / 2);
  rope_frequencies(f.data(), HD);
  rope_config c;
  c.scaling = false;
  rope_frequencies(plain.data(), HD, c);
  for (std::int64_t i = 0; i < HD / 2; ++i) {
    const double base = std::pow(500000.0, -2.0 * double(i) / double(HD));
    CHECK(plain[i] == doctest::Approx(base).epsilon(1e-6));
    const double wl = 2 * std::numbers::pi / base;
    if (wl < 2048) {
      CHECK(f[i] == plain[i]);  // high frequencies kept
    } else if (wl > 8192) {
      CHECK(f[i] == doctest::Approx(base / 8).epsilon(1e-6));  // low frequencies / factor
    } else {
      const double s = (8192 / wl - 1) / 3;
      CHECK(f[i] == doctest::Approx((1 - s) * base / 8 + s * base).epsilon(1e-6));
      CHECK(f[i] < plain[i]);
      CHECK(f[i] > plain[i] / 8);
    }
  }
  CHECK(f[0] == 1.0f);
  CHECK(f[63] == doctest::Approx(plain[63] / 8).epsilon(1e-6));
}

TEST_CASE("rope: rotation, inverse, and the interleaved/half conventions agree under the "
          "Hugging Face permutation") {
  const std::int64_t B = 2, T = 5, NH = 3, HD = 8, h = HD / 2;
  std::vector<float> cs(T * h), sn(T * h);
  rope_table(cs.data(), sn.data(), T, HD);
  auto x = randn(B * T * NH * HD, 20);
  std::vector<float> y(x.size()), back(x.size());
  rope_forward(y.data(), x.data(), cs.data(), sn.data(), B, T, NH, HD);
  // interleaved: pair i = (x[2i], x[2i+1]) at angle t f_i
  std::vector<float> f(h);
  rope_frequencies(f.data(), HD);
  const std::int64_t b = 1, t = 3, hd = 2, i = 1;
  const float* xp = x.data() + ((b * T + t) * NH + hd) * HD;
  const double a = double(float(t) * f[i]);
  CHECK(y[((b * T + t) * NH + hd) * HD + 2 * i] ==
        doctest::Approx(xp[2 * i] * std::cos(a) - xp[2 * i + 1] * std::sin(a)).epsilon(1e-5));
  rope_backward(back.data(), y.data(), cs.data(), sn.data(), B, T, NH, HD);
  for (std::size_t k = 0; k < x.size(); ++k) CHECK(back[k] == doctest::Approx(x[k]).epsilon(1e-5));
  // half: the same rotation after permuting each head (HF row j -> interleaved row)
  std::vector<float> xh(x.size()), yh(x.size());
  auto perm = [&](std::int64_t j) { return j < h ? 2 * j : 2 * (j - h) + 1; };
  for (std::int64_t r = 0; r < B * T * NH; ++r)
    for (std::int64_t j = 0; j < HD; ++j) xh[r * HD + j] = x[r * HD + perm(j)];
  rope_forward(yh.data(), xh.data(), cs.data(), sn.data(), B, T, NH, HD, rope_style::half);
  for (std::int64_t r = 0; r < B * T * NH; ++r)
    for (std::int64_t j = 0; j < HD; ++j) CHECK(yh[r * HD + j] == y[r * HD + perm(j)]);
  // finite-difference backward (in place allowed)
  const auto w = randn(x.size(), 21);
  auto loss = [&] {
    rope_forward(y.data(), x.data(), cs.data(), sn.data(), B, T, NH, HD);
    return tt::dot(w, y.data());
  };
  std::vector<float> dx = w;
  rope_backward(dx.data(), dx.data(), cs.data(), sn.data(), B, T, NH, HD);
  check_grad("rope dinp", x, dx, loss);
}

namespace {
// Naive causal GQA attention in double (the full T x T matrix, for tests only).
void naive_attention(std::vector<double>& out, std::vector<double>& lse, const std::vector<float>& q,
                     const std::vector<float>& k, const std::vector<float>& v, std::int64_t B,
                     std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                     std::int64_t t_begin = 0, std::int64_t t_end = -1) {
  if (t_end < 0) t_end = T;
  out.assign(std::size_t(B * T * NH * HD), 0.0);
  lse.assign(std::size_t(B * NH * T), 0.0);
  const double scale = 1.0 / std::sqrt(double(HD));
  std::vector<double> s(T);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h) {
      const std::int64_t g = h / (NH / NKV);
      for (std::int64_t t = t_begin; t < t_end; ++t) {
        double mx = -1e300;
        for (std::int64_t u = 0; u <= t; ++u) {
          double d = 0;
          for (std::int64_t x = 0; x < HD; ++x)
            d += double(q[((b * T + t) * NH + h) * HD + x]) * k[((b * T + u) * NKV + g) * HD + x];
          s[u] = d * scale;
          mx = std::max(mx, s[u]);
        }
        double sum = 0;
        for (std::int64_t u = 0; u <= t; ++u) sum += std::exp(s[u] - mx);
        lse[(b * NH + h) * T + t] = mx + std::log(sum);
        for (std::int64_t u = 0; u <= t; ++u) {
          const double p = std::exp(s[u] - mx) / sum;
          for (std::int64_t x = 0; x < HD; ++x)
            out[((b * T + t) * NH + h) * HD + x] += p * v[((b * T + u) * NKV + g) * HD + x];
        }
      }
    }
}
}  // namespace

TEST_CASE("attention: forward matches a naive causal GQA reference (tiles, ragged T)") {
  struct shape { std::int64_t B, T, NH, NKV, HD; };
  for (shape s : {shape{1, 1, 1, 1, 4}, shape{2, 37, 4, 2, 8}, shape{1, 130, 6, 2, 16},
                  shape{2, 64, 2, 2, 32}, shape{1, 200, 4, 1, 12}}) {
    const auto q = randn(s.B * s.T * s.NH * s.HD, 30), k = randn(s.B * s.T * s.NKV * s.HD, 31),
               v = randn(s.B * s.T * s.NKV * s.HD, 32);
    std::vector<float> out(q.size()), lse(s.B * s.NH * s.T);
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s.B, s.T, s.NH, s.NKV, s.HD);
    std::vector<double> ro, rl;
    naive_attention(ro, rl, q, k, v, s.B, s.T, s.NH, s.NKV, s.HD);
    double eo = 0, el = 0;
    for (std::size_t i = 0; i < out.size(); ++i) eo = std::max(eo, std::fabs(out[i] - ro[i]));
    for (std::size_t i = 0; i < lse.size(); ++i) el = std::max(el, std::fabs(lse[i] - rl[i]));
    CHECK(eo < 2e-5);
    CHECK(el < 2e-5);
  }
  CHECK_THROWS_AS(attention_forward(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 8, 3, 2, 4),
                  tessera::error);
}

TEST_CASE("attention: finite-difference backward for q, k, v (GQA, two tiles)") {
  const std::int64_t B = 1, T = 70, NH = 4, NKV = 2, HD = 4;
  auto q = randn(B * T * NH * HD, 40), k = randn(B * T * NKV * HD, 41), v = randn(B * T * NKV * HD, 42);
  const auto w = randn(q.size(), 43);
  std::vector<float> out(q.size()), lse(B * NH * T);
  auto loss = [&] {
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD);
    return tt::dot(w, out.data());
  };
  loss();
  std::vector<float> dq(q.size(), 9.0f), dk(k.size(), 9.0f), dv(v.size(), 9.0f);  // overwritten
  attention_backward(dq.data(), dk.data(), dv.data(), w.data(), q.data(), k.data(), v.data(),
                     out.data(), lse.data(), B, T, NH, NKV, HD);
  check_grad("dq", q, dq, loss, 40);
  check_grad("dk", k, dk, loss, 40);
  check_grad("dv", v, dv, loss, 40);
}

TEST_CASE("attention: runs at sequence length 8192 without a T x T matrix") {
  const std::int64_t B = 1, T = 8192, NH = 2, NKV = 1, HD = 16;
  const auto q = randn(B * T * NH * HD, 50), k = randn(B * T * NKV * HD, 51),
             v = randn(B * T * NKV * HD, 52), dout = randn(B * T * NH * HD, 53);
  std::vector<float> out(q.size()), lse(B * NH * T), dq(q.size()), dk(k.size()), dv(v.size());
  attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD);
  // spot-check the last rows (the longest) against the naive reference
  std::vector<double> ro, rl;
  naive_attention(ro, rl, q, k, v, B, T, NH, NKV, HD, T - 3, T);
  for (std::int64_t t = T - 3; t < T; ++t)
    for (std::int64_t x = 0; x < NH * HD; ++x)
      CHECK(std::fabs(out[t * NH * HD + x] - ro[t * NH * HD + x]) < 1e-4);
  attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(),
                     out.data(), lse.data(), B, T, NH, NKV, HD);
  double s = 0;
  for (float g : dk) s += double(g);
  CHECK(std::isfinite(s));
  // sum over keys of dS is zero per query row, so sum(dk) = scale * sum_t sum_s dS[t,s] q[t] = 0
  // only when q is constant; instead check dv sums: sum_s dv[s] = sum_t dout[t] (rows of P sum to 1)
  for (std::int64_t x = 0; x < HD; ++x) {
    double a = 0, b = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      a += dv[t * HD + x];
      for (std::int64_t h = 0; h < NH; ++h) b += dout[(t * NH + h) * HD + x];
    }
    CHECK(a == doctest::Approx(b).epsilon(1e-3));
  }
}
