// The per-element math the CPU and CUDA kernels share (kernels/pointwise.hpp), checked on
// the host against the formulas in double precision -- the part of the GPU path's numerics
// that needs no GPU -- and the CPU kernels computing with it.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>
#include <tessera/kernels/pointwise.hpp>

using namespace tessera;

namespace {
double rel(double got, double want) { return std::abs(got - want) / std::max(1e-30, std::abs(want)); }
double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

TEST_CASE("pointwise: fast_exp and sigmoid against double precision") {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.01) worst = std::max(worst, rel(pointwise::fast_exp(static_cast<float>(x)), std::exp(static_cast<double>(static_cast<float>(x)))));
  CHECK(worst < 2.5e-7);
  CHECK(std::isnan(pointwise::fast_exp(std::nanf(""))));
  CHECK(pointwise::fast_exp(-1000.0f) < 1e-37f);
  CHECK(pointwise::fast_exp(1000.0f) == pointwise::fast_exp(88.3f));
  double s_worst = 0;
  for (double x = -30.0; x <= 30.0; x += 0.01) s_worst = std::max(s_worst, rel(pointwise::sigmoid(static_cast<float>(x)), sig(static_cast<float>(x))));
  CHECK(s_worst < 1e-6);
}

TEST_CASE("pointwise: SwiGLU, its gradients, RoPE's rotation, RMSNorm's elements") {
  std::mt19937 g(3);
  std::normal_distribution<float> n(0.0f, 2.0f);
  double f = 0, d1 = 0, d3 = 0, rot = 0, rms = 0;
  for (int i = 0; i < 20000; ++i) {
    const float x = n(g), u = n(g), dy = n(g), angle = n(g), c = std::cos(angle), s = std::sin(angle),
                r = std::abs(n(g)) + 0.1f, w = n(g), k = n(g);
    const double X = x, U = u, S = sig(X);
    f = std::max(f, std::abs(pointwise::swiglu(x, u) - X * S * U) / (1 + std::abs(X * S * U)));
    const pointwise::pair d = pointwise::swiglu_grad(dy, x, u);
    const double want1 = dy * U * (S + X * S * (1 - S)), want3 = dy * X * S;
    d1 = std::max(d1, std::abs(d.first - want1) / (1 + std::abs(want1)));
    d3 = std::max(d3, std::abs(d.second - want3) / (1 + std::abs(want3)));
    const pointwise::pair q = pointwise::rope_rotate(x, u, c, s);
    rot = std::max({rot, std::abs(q.first - (X * c - U * s)), std::abs(q.second - (X * s + U * c))});
    // the rotation back (sine negated) returns the pair
    const pointwise::pair b = pointwise::rope_rotate(q.first, q.second, c, -s);
    rot = std::max({rot, std::abs(b.first - X) / (1 + std::abs(X)), std::abs(b.second - U) / (1 + std::abs(U))});
    rms = std::max(rms, std::abs(pointwise::rmsnorm_scale(x, r, w) - X * r * w) / (1 + std::abs(X * r * w)));
    const double gw = static_cast<double>(r) * dy * w - static_cast<double>(k) * X;
    rms = std::max(rms, std::abs(pointwise::rmsnorm_grad(x, dy, w, r, k) - gw) / (1 + std::abs(gw)));
  }
  CHECK(f < 1e-6);
  CHECK(d1 < 2e-6);
  CHECK(d3 < 1e-6);
  CHECK(rot < 2e-6);
  CHECK(rms < 1e-6);
}

TEST_CASE("pointwise: one AdamW step equals torch.optim.AdamW's formula in double") {
  const cpu::adamw_config cfg;
  for (std::int64_t step : {1, 2, 10, 1000}) {
    CAPTURE(step);
    const pointwise::adamw_scalars k = cpu::adamw_step_scalars(step, cfg);
    float p = 0.3f, m = 0.01f, v = 0.002f;
    const float gr = -0.7f;
    pointwise::adamw(p, m, v, gr, k);
    const double b1 = cfg.beta1, b2 = cfg.beta2, lr = cfg.lr;
    const double M = 0.01 + (1 - b1) * (gr - 0.01), V = b2 * 0.002 + (1 - b2) * gr * gr;
    const double P = 0.3 * (1 - lr * cfg.weight_decay) -
                     lr / (1 - std::pow(b1, step)) * M / (std::sqrt(V) / std::sqrt(1 - std::pow(b2, step)) + cfg.eps);
    CHECK(rel(m, M) < 1e-6);
    CHECK(rel(v, V) < 1e-6);
    CHECK(rel(p, P) < 1e-6);
  }
  CHECK_THROWS_WITH(cpu::adamw_step_scalars(0, cfg), doctest::Contains("step counts from 1"));
}

TEST_CASE("pointwise: the CPU kernels compute with the shared functions (the same bits)") {
  std::mt19937 g(5);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> h1(1000), h3(1000), dy(1000), out(1000), dh1(1000), dh3(1000);
  for (std::size_t i = 0; i < h1.size(); ++i) h1[i] = n(g), h3[i] = n(g), dy[i] = n(g);
  cpu::swiglu_forward(out.data(), h1.data(), h3.data(), 1000);
  cpu::swiglu_backward(dh1.data(), dh3.data(), dy.data(), h1.data(), h3.data(), 1000);
  for (std::size_t i = 0; i < h1.size(); ++i) {
    CHECK(out[i] == pointwise::swiglu(h1[i], h3[i]));
    CHECK(dh1[i] == pointwise::swiglu_grad(dy[i], h1[i], h3[i]).first);
    CHECK(dh3[i] == pointwise::swiglu_grad(dy[i], h1[i], h3[i]).second);
  }
}

TEST_CASE("pointwise: pow2_floor_as_log2f equals exp2(floor(log2(s))) on the float near every power of two") {
  // torchao's power-of-two rounding is exp2(floor(log2(s))) on the float; the shared function
  // computes it from s's bits. Away from a power of two log2f's result lies many of its ulps
  // from an integer, so the floor cannot differ there; near one it can, and every float
  // within 4096 steps of each power of two is compared (and every subnormal, and a sample).
  const auto libm = [](float s) { return std::exp2(std::floor(std::log2(s))); };
  const auto bits = [](float f) { return std::bit_cast<std::uint32_t>(f); };
  std::int64_t compared = 0, kept_above = 0, mismatches = 0;
  const auto compare = [&](std::uint32_t b) {
    const float s = std::bit_cast<float>(b), want = libm(s), got = pointwise::pow2_floor_as_log2f(s);
    ++compared;
    if (want > s) ++kept_above;
    if (bits(got) != bits(want) && mismatches++ < 5)
      FAIL_CHECK("s = " << s << " (bits " << b << "): " << got << ", libm " << want);
  };
  for (std::uint32_t e = 1; e <= 254; ++e) {
    const std::uint32_t p = e << 23;  // 2^(e - 127)
    for (std::uint32_t d = 0; d < 4096; ++d) compare(p + d);
    for (std::uint32_t d = 1; d <= 4096; ++d) compare(p - d);
  }
  for (std::uint32_t b = 1; b < (1u << 23); ++b) compare(b);  // the subnormals
  std::mt19937 g(7);
  std::uniform_int_distribution<std::uint32_t> any(1, 0x7f7fffffu);
  for (int i = 0; i < 1000000; ++i) compare(any(g));
  CHECK(mismatches == 0);
  CHECK(kept_above > 100);  // the rounding the bits reproduce happens (nextafter(1024, 0) -> 1024)
  CHECK(pointwise::pow2_floor_as_log2f(std::nextafter(1024.0f, 0.0f)) == 1024.0f);
  CHECK(pointwise::pow2_floor_as_log2f(1000.0f) == 512.0f);
  CHECK(pointwise::pow2_floor_as_log2f(0.0f) == 0.0f);
  CHECK(std::isinf(pointwise::pow2_floor_as_log2f(std::numeric_limits<float>::infinity())));
  CHECK(std::isinf(pointwise::pow2_floor_as_log2f(std::numeric_limits<float>::max())));  // log2f rounds to 128
  CHECK(std::isnan(pointwise::pow2_floor_as_log2f(std::nanf(""))));
  CHECK(std::isnan(pointwise::pow2_floor_as_log2f(-1.0f)));
  MESSAGE(compared << " floats compared, " << kept_above << " of them keep the power of two above");
}

TEST_CASE("pointwise: f8_scale is torchao's amax_to_scale in double") {
  for (float amax : {0.0f, 1e-20f, 1e-12f, 3e-5f, 0.5f, 1.0f, 448.0f, 3.0e38f})
    for (float mf : {448.0f, 57344.0f}) {
      const double a = std::max(static_cast<double>(amax), 1e-12);
      const float s = static_cast<float>(mf / a);
      CHECK(pointwise::f8_scale(amax, mf, false) == s);
      CHECK(pointwise::f8_scale(amax, mf, true) == std::exp2(std::floor(std::log2(s))));
    }
  CHECK(std::isnan(pointwise::f8_scale(std::nanf(""), 448.0f, false)));
  CHECK(std::isnan(pointwise::f8_scale(std::nanf(""), 448.0f, true)));
}
