// Test helpers: seeded random data and central finite differences of a scalar loss.
//
// Tolerance: kernels compute in f32; the loss sum(w * out) is accumulated in double from
// f32 outputs, so one evaluation carries an absolute error of about 1e-7 * sum|w * out|
// (below 1e-5 for the sizes here). A central difference with step h = 1e-2 divides that by
// 2h (noise <= 1e-3) and adds a truncation error h^2 |f'''| / 6 (~1e-5 for these smooth
// functions). The check |fd - analytic| <= 5e-3 + 2e-2 |analytic| sits above both; a wrong
// sign, a missing term or a transposed index misses it by orders of magnitude. Each
// gradient is sampled at 24 coordinates (all of them for small tensors).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tt {

inline std::vector<float> randn(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// sum_i w[i] * out[i] in double.
inline double dot(const std::vector<float>& w, const float* out) {
  double s = 0.0;
  for (std::size_t i = 0; i < w.size(); ++i) s += static_cast<double>(w[i]) * out[i];
  return s;
}

/// Compares analytic[i] with the central difference of loss() in x[i] for `samples` random
/// coordinates (all of them when x is small). Restores x.
inline void check_grad(const char* what, std::vector<float>& x, const std::vector<float>& analytic,
                       const std::function<double()>& loss, int samples = 24, float h = 1e-2f,
                       double atol = 5e-3, double rtol = 2e-2) {
  REQUIRE(x.size() == analytic.size());
  std::mt19937 g(12345);
  std::vector<std::size_t> idx;
  if (x.size() <= static_cast<std::size_t>(samples)) {
    for (std::size_t i = 0; i < x.size(); ++i) idx.push_back(i);
  } else {
    std::uniform_int_distribution<std::size_t> d(0, x.size() - 1);
    for (int s = 0; s < samples; ++s) idx.push_back(d(g));
  }
  int bad = 0;
  for (std::size_t i : idx) {
    const float x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss();
    x[i] = x0 - h;
    const double lm = loss();
    x[i] = x0;
    const double fd = (lp - lm) / (2.0 * static_cast<double>(h));
    const double an = analytic[i];
    if (std::fabs(fd - an) > atol + rtol * std::fabs(an)) {
      if (++bad <= 3) FAIL_CHECK(std::string(what) << "[" << i << "]: finite difference " << fd << ", analytic " << an);
    }
  }
  CHECK_MESSAGE(bad == 0, std::string(what));
}

}  // namespace tt
