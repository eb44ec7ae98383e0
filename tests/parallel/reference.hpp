// The single-rank reference of the parallel equivalence tests: a batch of random ids, the
// loss and every gradient of one forward + backward on one rank, and the comparison.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <tessera/model/llama.hpp>

namespace equivalence {
using namespace tessera;

struct batch {
  std::int64_t B, T;
  std::vector<std::int32_t> in, tg;
};
inline batch make_batch(std::int64_t B, std::int64_t T, std::uint32_t seed) {
  batch b{B, T, {}, {}};
  std::mt19937 g(seed);
  for (std::int64_t i = 0; i < B * T; ++i) {
    b.in.push_back(static_cast<std::int32_t>(g() % 97));
    b.tg.push_back(static_cast<std::int32_t>(g() % 97));
  }
  return b;
}

struct reference {
  float loss;
  std::vector<std::vector<float>> grads;
};
/// One rank's loss and gradients of config `c` (initialized with seed 11) on batch b, with
/// the model's hooks `h` (serial_hooks: the plain model).
template <class Hooks = serial_hooks>
reference serial(const llama_config& c, const batch& b, Hooks h = {}) {
  llama_model m(c);
  m.init_weights(11);
  m.zero_grad();
  reference r{m.forward(b.in, b.tg, b.B, b.T, true, 1.0f, h), {}};
  m.backward(h);
  for (std::int64_t i = 0; i < m.n_tensors(); ++i)
    r.grads.emplace_back(m.grad(i), m.grad(i) + m.entry(i).shape.numel());
  return r;
}

/// The largest deviation of a from b, relative to b's largest entry.
inline double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 1e-6;
  for (float x : b) scale = std::max(scale, static_cast<double>(std::abs(x)));
  for (std::size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(static_cast<double>(a[k]) - b[k]) / scale);
  return worst;
}

}  // namespace equivalence
