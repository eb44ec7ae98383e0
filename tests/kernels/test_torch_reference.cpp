// tessera's CPU kernels against PyTorch (data/torch_reference.bin, written by
// make_reference.py with torch's autograd in float64 from float32 inputs).
// Tolerance: float32 kernels against a float64 reference; 2e-5 absolute plus 1e-4 relative
// covers the accumulated rounding of sums of up to a few hundred float32 terms.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/grad_norm.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>

using namespace tessera::cpu;

namespace {

struct record {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

const std::map<std::string, record>& reference() {
  static const std::map<std::string, record> recs = [] {
    std::map<std::string, record> r;
    std::ifstream f(TESSERA_KERNELS_TESTDATA "/torch_reference.bin", std::ios::binary);
    REQUIRE_MESSAGE(f.good(), "missing " TESSERA_KERNELS_TESTDATA "/torch_reference.bin; "
                              "run /usr/bin/python3 tests/kernels/make_reference.py");
    char magic[4];
    std::uint32_t n = 0;
    f.read(magic, 4);
    f.read(reinterpret_cast<char*>(&n), 4);
    REQUIRE(std::memcmp(magic, "TSRF", 4) == 0);
    for (std::uint32_t i = 0; i < n; ++i) {
      std::uint32_t len = 0, rank = 0;
      f.read(reinterpret_cast<char*>(&len), 4);
      std::string name(len, '\0');
      f.read(name.data(), len);
      f.read(reinterpret_cast<char*>(&rank), 4);
      record rec;
      rec.shape.resize(rank);
      f.read(reinterpret_cast<char*>(rec.shape.data()), std::streamsize(8 * rank));
      std::int64_t numel = 1;
      for (auto e : rec.shape) numel *= e;
      rec.data.resize(std::size_t(numel));
      f.read(reinterpret_cast<char*>(rec.data.data()), std::streamsize(4 * numel));
      REQUIRE(f.good());
      r[name] = std::move(rec);
    }
    return r;
  }();
  return recs;
}

const std::vector<float>& ref(const std::string& name) {
  const auto& r = reference();
  const auto it = r.find(name);
  REQUIRE_MESSAGE(it != r.end(), "no record " << name);
  return it->second.data;
}

void expect_close(const std::string& name, const std::vector<float>& got, double atol = 2e-5,
                  double rtol = 1e-4) {
  const auto& want = ref(name);
  REQUIRE(got.size() == want.size());
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i])) && ++bad <= 3)
      FAIL_CHECK(name << "[" << i << "]: tessera " << got[i] << ", torch " << want[i]);
  CHECK_MESSAGE(bad == 0, name);
}

}  // namespace

TEST_CASE("torch reference: RMSNorm forward and backward") {
  const std::int64_t N = 6, C = 32;
  std::vector<float> y(N * C), rstd(N), dx(N * C, 0.0f), dw(C, 0.0f);
  rmsnorm_forward(y.data(), rstd.data(), ref("rmsnorm.x").data(), ref("rmsnorm.w").data(), N, C);
  rmsnorm_backward(dx.data(), dw.data(), ref("rmsnorm.dy").data(), ref("rmsnorm.x").data(),
                   ref("rmsnorm.w").data(), rstd.data(), N, C);
  expect_close("rmsnorm.y", y);
  expect_close("rmsnorm.dx", dx);
  expect_close("rmsnorm.dw", dw);
}

TEST_CASE("torch reference: Llama 3.1 RoPE frequencies, forward and backward") {
  const std::int64_t B = 2, T = 12, NH = 3, HD = 128;
  std::vector<float> f(HD / 2), cs(T * HD / 2), sn(T * HD / 2), y(B * T * NH * HD), dx(y.size());
  rope_frequencies(f.data(), HD);
  expect_close("rope.freqs", f, 0.0, 1e-6);
  rope_table(cs.data(), sn.data(), T, HD);
  rope_forward(y.data(), ref("rope.x").data(), cs.data(), sn.data(), B, T, NH, HD);
  rope_backward(dx.data(), ref("rope.dy").data(), cs.data(), sn.data(), B, T, NH, HD);
  expect_close("rope.y", y);
  expect_close("rope.dx", dx);
}

TEST_CASE("torch reference: causal GQA attention forward (out, lse) and backward") {
  const std::int64_t B = 2, T = 80, NH = 4, NKV = 2, HD = 8;
  std::vector<float> out(B * T * NH * HD), lse(B * NH * T), dq(out.size()), dk(B * T * NKV * HD),
      dv(dk.size());
  attention_forward(out.data(), lse.data(), ref("attention.q").data(), ref("attention.k").data(),
                    ref("attention.v").data(), B, T, NH, NKV, HD);
  expect_close("attention.out", out);
  expect_close("attention.lse", lse);
  attention_backward(dq.data(), dk.data(), dv.data(), ref("attention.dout").data(),
                     ref("attention.q").data(), ref("attention.k").data(), ref("attention.v").data(),
                     out.data(), lse.data(), B, T, NH, NKV, HD);
  expect_close("attention.dq", dq);
  expect_close("attention.dk", dk);
  expect_close("attention.dv", dv);
}

TEST_CASE("torch reference: SwiGLU feed-forward forward and backward") {
  const std::int64_t N = 6, C = 16, H = 24;
  std::vector<float> y(N * C), h1(N * H), h3(N * H), act(N * H), dx(N * C, 0.0f), dw1(H * C, 0.0f),
      dw3(H * C, 0.0f), dw2(C * H, 0.0f), scratch(2 * N * H);
  feed_forward_forward(y.data(), h1.data(), h3.data(), act.data(), ref("ffn.x").data(),
                       ref("ffn.w1").data(), ref("ffn.w3").data(), ref("ffn.w2").data(), N, C, H);
  feed_forward_backward(dx.data(), dw1.data(), dw3.data(), dw2.data(), ref("ffn.dy").data(),
                        ref("ffn.x").data(), h1.data(), h3.data(), act.data(), ref("ffn.w1").data(),
                        ref("ffn.w3").data(), ref("ffn.w2").data(), N, C, H, scratch.data());
  expect_close("ffn.y", y);
  expect_close("ffn.dx", dx);
  expect_close("ffn.dw1", dw1);
  expect_close("ffn.dw3", dw3);
  expect_close("ffn.dw2", dw2);
}

TEST_CASE("torch reference: cross-entropy with ignore_index, loss and dlogits") {
  const std::int64_t N = 12, V = 50;
  std::vector<std::int32_t> tgt;
  for (float t : ref("ce.targets")) tgt.push_back(static_cast<std::int32_t>(t));
  std::vector<float> d(N * V);
  const float loss = cross_entropy_forward_backward(d.data(), nullptr, ref("ce.logits").data(),
                                                    tgt.data(), N, V);
  expect_close("ce.loss", {loss});
  expect_close("ce.dlogits", d);
}

TEST_CASE("torch reference: AdamW (3 steps) and clip_grad_norm_") {
  std::vector<float> p = ref("adamw.p0"), m(p.size(), 0.0f), v(p.size(), 0.0f);
  adamw_config cfg;
  cfg.lr = 1e-2f;
  for (int s = 0; s < 3; ++s)
    adamw_update(p.data(), ref("adamw.grads").data() + s * p.size(), m.data(), v.data(), p.size(),
                 s + 1, cfg);
  expect_close("adamw.p3", p, 1e-6, 1e-5);
  std::vector<float> g = ref("clip.g");
  const float norm = clip_grad_norm(g.data(), g.size(), 1.0f);
  expect_close("clip.norm", {norm}, 0.0, 1e-6);
  expect_close("clip.clipped", g, 1e-7, 1e-5);
}
