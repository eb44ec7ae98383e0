// The Float8 linear under tensor parallel (issue 15), simulated on two thread ranks: a
// column-parallel and a row-parallel split of one linear, each rank reducing the amaxes of
// the casts f8_gemm_operands marks as spanning ranks, give the one-rank Float8 linear's
// output, weight gradient and input gradient to f32 rounding. A tensorwise scale left
// unreduced moves values by FP8's rounding step, far beyond the tolerance.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/kernels/cpu/float8_linear.hpp>
#include <tessera/kernels/linears.hpp>

using namespace tessera;

namespace {
constexpr std::int64_t N = 24, C = 48, OC = 32;

std::vector<float> randn(std::size_t n, unsigned seed, float scale) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}
/// Columns [c0, c0 + w) of a row-major [rows, cols] matrix.
std::vector<float> cols_of(const std::vector<float>& m, std::int64_t rows, std::int64_t cols, std::int64_t c0,
                           std::int64_t w) {
  std::vector<float> out(static_cast<std::size_t>(rows * w));
  for (std::int64_t r = 0; r < rows; ++r)
    std::copy_n(m.begin() + r * cols + c0, w, out.begin() + r * w);
  return out;
}
double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    num = std::max(num, double(std::abs(a[i] - b[i]))), den = std::max(den, double(std::abs(b[i])));
  return num / den;
}

struct full_result {
  std::vector<float> out, din, dW;
};
full_result one_rank(const std::vector<float>& x, const std::vector<float>& W, const std::vector<float>& dy,
                     const cpu::f8_linear_casts& c) {
  std::vector<float> a(static_cast<std::size_t>(cpu::f8_linear_buffer_a(N, C, OC))),
      b(static_cast<std::size_t>(cpu::f8_linear_buffer_b(N, C, OC)));
  full_result r{std::vector<float>(N * OC), std::vector<float>(N * C), std::vector<float>(OC * C)};
  cpu::f8_matmul_forward(r.out.data(), x.data(), W.data(), N, C, OC, c, a.data(), b.data());
  cpu::f8_matmul_backward(r.din.data(), r.dW.data(), dy.data(), x.data(), W.data(), N, C, OC, c, a.data(), b.data());
  return r;
}

/// The largest relative deviation, over output, input gradient and weight gradient, of the
/// linear split over 2 thread ranks from the one-rank linear; `reduced`: the ranks max-reduce
/// the amaxes of the casts that span them (false: each keeps its own, the mistake).
double split_deviation(f8_recipe rc, cpu::f8_split split, bool reduced) {
  auto x = randn(N * C, 1, 1.f), W = randn(OC * C, 2, 0.05f), dy = randn(N * OC, 3, 1e-3f);
  // the second half of each split dim 8x larger: a rank's own amax is then another power of
  // two than the whole group's, so even power-of-two scales differ when left unreduced
  for (std::int64_t i = 0; i < N * C; ++i) x[i] *= i % C >= C / 2 ? 8.f : 1.f;
  for (std::int64_t i = 0; i < OC * C; ++i) W[i] *= (i % C >= C / 2 ? 8.f : 1.f) * (i / C >= OC / 2 ? 8.f : 1.f);
  for (std::int64_t i = 0; i < N * OC; ++i) dy[i] *= i % OC >= OC / 2 ? 8.f : 1.f;
  const cpu::f8_linear_casts casts = cpu::f8_linear_casts_of(rc);
  const full_result ref = one_rank(x, W, dy, casts);
  const bool col = split == cpu::f8_split::out_features;  // column-parallel: W's rows split
  std::vector<full_result> got(2);
  comm::run_threads(2, [&](comm::threads_communicator& comm) {
    const std::int64_t r = comm.rank();
    const std::int64_t c = col ? C : C / 2, oc = col ? OC / 2 : OC;
    // this rank's operands: column-parallel W rows and dy columns; row-parallel x and W columns
    const auto xs = col ? x : cols_of(x, N, C, r * c, c);
    const auto Ws = col ? std::vector<float>(W.begin() + r * oc * C, W.begin() + (r + 1) * oc * C)
                        : cols_of(W, OC, C, r * c, c);
    const auto dys = col ? cols_of(dy, N, OC, r * oc, oc) : dy;
    std::vector<float> a(static_cast<std::size_t>(cpu::f8_linear_buffer_a(N, c, oc))),
        b(static_cast<std::size_t>(cpu::f8_linear_buffer_b(N, c, oc)));
    auto reduce = [&](float* v, std::int64_t n) {
      if (reduced) comm::all_reduce(comm, std::span<float>(v, static_cast<std::size_t>(n)), reduce_op::max).wait();
    };
    full_result& g = got[static_cast<std::size_t>(r)];
    g = {std::vector<float>(N * oc), std::vector<float>(N * c), std::vector<float>(oc * c)};
    cpu::f8_matmul_forward(g.out.data(), xs.data(), Ws.data(), N, c, oc, casts, a.data(), b.data(), split, reduce);
    cpu::f8_matmul_backward(g.din.data(), g.dW.data(), dys.data(), xs.data(), Ws.data(), N, c, oc, casts, a.data(),
                            b.data(), split, reduce);
  });
  // reassemble: column-parallel outputs and weight-gradient rows are the shards', the input
  // gradient the sum of partials; row-parallel the other way round (output partial, input
  // and weight gradients' columns the shards')
  std::vector<float> out(N * OC, 0.f), din(N * C, 0.f), dW(OC * C, 0.f);
  for (std::int64_t r = 0; r < 2; ++r) {
    const full_result& g = got[static_cast<std::size_t>(r)];
    if (col) {
      for (std::int64_t i = 0; i < N; ++i)
        for (std::int64_t o = 0; o < OC / 2; ++o) out[i * OC + r * OC / 2 + o] = g.out[i * OC / 2 + o];
      std::copy(g.dW.begin(), g.dW.end(), dW.begin() + r * OC / 2 * C);
      for (std::size_t i = 0; i < din.size(); ++i) din[i] += g.din[i];
    } else {
      for (std::size_t i = 0; i < out.size(); ++i) out[i] += g.out[i];
      for (std::int64_t i = 0; i < N; ++i)
        for (std::int64_t k = 0; k < C / 2; ++k) din[i * C + r * C / 2 + k] = g.din[i * C / 2 + k];
      for (std::int64_t o = 0; o < OC; ++o)
        for (std::int64_t k = 0; k < C / 2; ++k) dW[o * C + r * C / 2 + k] = g.dW[o * C / 2 + k];
    }
  }
  return std::max({max_rel(out, ref.out), max_rel(din, ref.din), max_rel(dW, ref.dW)});
}
}  // namespace

TEST_CASE("float8 linear split over 2 ranks equals the one-rank Float8 linear (amaxes reduced where they span)") {
  // Same operands, same scales: only the GEMMs' f32 rounding differs (OpenBLAS picks kernels
  // by shape, and split sums add in another order), at 1e-7. An unreduced scale moves values
  // by FP8's rounding step (2^-4 relative for e4m3), so the mistake is seen at 1e-3 and more.
  for (f8_recipe rc : {f8_recipe::tensorwise, f8_recipe::rowwise, f8_recipe::rowwise_with_gw_hp})
    for (cpu::f8_split split : {cpu::f8_split::out_features, cpu::f8_split::in_features}) {
      CAPTURE(static_cast<int>(rc));
      CAPTURE(static_cast<int>(split));
      CHECK(split_deviation(rc, split, true) < 1e-6);
      // the mistake is visible with tensorwise scales; rowwise scales are powers of two, and
      // a power-of-two change of scale leaves FP8's rounding of normal values as it is
      // (only values near FP8's underflow round differently), so there it is not
      if (rc == f8_recipe::tensorwise) CHECK(split_deviation(rc, split, false) > 1e-3);
    }
}

namespace {  // (in the namespace: the file's randn, which a unity build's other files do not hide)
/// cpu::f8_matmuls_forward / _backward: the group's input operand made once (the output
/// GEMMs' and, for the weight gradients, the grad_weight GEMMs'), the weight gradients before
/// dinp. The results equal the linears run one at a time -- each recipe.
void linear_group_case() {
  const std::int64_t ocs[] = {OC, 16, 16};
  const auto x = randn(static_cast<std::size_t>(N * C), 70, 1.0f);
  std::vector<std::vector<float>> w, dy;
  for (std::size_t i = 0; i < 3; ++i)
    w.push_back(randn(static_cast<std::size_t>(ocs[i] * C), 71 + static_cast<unsigned>(i), 0.2f)),
        dy.push_back(randn(static_cast<std::size_t>(N * ocs[i]), 81 + static_cast<unsigned>(i), 0.5f));
  for (const f8_recipe r : {f8_recipe::tensorwise, f8_recipe::rowwise, f8_recipe::rowwise_with_gw_hp}) {
    CAPTURE(static_cast<int>(r));
    const cpu::f8_linear_casts c = cpu::f8_linear_casts_of(r);
    std::vector<float> a(static_cast<std::size_t>(cpu::f8_linear_buffer_a(N, C, OC))),
        b(static_cast<std::size_t>(cpu::f8_linear_buffer_b(N, C, OC)));
    std::vector<std::vector<float>> group_out, one_out, group_dw, one_dw;
    std::vector<linear_out> outs;
    std::vector<linear_grad> grads;
    for (std::size_t i = 0; i < 3; ++i) {
      group_out.emplace_back(static_cast<std::size_t>(N * ocs[i])), one_out.emplace_back(group_out.back().size());
      group_dw.emplace_back(w[i].size(), 0.25f), one_dw.emplace_back(w[i].size(), 0.25f);
      outs.push_back({group_out[i].data(), w[i].data(), ocs[i]});
      grads.push_back({group_dw[i].data(), dy[i].data(), w[i].data(), ocs[i]});
    }
    std::vector<float> group_din(static_cast<std::size_t>(N * C), 0.25f), one_din(group_din);
    cpu::f8_matmuls_forward(x.data(), N, C, outs, c, a.data(), b.data());
    cpu::f8_matmuls_backward(group_din.data(), x.data(), N, C, grads, c, a.data(), b.data());
    for (std::size_t i = 0; i < 3; ++i) {
      cpu::f8_matmul_forward(one_out[i].data(), x.data(), w[i].data(), N, C, ocs[i], c, a.data(), b.data());
      cpu::f8_matmul_backward(one_din.data(), one_dw[i].data(), dy[i].data(), x.data(), w[i].data(), N, C, ocs[i], c,
                              a.data(), b.data());
      CHECK(group_out[i] == one_out[i]);
      CHECK(group_dw[i] == one_dw[i]);
    }
    CHECK(group_din == one_din);
    CHECK(group_din != std::vector<float>(group_din.size(), 0.25f));  // it computed
  }
  // Cast once: under a row-parallel split the input's and the weights' tensorwise amaxes span
  // ranks and go through `reduce` (the output gradients' do not) -- the group's forward reduces the input's once
  // and each weight's (4), where one by one it would reduce the input's three times (6); its
  // backward the input's once for the weight gradients and each weight's for dinp (4, not 6).
  const cpu::f8_linear_casts t = cpu::f8_linear_casts_of(f8_recipe::tensorwise);
  std::vector<float> a(static_cast<std::size_t>(cpu::f8_linear_buffer_a(N, C, OC))),
      b(static_cast<std::size_t>(cpu::f8_linear_buffer_b(N, C, OC))), out(static_cast<std::size_t>(N * OC)),
      din(static_cast<std::size_t>(N * C)), dw(static_cast<std::size_t>(OC * C));
  int calls = 0;
  const auto count = [&](float*, std::int64_t) { ++calls; };
  const linear_out outs[] = {{out.data(), w[0].data(), ocs[0]}, {out.data(), w[1].data(), ocs[1]},
                             {out.data(), w[2].data(), ocs[2]}};
  cpu::f8_matmuls_forward(x.data(), N, C, outs, t, a.data(), b.data(), cpu::f8_split::in_features, count);
  CHECK(calls == 4);
  calls = 0;
  const linear_grad grads[] = {{dw.data(), dy[0].data(), w[0].data(), ocs[0]}, {dw.data(), dy[1].data(), w[1].data(), ocs[1]},
                               {dw.data(), dy[2].data(), w[2].data(), ocs[2]}};
  cpu::f8_matmuls_backward(din.data(), x.data(), N, C, grads, t, a.data(), b.data(), cpu::f8_split::in_features, count);
  CHECK(calls == 4);
}
}  // namespace

TEST_CASE("float8 linears in a group (q, k, v): the input cast once, the same bits as one by one") {
  linear_group_case();
}
