// A toy multi-stage MLP for the executor tests: stage s is y = tanh(W_s x + b_s) on rows
// of `width` floats, `rows` rows per microbatch; the last stage's loss is the mean squared
// error against a fixed target over the whole batch. Explicit forward and backward; each
// (stage, microbatch) contribution to the weight gradients is computed the same way, in
// the same order, whatever the schedule, so it is bit-identical across schedules.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace toy {

struct config {
  int stages = 4;
  int microbatches = 4;
  int rows = 2;   // rows per microbatch
  int width = 3;  // features per row, every layer
  std::size_t per_mb() const { return static_cast<std::size_t>(rows * width); }
  std::size_t batch() const { return per_mb() * static_cast<std::size_t>(microbatches); }
};

/// Deterministic values in [-1, 1) from an integer seed (no <random>: same on every libstdc++).
inline float value(unsigned seed) {
  seed = seed * 2654435761u + 12345u;
  seed ^= seed >> 15;
  seed *= 2246822519u;
  seed ^= seed >> 13;
  return static_cast<float>(seed % 20000u) / 10000.0f - 1.0f;
}

inline std::vector<float> batch_input(const config& c) {
  std::vector<float> x(c.batch());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = value(static_cast<unsigned>(7 + i));
  return x;
}
inline float target(std::size_t i) { return 0.5f * value(static_cast<unsigned>(100000 + i)); }

/// The callbacks of one rank (it may also hold every stage: the sequential reference).
/// Gradients of stage s: gw[s] (width x width, row-major), gb[s]; gabs[s] accumulates
/// |contribution| of each microbatch, for the rounding bound of the tests.
struct mlp {
  config c;
  std::vector<std::vector<float>> w, b, gw, gb, gabs;
  std::map<std::pair<int, int>, std::vector<float>> x_saved, y_saved, dz_saved;
  int calls_f = 0, calls_i = 0, calls_w = 0;

  explicit mlp(const config& cfg) : c(cfg) {
    const auto W = static_cast<std::size_t>(c.width);
    for (int s = 0; s < c.stages; ++s) {
      std::vector<float> ws(W * W), bs(W);
      for (std::size_t i = 0; i < ws.size(); ++i) ws[i] = 0.8f * value(static_cast<unsigned>(1000 * s + i + 1));
      for (std::size_t i = 0; i < bs.size(); ++i) bs[i] = 0.1f * value(static_cast<unsigned>(1000 * s + 500 + i));
      w.push_back(ws);
      b.push_back(bs);
      gw.emplace_back(W * W, 0.0f);
      gb.emplace_back(W, 0.0f);
      gabs.emplace_back(W * W + W, 0.0f);
    }
  }

  void forward(int s, int mb, std::span<const float> in, std::span<float> out) {
    if (in.size() != c.per_mb() || out.size() != c.per_mb()) throw std::runtime_error("toy::mlp::forward: bad sizes");
    const auto W = static_cast<std::size_t>(c.width), si = static_cast<std::size_t>(s);
    for (std::size_t r = 0; r < static_cast<std::size_t>(c.rows); ++r)
      for (std::size_t o = 0; o < W; ++o) {
        float z = b[si][o];
        for (std::size_t k = 0; k < W; ++k) z += w[si][o * W + k] * in[r * W + k];
        out[r * W + o] = std::tanh(z);
      }
    x_saved[{s, mb}].assign(in.begin(), in.end());
    y_saved[{s, mb}].assign(out.begin(), out.end());
    ++calls_f;
  }

  void backward_input(int s, int mb, std::span<const float> gout, std::span<float> gin) {
    const auto W = static_cast<std::size_t>(c.width), si = static_cast<std::size_t>(s);
    const std::vector<float>& y = y_saved.at({s, mb});
    std::vector<float> dz(y.size());
    const bool last = s == c.stages - 1;
    if (last != gout.empty() || gin.size() != c.per_mb()) throw std::runtime_error("toy::mlp::backward_input: bad sizes");
    const float scale = 2.0f / static_cast<float>(c.batch());
    for (std::size_t i = 0; i < y.size(); ++i) {
      const float gy = last ? scale * (y[i] - target(static_cast<std::size_t>(mb) * c.per_mb() + i)) : gout[i];
      dz[i] = gy * (1.0f - y[i] * y[i]);
    }
    for (std::size_t r = 0; r < static_cast<std::size_t>(c.rows); ++r)
      for (std::size_t k = 0; k < W; ++k) {
        float g = 0;
        for (std::size_t o = 0; o < W; ++o) g += w[si][o * W + k] * dz[r * W + o];
        gin[r * W + k] = g;
      }
    dz_saved[{s, mb}] = std::move(dz);
    y_saved.erase({s, mb});
    ++calls_i;
  }

  void backward_weight(int s, int mb) {
    const auto W = static_cast<std::size_t>(c.width), si = static_cast<std::size_t>(s);
    const std::vector<float>& x = x_saved.at({s, mb});
    const std::vector<float>& dz = dz_saved.at({s, mb});
    for (std::size_t o = 0; o < W; ++o) {
      for (std::size_t k = 0; k < W; ++k) {
        float g = 0;
        for (std::size_t r = 0; r < static_cast<std::size_t>(c.rows); ++r) g += dz[r * W + o] * x[r * W + k];
        gw[si][o * W + k] += g;
        gabs[si][o * W + k] += std::fabs(g);
      }
      float g = 0;
      for (std::size_t r = 0; r < static_cast<std::size_t>(c.rows); ++r) g += dz[r * W + o];
      gb[si][o] += g;
      gabs[si][W * W + o] += std::fabs(g);
    }
    x_saved.erase({s, mb});
    dz_saved.erase({s, mb});
    ++calls_w;
  }
};

/// The reference: every stage in sequence on one rank, microbatch by microbatch.
inline mlp sequential(const config& c, std::vector<float>* outputs = nullptr) {
  mlp m(c);
  const std::vector<float> x = batch_input(c);
  if (outputs) outputs->assign(c.batch(), 0.0f);
  for (int mb = 0; mb < c.microbatches; ++mb) {
    std::vector<float> cur(x.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(mb) * c.per_mb()),
                           x.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(mb + 1) * c.per_mb()));
    for (int s = 0; s < c.stages; ++s) {
      std::vector<float> out(c.per_mb());
      m.forward(s, mb, cur, out);
      cur = std::move(out);
    }
    if (outputs) std::copy(cur.begin(), cur.end(), outputs->begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(mb) * c.per_mb()));
    std::vector<float> g;
    for (int s = c.stages - 1; s >= 0; --s) {
      std::vector<float> gin(c.per_mb());
      m.backward_input(s, mb, g, gin);
      m.backward_weight(s, mb);
      g = std::move(gin);
    }
  }
  return m;
}

/// True when `got` equals `want`: exactly when `exact` (the schedule accumulated the
/// microbatches of this stage in the reference's order 0, 1, ..., m-1, so every float
/// operation is the same), else up to the rounding of summing the m bit-identical
/// contributions in another order: |got - want| <= 2 * m * eps * sum|contributions| (a
/// sum of m floats in any order is within (m - 1) * eps * sum|terms| of the exact sum).
inline bool same_grads(const mlp& got, const mlp& want, int stage, std::string* why = nullptr, bool exact = false) {
  const auto si = static_cast<std::size_t>(stage);
  const float eps = exact ? 0.0f : 1.1920929e-7f * 2.0f * static_cast<float>(want.c.microbatches);
  const std::size_t WW = want.gw[si].size();
  for (std::size_t i = 0; i < WW + want.gb[si].size(); ++i) {
    const float a = i < WW ? got.gw[si][i] : got.gb[si][i - WW];
    const float e = i < WW ? want.gw[si][i] : want.gb[si][i - WW];
    if (std::fabs(a - e) > eps * want.gabs[si][i]) {
      if (why) *why = "stage " + std::to_string(stage) + " grad " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(e);
      return false;
    }
  }
  return true;
}

}  // namespace toy
