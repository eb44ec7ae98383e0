// The gradient rule of docs/kernels.md, kernel by kernel: every backward accumulates (+=)
// into parameter gradients; input gradients accumulate for matmul_backward,
// rmsnorm_backward and feed_forward_backward and are written by rope_backward,
// swiglu_backward, attention_backward and cross_entropy_backward. Each case runs a
// backward into zeroed buffers and into buffers holding `base`, and checks the second
// result is base + the first (accumulates) or equals the first (writes).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/detail/vec_math.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/float8_linear.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>

#include "fd.hpp"

using namespace tessera::cpu;
using tt::randn;

namespace {
enum class rule { accumulates, writes };

/// Runs `backward(grads)` with every gradient zeroed, then with gradient k holding a
/// random base, and checks gradient k's rule.
void check_rule(std::vector<std::size_t> sizes, const std::function<void(std::vector<std::vector<float>>&)>& backward,
                std::size_t k, rule expected, const char* what) {
  std::vector<std::vector<float>> zero;
  for (std::size_t n : sizes) zero.emplace_back(n, 0.0f);
  backward(zero);
  std::vector<std::vector<float>> based = [&] {
    std::vector<std::vector<float>> g;
    for (std::size_t n : sizes) g.emplace_back(n, 0.0f);
    return g;
  }();
  const std::vector<float> base = randn(sizes[k], 99);
  based[k] = base;
  backward(based);
  double worst = 0;
  for (std::size_t i = 0; i < sizes[k]; ++i) {
    const double want = expected == rule::accumulates ? base[i] + zero[k][i] : zero[k][i];
    worst = std::max(worst, std::abs(static_cast<double>(based[k][i]) - want));
  }
  CHECK_MESSAGE(worst <= 1e-4, what);
}
}  // namespace

TEST_CASE("gradient rule: parameter gradients accumulate, input gradients as documented") {
  const std::int64_t N = 6, C = 8, OC = 5, H = 12, V = 11;
  const auto inp = randn(N * C, 1), w = randn(OC * C, 2), dout = randn(N * OC, 3);
  auto mm = [&](std::vector<std::vector<float>>& g) {
    matmul_backward(g[0].data(), g[1].data(), g[2].data(), dout.data(), inp.data(), w.data(), N, C, OC);
  };
  check_rule({std::size_t(N * C), std::size_t(OC * C), std::size_t(OC)}, mm, 0, rule::accumulates, "matmul dinp");
  check_rule({std::size_t(N * C), std::size_t(OC * C), std::size_t(OC)}, mm, 1, rule::accumulates, "matmul dweight");
  check_rule({std::size_t(N * C), std::size_t(OC * C), std::size_t(OC)}, mm, 2, rule::accumulates, "matmul dbias");
  auto mmw = [&](std::vector<std::vector<float>>& g) {  // write_dinp: dinp written, the rest as before
    matmul_backward(g[0].data(), g[1].data(), g[2].data(), dout.data(), inp.data(), w.data(), N, C, OC, true);
  };
  check_rule({std::size_t(N * C), std::size_t(OC * C), std::size_t(OC)}, mmw, 0, rule::writes, "matmul dinp, written");
  check_rule({std::size_t(N * C), std::size_t(OC * C), std::size_t(OC)}, mmw, 1, rule::accumulates,
             "matmul dweight, dinp written");

  const auto nw = randn(C, 4), dn = randn(N * C, 5);
  std::vector<float> out(N * C), rstd(N);
  rmsnorm_forward(out.data(), rstd.data(), inp.data(), nw.data(), N, C);
  auto rn = [&](std::vector<std::vector<float>>& g) {
    rmsnorm_backward(g[0].data(), g[1].data(), dn.data(), inp.data(), nw.data(), rstd.data(), N, C);
  };
  check_rule({std::size_t(N * C), std::size_t(C)}, rn, 0, rule::accumulates, "rmsnorm dinp");
  check_rule({std::size_t(N * C), std::size_t(C)}, rn, 1, rule::accumulates, "rmsnorm dweight");

  const std::vector<std::int32_t> tok = {1, 3, 3, 0, 10, 7};
  auto emb = [&](std::vector<std::vector<float>>& g) { embedding_backward(g[0].data(), dn.data(), tok.data(), N, V, C); };
  check_rule({std::size_t(V * C)}, emb, 0, rule::accumulates, "embedding dwte");

  const auto w1 = randn(H * C, 6), w3 = randn(H * C, 7), w2 = randn(C * H, 8), dff = randn(N * C, 9);
  std::vector<float> h1(N * H), h3(N * H), act(N * H), ffo(N * C), scratch(2 * N * H);
  feed_forward_forward(ffo.data(), h1.data(), h3.data(), act.data(), inp.data(), w1.data(), w3.data(), w2.data(), N, C,
                       H);
  auto ff = [&](std::vector<std::vector<float>>& g) {
    feed_forward_backward(g[0].data(), g[1].data(), g[2].data(), g[3].data(), dff.data(), inp.data(), h1.data(),
                          h3.data(), act.data(), w1.data(), w3.data(), w2.data(), N, C, H, scratch.data());
  };
  const std::vector<std::size_t> ffs = {std::size_t(N * C), std::size_t(H * C), std::size_t(H * C), std::size_t(C * H)};
  for (std::size_t k = 0; k < 4; ++k) check_rule(ffs, ff, k, rule::accumulates, "feed_forward gradients");

  const auto dact = randn(N * H, 10);
  auto sw = [&](std::vector<std::vector<float>>& g) {
    swiglu_backward(g[0].data(), g[1].data(), dact.data(), h1.data(), h3.data(), N * H);
  };
  check_rule({std::size_t(N * H), std::size_t(N * H)}, sw, 0, rule::writes, "swiglu dh1");
  check_rule({std::size_t(N * H), std::size_t(N * H)}, sw, 1, rule::writes, "swiglu dh3");

  const std::int64_t B = 2, T = 3, NH = 2, NKV = 1, HD = 4;
  std::vector<float> cs(T * HD / 2), sn(T * HD / 2);
  rope_table(cs.data(), sn.data(), T, HD);
  const auto dr = randn(B * T * NH * HD, 11);
  auto rp = [&](std::vector<std::vector<float>>& g) {
    rope_backward(g[0].data(), dr.data(), cs.data(), sn.data(), B, T, NH, HD);
  };
  check_rule({std::size_t(B * T * NH * HD)}, rp, 0, rule::writes, "rope dinp");

  const auto q = randn(B * T * NH * HD, 12), kk = randn(B * T * NKV * HD, 13), vv = randn(B * T * NKV * HD, 14);
  std::vector<float> ao(B * T * NH * HD), lse(B * NH * T);
  attention_forward(ao.data(), lse.data(), q.data(), kk.data(), vv.data(), B, T, NH, NKV, HD);
  const auto da = randn(B * T * NH * HD, 15);
  auto at = [&](std::vector<std::vector<float>>& g) {
    attention_backward(g[0].data(), g[1].data(), g[2].data(), da.data(), q.data(), kk.data(), vv.data(), ao.data(),
                       lse.data(), B, T, NH, NKV, HD);
  };
  const std::vector<std::size_t> ats = {q.size(), kk.size(), vv.size()};
  for (std::size_t k = 0; k < 3; ++k) check_rule(ats, at, k, rule::writes, "attention dq/dk/dv");

  const auto logits = randn(N * V, 16);
  const std::vector<std::int32_t> tg = {1, 2, -1, 4, 5, 10};
  auto ce = [&](std::vector<std::vector<float>>& g) {
    cross_entropy_backward(g[0].data(), logits.data(), tg.data(), N, V);
  };
  check_rule({std::size_t(N * V)}, ce, 0, rule::writes, "cross_entropy dlogits");
}

TEST_CASE("the composed feed-forward backward (the bf16 and CUDA backends') writes its scratch before it reads it") {
  // dact = dout . w2 is written over the scratch (K::matmul_backward with write_dinp), not
  // added to a zeroed one: a scratch of NaNs gives the same gradients as a zeroed one
  const std::int64_t N = 6, C = 8, H = 12;
  const auto inp = randn(N * C, 1), w1 = randn(H * C, 6), w3 = randn(H * C, 7), w2 = randn(C * H, 8),
             dff = randn(N * C, 9);
  using K = tessera::cpu_bf16_kernels;
  std::vector<float> h1(N * H), h3(N * H), act(N * H), ffo(N * C);
  K::feed_forward_forward(ffo.data(), h1.data(), h3.data(), act.data(), inp.data(), w1.data(), w3.data(), w2.data(), N,
                          C, H);
  const auto run = [&](float fill) {
    std::vector<float> scratch(2 * N * H, fill), din(N * C), d1(H * C), d3(H * C), d2(C * H);
    K::feed_forward_backward(din.data(), d1.data(), d3.data(), d2.data(), dff.data(), inp.data(), h1.data(), h3.data(),
                             act.data(), w1.data(), w3.data(), w2.data(), N, C, H, scratch.data());
    return std::vector<std::vector<float>>{din, d1, d3, d2};
  };
  const auto zeroed = run(0.0f), nans = run(std::nanf(""));
  CHECK(zeroed == nans);
  CHECK(zeroed[0] != std::vector<float>(N * C));  // it computed
}

TEST_CASE("fast_exp: NaN in, NaN out (no NaN-to-int conversion: UBSan runs this in CI)") {
  CHECK(std::isnan(tessera::cpu::detail::fast_exp(std::nanf(""))));
  CHECK(std::abs(tessera::cpu::detail::fast_exp(1.0f) - std::exp(1.0f)) <= 1e-6f * std::exp(1.0f));
}

namespace {
/// `backward(g, write)` with write_dinp on a dinp (g[0]) of NaNs gives the same bits as without
/// it on a zeroed one: dinp is written, not read, and the other gradients are unchanged.
void check_written(const std::vector<std::size_t>& sizes,
                   const std::function<void(std::vector<std::vector<float>>&, bool)>& backward, const char* what) {
  std::vector<std::vector<float>> zeroed, nans;
  for (std::size_t n : sizes) zeroed.emplace_back(n, 0.0f), nans.emplace_back(n, 0.0f);
  nans[0].assign(sizes[0], std::nanf(""));
  backward(zeroed, false);
  backward(nans, true);
  CHECK_MESSAGE(nans == zeroed, what);
  CHECK_MESSAGE(zeroed[0] != std::vector<float>(sizes[0]), what);  // it computed
}
}  // namespace

TEST_CASE_TEMPLATE("write_dinp through the groups, the feed-forward and Float8: dinp written, the weights' gradients "
                   "as before", K, tessera::cpu_kernels, tessera::cpu_bf16_kernels) {
  // The block's regions write their input gradients' scratch (datt, dfull) instead of
  // zeroing it and adding: each path that takes write_dinp writes dinp -- what it held is not
  // read -- and leaves the weight gradients' rule alone.
  const std::int64_t N = 6, C = 8, H = 12, OC = 5;
  const auto inp = randn(N * C, 1), wq = randn(OC * C, 2), wk = randn(H * C, 3), dq = randn(N * OC, 4),
             dk = randn(N * H, 5);
  auto group = [&](std::vector<std::vector<float>>& g, bool write) {
    const tessera::linear_grad ls[] = {{g[1].data(), dq.data(), wq.data(), OC}, {g[2].data(), dk.data(), wk.data(), H}};
    K::matmuls_backward(g[0].data(), inp.data(), N, C, ls, write);
  };
  check_written({std::size_t(N * C), std::size_t(OC * C), std::size_t(H * C)}, group, "a group");
  auto one = [&](std::vector<std::vector<float>>& g, bool write) {  // and without the weights' gradients
    const tessera::linear_grad ls[] = {{nullptr, dq.data(), wq.data(), OC}, {nullptr, dk.data(), wk.data(), H}};
    K::matmuls_backward(g[0].data(), inp.data(), N, C, ls, write);
  };
  check_written({std::size_t(N * C)}, one, "a group without weight gradients");
  std::vector<float> din(N * C, std::nanf(""));
  K::matmuls_backward(din.data(), inp.data(), N, C, {}, true);
  CHECK(din == std::vector<float>(N * C));  // no linear: written means zeroed

  const auto w1 = randn(H * C, 6), w3 = randn(H * C, 7), w2 = randn(C * H, 8), dff = randn(N * C, 9);
  std::vector<float> h1(N * H), h3(N * H), act(N * H), ffo(N * C), scratch(2 * N * H);
  K::feed_forward_forward(ffo.data(), h1.data(), h3.data(), act.data(), inp.data(), w1.data(), w3.data(), w2.data(), N,
                          C, H);
  auto ff = [&](std::vector<std::vector<float>>& g, bool write) {
    K::feed_forward_backward(g[0].data(), g[1].data(), g[2].data(), g[3].data(), dff.data(), inp.data(), h1.data(),
                             h3.data(), act.data(), w1.data(), w3.data(), w2.data(), N, C, H, scratch.data(), write);
  };
  check_written({std::size_t(N * C), std::size_t(H * C), std::size_t(H * C), std::size_t(C * H)}, ff, "feed-forward");

  if constexpr (K::float8) {
    const f8_linear_casts c = f8_linear_casts_of(f8_recipe::rowwise);
    std::vector<float> a(static_cast<std::size_t>(f8_linear_buffer_a(N, C, OC))),
        b(static_cast<std::size_t>(f8_linear_buffer_b(N, C, OC)));
    auto f8 = [&](std::vector<std::vector<float>>& g, bool write) {
      const tessera::linear_grad l{g[1].data(), dq.data(), wq.data(), OC};
      K::f8_matmuls_backward(g[0].data(), inp.data(), N, C, {&l, 1}, c, a.data(), b.data(), f8_split::none,
                             f8_local_amax{}, write);
    };
    check_written({std::size_t(N * C), std::size_t(OC * C)}, f8, "Float8");
  }
}
