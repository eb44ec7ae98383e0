// GEMM, Linear, embedding, RMSNorm, SwiGLU and the thread pool.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <vector>

#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>

#include "fd.hpp"

using namespace tessera::cpu;
using tt::check_grad;
using tt::randn;

TEST_CASE("parallel_for covers the range exactly once, nested calls run inline") {
  for (std::int64_t n : {0, 1, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    parallel_for(n, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        hits[static_cast<std::size_t>(i)]++;
        parallel_for(3, [](std::int64_t, std::int64_t) {});
      }
    });
    for (auto& h : hits) CHECK(h.load() == 1);
    std::atomic<std::int64_t> sum{0};
    parallel_for_dynamic(n, [&](std::int64_t i) { sum += i; });
    CHECK(sum.load() == n * (n - 1) / 2);
  }
  CHECK(num_threads() >= 1);
}

TEST_CASE("gemm: every transpose combination, split over threads, matches a naive product") {
  const std::int64_t M = 150, N = 97, K = 70;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        const auto A = randn(std::size_t(M * K), 1), B = randn(std::size_t(K * N), 2);
        auto C = randn(std::size_t(M * N), 3);
        std::vector<double> want(C.size());
        for (std::int64_t i = 0; i < M; ++i)
          for (std::int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (std::int64_t k = 0; k < K; ++k)
              s += double(ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
            want[i * N + j] = 0.5 * s + beta * C[i * N + j];
          }
        gemm(ta, tb, M, N, K, 0.5f, A.data(), ta ? M : K, B.data(), tb ? K : N, beta, C.data(), N);
        double err = 0;
        for (std::size_t i = 0; i < C.size(); ++i) err = std::max(err, std::fabs(C[i] - want[i]));
        CHECK(err < 1e-4);
      }
}

TEST_CASE("matmul: forward and finite-difference backward (inp, weight, bias)") {
  const std::int64_t N = 6, C = 5, OC = 4;
  auto inp = randn(N * C, 4), w = randn(OC * C, 5), bias = randn(OC, 6);
  const auto wout = randn(N * OC, 7);
  std::vector<float> out(N * OC);
  auto loss = [&] {
    matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, C, OC);
    return tt::dot(wout, out.data());
  };
  loss();
  CHECK(out[1 * OC + 2] == doctest::Approx(bias[2] + [&] {
          float s = 0;
          for (int c = 0; c < C; ++c) s += inp[1 * C + c] * w[2 * C + c];
          return s;
        }()).epsilon(1e-5));
  std::vector<float> dinp(N * C, 1.0f), dw(OC * C, 0.0f), db(OC, 0.0f);
  matmul_backward(dinp.data(), dw.data(), db.data(), wout.data(), inp.data(), w.data(), N, C, OC);
  for (auto& x : dinp) x -= 1.0f;  // backward accumulates onto what was there
  check_grad("dinp", inp, dinp, loss);
  check_grad("dweight", w, dw, loss);
  check_grad("dbias", bias, db, loss);
}

TEST_CASE("matmul: bf16 inputs are converted and accumulated in f32") {
  const std::int64_t N = 70, C = 33, OC = 65;
  const auto a = randn(N * C, 8), w = randn(OC * C, 9);
  std::vector<tessera::bf16> ab(a.size()), wb(w.size());
  tessera::convert(ab.data(), a.data(), a.size());
  tessera::convert(wb.data(), w.data(), w.size());
  std::vector<float> af(a.size()), wf(w.size()), out(N * OC), ref(N * OC);
  tessera::convert(af.data(), ab.data(), a.size());
  tessera::convert(wf.data(), wb.data(), w.size());
  matmul_forward(out.data(), ab.data(), wb.data(), nullptr, N, C, OC);
  matmul_forward(ref.data(), af.data(), wf.data(), nullptr, N, C, OC);
  for (std::size_t i = 0; i < out.size(); ++i) CHECK(out[i] == doctest::Approx(ref[i]).epsilon(1e-6));
  const auto dy = randn(N * OC, 22);
  std::vector<float> dx(N * C, 0.0f), dw(OC * C, 0.0f), dxr(N * C, 0.0f), dwr(OC * C, 0.0f);
  matmul_backward(dx.data(), dw.data(), nullptr, dy.data(), ab.data(), wb.data(), N, C, OC);
  matmul_backward(dxr.data(), dwr.data(), nullptr, dy.data(), af.data(), wf.data(), N, C, OC);
  CHECK(dx == dxr);
  CHECK(dw == dwr);
}

TEST_CASE("embedding: lookup, accumulated backward, bad ids rejected") {
  const std::int64_t N = 7, V = 5, C = 3;
  const std::vector<std::int32_t> tok = {0, 3, 3, 4, 1, 3, 0};
  auto wte = randn(V * C, 10);
  const auto wout = randn(N * C, 11);
  std::vector<float> out(N * C);
  auto loss = [&] {
    embedding_forward(out.data(), tok.data(), wte.data(), N, V, C);
    return tt::dot(wout, out.data());
  };
  loss();
  CHECK(out[2 * C + 1] == wte[3 * C + 1]);
  std::vector<float> dwte(V * C, 0.0f);
  embedding_backward(dwte.data(), wout.data(), tok.data(), N, V, C);
  check_grad("dwte", wte, dwte, loss);
  const std::vector<std::int32_t> bad = {0, 5};
  CHECK_THROWS_WITH_AS(embedding_forward(out.data(), bad.data(), wte.data(), 2, V, C),
                       doctest::Contains("token id 5 at position 1"), tessera::error);
}

TEST_CASE("rmsnorm: forward definition and finite-difference backward") {
  const std::int64_t N = 4, C = 16;
  auto inp = randn(N * C, 12), w = randn(C, 13);
  const auto wout = randn(N * C, 14);
  std::vector<float> out(N * C), rstd(N);
  auto loss = [&] {
    rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, 1e-5f);
    return tt::dot(wout, out.data());
  };
  loss();
  double ss = 0;
  for (int c = 0; c < C; ++c) ss += double(inp[C + c]) * inp[C + c];
  const double r = 1.0 / std::sqrt(ss / C + 1e-5);
  CHECK(rstd[1] == doctest::Approx(r).epsilon(1e-5));
  CHECK(out[C + 3] == doctest::Approx(inp[C + 3] * r * w[3]).epsilon(1e-5));
  std::vector<float> dinp(N * C, 0.0f), dw(C, 0.0f);
  rmsnorm_backward(dinp.data(), dw.data(), wout.data(), inp.data(), w.data(), rstd.data(), N, C);
  check_grad("dinp", inp, dinp, loss);
  check_grad("dweight", w, dw, loss);
}

TEST_CASE("swiglu and the feed-forward block: finite-difference backward") {
  const std::int64_t N = 5, C = 6, H = 8;
  auto inp = randn(N * C, 15), w1 = randn(H * C, 16, 0.5f), w3 = randn(H * C, 17, 0.5f),
       w2 = randn(C * H, 18, 0.5f);
  const auto wout = randn(N * C, 19);
  std::vector<float> out(N * C), h1(N * H), h3(N * H), act(N * H);
  auto loss = [&] {
    feed_forward_forward(out.data(), h1.data(), h3.data(), act.data(), inp.data(), w1.data(),
                         w3.data(), w2.data(), N, C, H);
    return tt::dot(wout, out.data());
  };
  loss();
  const float x = h1[7];
  CHECK(act[7] == doctest::Approx(x / (1 + std::exp(-x)) * h3[7]).epsilon(1e-5));
  std::vector<float> dinp(N * C, 0.0f), dw1(H * C, 0.0f), dw3(H * C, 0.0f), dw2(C * H, 0.0f),
      scratch(2 * N * H);
  feed_forward_backward(dinp.data(), dw1.data(), dw3.data(), dw2.data(), wout.data(), inp.data(),
                        h1.data(), h3.data(), act.data(), w1.data(), w3.data(), w2.data(), N, C, H,
                        scratch.data());
  check_grad("dinp", inp, dinp, loss);
  check_grad("dw1", w1, dw1, loss);
  check_grad("dw3", w3, dw3, loss);
  check_grad("dw2", w2, dw2, loss);
}

namespace {
/// Linears sharing one input as a group (K::matmuls_forward / _backward) against the same
/// linears one by one (K::matmul_forward / _backward): the same bits, din accumulating in the
/// group's order. Three linears of unequal widths, one without a weight gradient.
std::vector<float> rn(std::int64_t n, std::uint32_t seed) { return randn(static_cast<std::size_t>(n), seed); }

template <class K>
void check_groups_equal_one_by_one() {
  const std::int64_t N = 5, C = 12, OC[3] = {8, 4, 6};
  const std::vector<float> in = rn(N * C, 1);
  std::vector<float> w[3], dout[3];
  for (int i = 0; i < 3; ++i) w[i] = rn(OC[i] * C, 2 + i), dout[i] = rn(N * OC[i], 5 + i);
  std::vector<float> out_g[3], out_1[3], dw_g[3], dw_1[3];
  for (int i = 0; i < 3; ++i) {
    out_g[i].assign(static_cast<std::size_t>(N * OC[i]), 0.0f), out_1[i] = out_g[i];
    dw_g[i] = rn(OC[i] * C, 9 + i), dw_1[i] = dw_g[i];  // accumulated into
  }
  const tessera::linear_out fwd[] = {{out_g[0].data(), w[0].data(), OC[0]},
                                     {out_g[1].data(), w[1].data(), OC[1]},
                                     {out_g[2].data(), w[2].data(), OC[2]}};
  K::matmuls_forward(in.data(), N, C, fwd);
  for (int i = 0; i < 3; ++i) K::matmul_forward(out_1[i].data(), in.data(), w[i].data(), N, C, OC[i]);
  std::vector<float> din_g = rn(N * C, 12), din_1 = din_g;
  const tessera::linear_grad bwd[] = {{dw_g[0].data(), dout[0].data(), w[0].data(), OC[0]},
                                      {nullptr, dout[1].data(), w[1].data(), OC[1]},
                                      {dw_g[2].data(), dout[2].data(), w[2].data(), OC[2]}};
  K::matmuls_backward(din_g.data(), in.data(), N, C, bwd);
  for (int i = 0; i < 3; ++i)
    K::matmul_backward(din_1.data(), i == 1 ? nullptr : dw_1[i].data(), dout[i].data(), in.data(), w[i].data(), N, C,
                       OC[i]);
  for (int i = 0; i < 3; ++i) {
    CHECK(out_g[i] == out_1[i]);
    CHECK(dw_g[i] == dw_1[i]);
  }
  CHECK(din_g == din_1);
  // the weight gradients alone (no din): what the overlapped regions run first
  std::vector<float> dw_only = dw_1[0];
  const tessera::linear_grad only[] = {{dw_only.data(), dout[0].data(), w[0].data(), OC[0]}};
  K::matmuls_backward(nullptr, in.data(), N, C, only);
  K::matmul_backward(nullptr, dw_1[0].data(), dout[0].data(), in.data(), nullptr, N, C, OC[0]);
  CHECK(dw_only == dw_1[0]);
}
}  // namespace

TEST_CASE("linears sharing an input: a group equals its linears one by one (f32 and bf16 operands)") {
  check_groups_equal_one_by_one<tessera::cpu_kernels>();
  check_groups_equal_one_by_one<tessera::cpu_bf16_kernels>();
  // with bf16 operands the group differs from f32 ones: the rounding happened
  const std::int64_t N = 3, C = 8, OC = 4;
  const std::vector<float> in = rn(N * C, 21), w = rn(OC * C, 22);
  std::vector<float> a(static_cast<std::size_t>(N * OC)), b = a;
  const tessera::linear_out la[] = {{a.data(), w.data(), OC}}, lb[] = {{b.data(), w.data(), OC}};
  tessera::cpu_kernels::matmuls_forward(in.data(), N, C, la);
  tessera::cpu_bf16_kernels::matmuls_forward(in.data(), N, C, lb);
  CHECK(a != b);
}
