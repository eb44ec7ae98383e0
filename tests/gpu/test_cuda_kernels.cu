// The CUDA kernels of kernels/cuda/pointwise.cuh against the CPU kernels, and the cuda
// memory space's tracking, on a GPU. Without one (no driver or no device) the test prints
// why and exits 77, which ctest reports as skipped -- never as passed.
//
// Tolerances (largest |gpu - cpu| / max(1, |cpu|) over the elements): 2e-6 for the
// per-element kernels (the same formula; a GPU contracts a * b + c into one FMA, a rounding
// or two apart), 2e-5 for RMSNorm (its row sums: a 256-thread tree here, 16 lanes on the
// CPU) and AdamW after 3 steps; 0 for the embedding (copies and in-order sums); 1e-5 x
// sqrt(k) for the cuBLASLt GEMMs (f32 products either way -- no TF32 -- summed in another
// order; bf16 operands are exact in f32, so the same bound); 2e-6 for cross-entropy's
// gradient and 1e-5 for its loss (its row sums in another order); 0 for
// the sum of squares to 1e-12 relative (double, another order), 0 for the clipping scale
// and the bf16 casts. Attention and context parallel's block kernels: test_cuda_attention.cu;
// Float8's casts and FP8 GEMMs: test_cuda_float8.cu; the helpers: cuda_checks.cuh.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/grad_norm.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>
#include <tessera/kernels/cpu/vocab_parallel.hpp>
#include <tessera/kernels/cuda/cross_entropy.cuh>
#include <tessera/kernels/cuda/gemm.hpp>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/tensor.hpp>

#include "cuda_checks.cuh"

using namespace tessera;

namespace {
using namespace tessera::testing;

void device_memory() {
  const std::int64_t before = memory_tracker<cuda_space>::current_bytes();
  {
    dvec d{std::vector<float>(1000, 3.0f)};
    const bool counted = memory_tracker<cuda_space>::current_bytes() - before == 4000;
    const std::vector<float> back = d.host();
    const bool same = back == std::vector<float>(1000, 3.0f);
    std::printf("%-40s %s  tracked %lld bytes, round trip %s\n", "cuda_space: tracking and copies",
                counted && same ? "PASS" : "FAIL",
                static_cast<long long>(memory_tracker<cuda_space>::current_bytes() - before), same ? "equal" : "differs");
    failures += counted && same ? 0 : 1;
  }
  const bool released = memory_tracker<cuda_space>::current_bytes() == before;
  std::printf("%-40s %s\n", "cuda_space: released", released ? "PASS" : "FAIL");
  failures += released ? 0 : 1;
}

void swiglu() {
  const std::size_t n = 100003;
  const auto h1 = randn(n, 1, 3.0f), h3 = randn(n, 2), g = randn(n, 3);
  std::vector<float> out(n), dh1(n), dh3(n);
  cpu::swiglu_forward(out.data(), h1.data(), h3.data(), static_cast<std::int64_t>(n));
  cpu::swiglu_backward(dh1.data(), dh3.data(), g.data(), h1.data(), h3.data(), static_cast<std::int64_t>(n));
  dvec dh1_(h1), dh3_(h3), dg(g), dout{std::vector<float>(n)}, ddh1{std::vector<float>(n)}, ddh3{std::vector<float>(n)};
  cuda::swiglu_forward(dout.get(), dh1_.get(), dh3_.get(), static_cast<std::int64_t>(n));
  cuda::swiglu_backward(ddh1.get(), ddh3.get(), dg.get(), dh1_.get(), dh3_.get(), static_cast<std::int64_t>(n));
  expect_close("swiglu forward", dout.host(), out, 2e-6);
  expect_close("swiglu backward dh1", ddh1.host(), dh1, 2e-6);
  expect_close("swiglu backward dh3", ddh3.host(), dh3, 2e-6);
}

void rope() {
  const std::int64_t B = 2, T = 37, NH = 4, HD = 64;
  std::vector<float> cos(static_cast<std::size_t>(T * HD / 2)), sin(cos.size());
  cpu::rope_table(cos.data(), sin.data(), T, HD);
  const auto x = randn(static_cast<std::size_t>(B * T * NH * HD), 4);
  for (cpu::rope_style st : {cpu::rope_style::interleaved, cpu::rope_style::half})
    for (bool inverse : {false, true}) {
      std::vector<float> want(x.size());
      if (inverse) cpu::rope_backward(want.data(), x.data(), cos.data(), sin.data(), B, T, NH, HD, st);
      else cpu::rope_forward(want.data(), x.data(), cos.data(), sin.data(), B, T, NH, HD, st);
      dvec dx(x), dc(cos), ds(sin), dy{std::vector<float>(x.size())};
      cuda::rope_apply(dy.get(), dx.get(), dc.get(), ds.get(), B, T, NH, HD, inverse, st);
      const std::string what = std::string("rope ") + (inverse ? "backward" : "forward") +
                               (st == cpu::rope_style::half ? " (half)" : " (interleaved)");
      expect_close(what.c_str(), dy.host(), want, 2e-6);
    }
}

void adamw() {
  const std::size_t n = 70001;
  auto p = randn(n, 5), m = std::vector<float>(n), v = std::vector<float>(n);
  dvec dp(p), dm(m), dv(v), rp(p), rm(m), rv(v);  // rp, rm, rv: the step that writes the rounded parameters too
  space_vector<bf16, cuda_space> rounded(n);
  cpu::adamw_config cfg;
  for (std::int64_t step = 1; step <= 3; ++step) {
    const auto g = randn(n, 10 + static_cast<unsigned>(step));
    cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, step, cfg);
    dvec dg(g);
    const auto k = cpu::adamw_step_scalars(step, cfg);
    cuda::adamw_update(dp.get(), dg.get(), dm.get(), dv.get(), static_cast<std::int64_t>(n), k);
    // in two parts: groups of 4 and the rest one by one, then a part not 16-byte aligned
    const auto a = static_cast<std::int64_t>(n) - 3;
    cuda::adamw_update(rp.get(), dg.get(), rm.get(), rv.get(), a, k, nullptr, rounded.data());
    cuda::adamw_update(rp.get() + a, dg.get() + a, rm.get() + a, rv.get() + a, 3, k, nullptr, rounded.data() + a);
  }
  expect_close("adamw parameters (3 steps)", dp.host(), p, 2e-5);
  expect_close("adamw m", dm.host(), m, 2e-5);
  expect_close("adamw v", dv.host(), v, 2e-5);
  // the same step, and the bf16 copies are exactly the casts of the parameters it wrote
  const std::vector<float> ps = rp.host();
  expect_close("adamw with rounded parameters: parameters", ps, p, 2e-5);
  expect_close("adamw with rounded parameters: m", rm.host(), m, 2e-5);
  expect_close("adamw with rounded parameters: v", rv.host(), v, 2e-5);
  std::vector<bf16> cast(n);
  std::vector<float> want(n), got(n);
  cpu_kernels::to_bf16(cast.data(), ps.data(), static_cast<std::int64_t>(n));
  cpu_kernels::from_bf16(want.data(), cast.data(), static_cast<std::int64_t>(n));
  dvec dgot(got);
  cuda::from_bf16(dgot.get(), rounded.data(), static_cast<std::int64_t>(n));
  expect_close("adamw with rounded parameters: the bf16 copies", dgot.host(), want, 0);
}

void rmsnorm() {
  const std::int64_t N = 97, C = 256;
  const auto x = randn(static_cast<std::size_t>(N * C), 6), w = randn(static_cast<std::size_t>(C), 7),
             g = randn(static_cast<std::size_t>(N * C), 8);
  std::vector<float> out(x.size()), rstd(static_cast<std::size_t>(N)), dx(x.size(), 0.5f), dw(w.size(), 0.25f);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C);
  cpu::rmsnorm_backward(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), N, C);
  dvec dx_(x), dw_(w), dg(g), dout{std::vector<float>(x.size())}, drstd{std::vector<float>(rstd.size())},
      ddx{std::vector<float>(x.size(), 0.5f)}, ddw{std::vector<float>(w.size(), 0.25f)};
  cuda::rmsnorm_forward(dout.get(), drstd.get(), dx_.get(), dw_.get(), N, C);
  cuda::rmsnorm_backward(ddx.get(), ddw.get(), dg.get(), dx_.get(), dw_.get(), drstd.get(), N, C);
  expect_close("rmsnorm forward", dout.host(), out, 2e-5);
  expect_close("rmsnorm rstd", drstd.host(), rstd, 2e-5);
  expect_close("rmsnorm backward dinp (accumulated)", ddx.host(), dx, 2e-5);
  expect_close("rmsnorm backward dweight (accumulated)", ddw.host(), dw, 2e-5);
}

void embedding() {
  const std::int64_t N = 300, V = 50, C = 96, v0 = 10, Vl = 25;  // a vocabulary shard [10, 35)
  std::vector<std::int32_t> tok(static_cast<std::size_t>(N));
  std::mt19937 r(9);
  for (auto& t : tok) t = static_cast<std::int32_t>(r() % V);
  const auto wte = randn(static_cast<std::size_t>(Vl * C), 10), dy = randn(static_cast<std::size_t>(N * C), 11);
  std::vector<float> out(static_cast<std::size_t>(N * C)), dwte(wte.size(), 0.125f);
  cpu::embedding_shard_forward(out.data(), tok.data(), wte.data(), N, V, v0, Vl, C);
  cpu::embedding_shard_backward(dwte.data(), dy.data(), tok.data(), N, V, v0, Vl, C);
  const device_ids dtok(tok);
  const std::int32_t* dt = dtok.get();
  dvec dw(wte), ddy(dy), dout{std::vector<float>(out.size())}, ddw{std::vector<float>(wte.size(), 0.125f)};
  cuda::embedding_forward(dout.get(), dt, dw.get(), N, v0, Vl, C);
  cuda::embedding_backward(ddw.get(), ddy.get(), dt, N, v0, Vl, C);
  expect_close("embedding forward (shard)", dout.host(), out, 0);
  expect_close("embedding backward (shard, accumulated)", ddw.host(), dwte, 0);
}
/// A device copy of bf16 values.
struct dvec16 {
  tensor<bf16, cuda_space> t;
  explicit dvec16(const std::vector<bf16>& h) : t({static_cast<std::int64_t>(h.size())}) {
    copy_to_device(t.data(), h.data(), h.size() * sizeof(bf16));
  }
};

void gemm() {
  const std::int64_t N = 67, C = 96, OC = 130;  // odd sizes: no tile divides them
  const auto x = randn(static_cast<std::size_t>(N * C), 12), w = randn(static_cast<std::size_t>(OC * C), 13),
             dy = randn(static_cast<std::size_t>(N * OC), 14);
  const double tol = 1e-5 * std::sqrt(static_cast<double>(std::max({C, OC, N})));
  cuda::blas b;
  {  // f32 operands
    std::vector<float> out(static_cast<std::size_t>(N * OC)), dx(x.size(), 0.5f), dw(w.size(), 0.25f);
    cpu::matmul_forward(out.data(), x.data(), w.data(), nullptr, N, C, OC);
    cpu::matmul_backward(dx.data(), dw.data(), nullptr, dy.data(), x.data(), w.data(), N, C, OC);
    dvec dx_(x), dw_(w), ddy(dy), dout{std::vector<float>(out.size())}, ddx{std::vector<float>(x.size(), 0.5f)},
        ddw{std::vector<float>(w.size(), 0.25f)};
    cuda::matmul_forward<float>(b, dout.get(), dx_.get(), dw_.get(), N, C, OC);
    cuda::matmul_backward<float>(b, ddx.get(), ddw.get(), ddy.get(), dx_.get(), dw_.get(), N, C, OC);
    expect_close("cuBLASLt matmul forward (f32)", dout.host(), out, tol);
    expect_close("cuBLASLt matmul backward dinp (f32, accumulated)", ddx.host(), dx, tol);
    expect_close("cuBLASLt matmul backward dweight (f32, accumulated)", ddw.host(), dw, tol);
  }
  {  // bf16 operands, f32 accumulation: against the CPU's bf16 matmul (converted, f32 GEMM)
    std::vector<bf16> x16(x.size()), w16(w.size());
    convert(x16.data(), x.data(), x.size());
    convert(w16.data(), w.data(), w.size());
    std::vector<float> out(static_cast<std::size_t>(N * OC));
    cpu::matmul_forward(out.data(), x16.data(), w16.data(), nullptr, N, C, OC);
    dvec16 dx16(x16), dw16(w16);
    dvec dout{std::vector<float>(out.size())};
    cuda::matmul_forward<bf16>(b, dout.get(), dx16.t.data(), dw16.t.data(), N, C, OC);
    expect_close("cuBLASLt matmul forward (bf16 operands)", dout.host(), out, tol);
  }
}
void cross_entropy() {
  const std::int64_t N = 45, V = 1000;
  const auto logits = randn(static_cast<std::size_t>(N * V), 15, 3.0f);
  std::vector<std::int32_t> tg(static_cast<std::size_t>(N));
  std::mt19937 r(16);
  for (auto& t : tg) t = static_cast<std::int32_t>(r() % V);
  tg[3] = -100;  // ignored, as torch's ignore_index
  const std::int64_t count = cpu::count_targets(tg.data(), N, V);
  std::vector<float> d(logits.size()), loss(static_cast<std::size_t>(N));
  const float mean = cpu::cross_entropy_forward_backward(d.data(), loss.data(), logits.data(), tg.data(), N, V);
  const device_ids dtg(tg);
  dvec dl(logits), dloss{std::vector<float>(loss.size())};
  cuda::cross_entropy_forward_backward(dl.get(), dloss.get(), dl.get(), dtg.get(), N, V,
                                       count);  // in place, as the model calls it
  expect_close("cross-entropy dlogits (in place)", dl.host(), d, 2e-6);
  expect_close("cross-entropy per-token losses", dloss.host(), loss, 1e-5);
  expect_close("cross-entropy mean loss", {cuda::mean_loss(dloss.get(), N, count)}, {mean}, 1e-5);
}
/// Loss parallel: the vocabulary split in two shards ([0, 400), [400, 1000)), each shard's
/// three phases on the GPU with the reductions (max, then sums) done on the host between
/// them, against the CPU's phases on the same shards.
void cross_entropy_vocab_parallel() {
  const std::int64_t N = 45, V = 1000, cut = 400;
  const auto logits = randn(static_cast<std::size_t>(N * V), 17, 3.0f);
  std::vector<std::int32_t> tg(static_cast<std::size_t>(N));
  std::mt19937 r(18);
  for (auto& t : tg) t = static_cast<std::int32_t>(r() % V);
  tg[5] = -100;
  const std::int64_t count = cpu::count_targets(tg.data(), N, V);
  const std::int64_t v0s[2] = {0, cut}, vls[2] = {cut, V - cut};
  std::vector<float> shard[2];
  for (int k = 0; k < 2; ++k)
    for (std::int64_t i = 0; i < N; ++i)
      shard[k].insert(shard[k].end(), logits.begin() + i * V + v0s[k], logits.begin() + i * V + v0s[k] + vls[k]);
  // the CPU's phases and reductions
  std::vector<float> mx[2], st[2], rowmax(static_cast<std::size_t>(N)), stats(static_cast<std::size_t>(2 * N));
  for (int k = 0; k < 2; ++k) {
    mx[k].resize(static_cast<std::size_t>(N));
    cpu::ce_shard_row_max(mx[k].data(), shard[k].data(), N, vls[k]);
  }
  for (std::int64_t i = 0; i < N; ++i) rowmax[i] = std::max(mx[0][i], mx[1][i]);
  for (int k = 0; k < 2; ++k) {
    st[k].resize(static_cast<std::size_t>(2 * N));
    cpu::ce_shard_row_stats(st[k].data(), shard[k].data(), rowmax.data(), tg.data(), N, v0s[k], vls[k]);
  }
  for (std::size_t i = 0; i < stats.size(); ++i) stats[i] = st[0][i] + st[1][i];
  const device_ids dtg(tg);
  dvec drowmax(rowmax), dstats(stats);
  for (int k = 0; k < 2; ++k) {
    std::vector<float> d(shard[k].size());
    const float mean = cpu::ce_shard_finish(d.data(), shard[k].data(), rowmax.data(), stats.data(), tg.data(), N, V,
                                            v0s[k], vls[k], 1.0f / static_cast<float>(count));
    dvec dl(shard[k]), dmx{std::vector<float>(static_cast<std::size_t>(N))}, dst{std::vector<float>(stats.size())},
        dloss{std::vector<float>(static_cast<std::size_t>(N))};
    cuda::ce_shard_row_max(dmx.get(), dl.get(), N, vls[k]);
    cuda::ce_shard_row_stats(dst.get(), dl.get(), drowmax.get(), dtg.get(), N, v0s[k], vls[k]);
    cuda::ce_shard_finish(dl.get(), dloss.get(), dl.get(), drowmax.get(), dstats.get(), dtg.get(), N, v0s[k], vls[k],
                          1.0f / static_cast<float>(count));  // in place, as the model calls it
    expect_close(k ? "loss parallel row max (shard 2)" : "loss parallel row max (shard 1)", dmx.host(), mx[k], 0);
    expect_close(k ? "loss parallel row stats (shard 2)" : "loss parallel row stats (shard 1)", dst.host(), st[k], 1e-5);
    expect_close(k ? "loss parallel dlogits (shard 2)" : "loss parallel dlogits (shard 1)", dl.host(), d, 2e-6);
    expect_close("loss parallel mean loss", {cuda::mean_loss(dloss.get(), N, count)}, {mean}, 1e-5);
  }
}
void grad_norm() {
  const auto g = randn(1000003, 40);
  const double want = cpu::sum_of_squares(g.data(), g.size());
  dvec dg(g);
  const double got = cuda::sum_of_squares(dg.get(), static_cast<std::int64_t>(g.size()));
  const double rel = std::abs(got - want) / want;
  std::printf("%-40s %s  relative difference %.2e (tolerance 1e-12)\n", "gradient norm: sum of squares (double)",
              rel <= 1e-12 ? "PASS" : "FAIL", rel);
  failures += rel <= 1e-12 ? 0 : 1;
  std::vector<float> scaled = g;
  cpu::scale_inplace(scaled.data(), scaled.size(), 0.37f);
  cuda::scale_inplace(dg.get(), static_cast<std::int64_t>(g.size()), 0.37f);
  expect_close("gradient clipping: scale in place", dg.host(), scaled, 0);
}
/// FSDP's bf16 gathers: f32 -> bf16 (nearest even) -> f32 on the device equals the CPU
/// backend's casts exactly.
void bf16_casts() {
  const auto x = randn(100003, 41, 3.0f);
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<bf16> h(x.size());
  std::vector<float> want(x.size());
  cpu_kernels::to_bf16(h.data(), x.data(), n);
  cpu_kernels::from_bf16(want.data(), h.data(), n);
  dvec dx(x), dy{std::vector<float>(x.size())};
  space_vector<bf16, cuda_space> dh(x.size());
  cuda::to_bf16(dh.data(), dx.get(), n);
  cuda::from_bf16(dy.get(), dh.data(), n);
  expect_close("bf16 casts (to and back)", dy.host(), want, 0);
}
}  // namespace

int main() {
  if (no_cuda_device()) return 77;
  const int devices = cuda_device_count();
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device 0: %s (sm_%d%d), %d device(s)\n", prop.name, prop.major, prop.minor, devices);
  try {
    device_memory();
    swiglu();
    rope();
    adamw();
    rmsnorm();
    embedding();
    gemm();
    cross_entropy();
    cross_entropy_vocab_parallel();
    grad_norm();
    bf16_casts();
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf(failures ? "FAILED: %d check(s)\n" : "PASSED\n", failures);
  return failures ? 1 : 0;
}
