// Cross-entropy, AdamW, gradient norm and clipping, fast exp.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/detail/vec_math.hpp>
#include <tessera/kernels/cpu/grad_norm.hpp>

#include "fd.hpp"

using namespace tessera::cpu;
using tt::check_grad;
using tt::randn;

TEST_CASE("fast_exp: relative error below 3e-7 over the softmax range") {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const double want = std::exp(double(x));
    worst = std::max(worst, std::fabs(detail::fast_exp(x) - want) / want);
  }
  CHECK(worst < 3e-7);
  CHECK(detail::fast_exp(-INFINITY) < 1e-37f);
  CHECK(std::isfinite(detail::fast_exp(1000.0f)));
}

TEST_CASE("cross_entropy: loss definition, ignored targets, fused = separate, FD gradient") {
  const std::int64_t N = 6, V = 11;
  auto logits = randn(N * V, 60, 2.0f);
  const std::vector<std::int32_t> tgt = {3, 0, -100, 10, 7, 3};
  std::vector<float> losses(N);
  const float mean = cross_entropy_forward(losses.data(), logits.data(), tgt.data(), N, V);
  double sum = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    if (tgt[i] < 0) {
      CHECK(losses[i] == 0.0f);
      continue;
    }
    double m = -1e300, s = 0;
    for (std::int64_t v = 0; v < V; ++v) m = std::max(m, double(logits[i * V + v]));
    for (std::int64_t v = 0; v < V; ++v) s += std::exp(logits[i * V + v] - m);
    const double l = m + std::log(s) - logits[i * V + tgt[i]];
    CHECK(losses[i] == doctest::Approx(l).epsilon(1e-5));
    sum += l;
  }
  CHECK(mean == doctest::Approx(sum / 5).epsilon(1e-5));
  std::vector<float> d1(N * V), d2(N * V), l2(N);
  cross_entropy_backward(d1.data(), logits.data(), tgt.data(), N, V);
  const float mean2 = cross_entropy_forward_backward(d2.data(), l2.data(), logits.data(), tgt.data(), N, V);
  CHECK(mean2 == mean);
  CHECK(d1 == d2);
  for (std::int64_t v = 0; v < V; ++v) CHECK(d1[2 * V + v] == 0.0f);
  auto loss = [&] { return double(cross_entropy_forward(nullptr, logits.data(), tgt.data(), N, V)); };
  check_grad("dlogits", logits, d1, loss, 40, 1e-2f, 2e-4, 2e-2);
  // in place, with an explicit scale (gradient accumulation over 3 micro-batches)
  std::vector<float> inplace = logits;
  cross_entropy_forward_backward(inplace.data(), nullptr, inplace.data(), tgt.data(), N, V, 1.0f / 15);
  for (std::size_t i = 0; i < d1.size(); ++i) CHECK(inplace[i] == doctest::Approx(d1[i] / 3).epsilon(1e-5));
  const std::vector<std::int32_t> bad = {0, 11, 0, 0, 0, 0};
  CHECK_THROWS_WITH_AS(cross_entropy_forward(nullptr, logits.data(), bad.data(), N, V),
                       doctest::Contains("target 11 at position 1"), tessera::error);
}

TEST_CASE("adamw: matches torch.optim.AdamW's update, written out in double") {
  const std::size_t n = 5;
  std::vector<float> p = {0.5f, -1.0f, 0.0f, 2.0f, 1e-3f}, m(n, 0.0f), v(n, 0.0f);
  std::vector<double> pd(p.begin(), p.end()), md(n, 0.0), vd(n, 0.0);
  adamw_config cfg;
  cfg.lr = 1e-2f;
  for (int step = 1; step <= 4; ++step) {
    const auto g = randn(n, 70 + static_cast<unsigned>(step));
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, step, cfg);
    for (std::size_t i = 0; i < n; ++i) {
      pd[i] *= 1.0 - 1e-2 * 0.1;
      md[i] = 0.9 * md[i] + 0.1 * g[i];
      vd[i] = 0.95 * vd[i] + 0.05 * double(g[i]) * g[i];
      const double bc1 = 1 - std::pow(0.9, step), bc2 = 1 - std::pow(0.95, step);
      pd[i] -= 1e-2 / bc1 * md[i] / (std::sqrt(vd[i]) / std::sqrt(bc2) + 1e-8);
    }
  }
  for (std::size_t i = 0; i < n; ++i) CHECK(p[i] == doctest::Approx(pd[i]).epsilon(1e-5));
  CHECK_THROWS_AS(adamw_update(p.data(), p.data(), m.data(), v.data(), n, 0, cfg), tessera::error);
}

TEST_CASE("grad norm and clipping as torch.nn.utils.clip_grad_norm_") {
  std::vector<float> g(300001);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = (i % 7 == 0) ? 0.01f : -0.002f;
  double want = 0;
  for (float x : g) want += double(x) * x;
  want = std::sqrt(want);
  CHECK(global_norm(g.data(), g.size()) == doctest::Approx(want).epsilon(1e-6));
  set_num_threads(1);
  const double one = sum_of_squares(g.data(), g.size());
  set_num_threads(2);
  CHECK(sum_of_squares(g.data(), g.size()) == one);  // independent of the thread count
  auto h = g;
  const float norm = clip_grad_norm(h.data(), h.size(), 0.5f);
  CHECK(norm == doctest::Approx(want).epsilon(1e-6));
  CHECK(global_norm(h.data(), h.size()) == doctest::Approx(0.5 * want / (want + 1e-6)).epsilon(1e-5));
  auto k = g;
  clip_grad_norm(k.data(), k.size(), 100.0f);  // under the limit: untouched
  CHECK(k == g);
  clip_grad_norm(k.data(), k.size(), 0.0f);  // 0 turns clipping off
  CHECK(k == g);
}
