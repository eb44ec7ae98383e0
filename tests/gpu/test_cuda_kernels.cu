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
// gradient and 1e-5 for its loss (its row sums in another order); attention 1e-5 for out
// and lse, 1e-4 for dq, dk, dv (sums over up to T keys or queries in other orders); 0 for
// Float8's scales, codes and dequantized values (maxima, the CPU's scale function, the
// shared casts); the sum of squares to 1e-12 relative (double, another order), 0 for the
// clipping scale; 2e-3 for the FP8 GEMMs against the CPU's f32 GEMM of the dequantized
// values (the same products, accumulated by FP8 tensor cores in another order; the
// reciprocal scales round once more), the same for the backward's FP8 GEMMs (grad_input and
// grad_weight with each recipe's casts, accumulating), 0 for the transpose of FP8 codes. On a
// GPU older than sm_89 the FP8 cases are skipped.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/kernels/cpu/grad_norm.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>
#include <tessera/kernels/cpu/vocab_parallel.hpp>
#include <tessera/kernels/cuda/attention.cuh>
#include <tessera/kernels/cuda/cross_entropy.cuh>
#include <tessera/kernels/cuda/float8.cuh>
#include <tessera/kernels/cuda/gemm.hpp>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/tensor.hpp>

using namespace tessera;

namespace {
int failures = 0;

std::vector<float> randn(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// A device copy of a host vector.
struct dvec {
  tensor<float, cuda_space> t;
  explicit dvec(const std::vector<float>& h) : t({static_cast<std::int64_t>(h.size())}) {
    copy_to_device(t.data(), h.data(), h.size() * sizeof(float));
  }
  float* get() { return t.data(); }
  std::vector<float> host() const {
    std::vector<float> h(static_cast<std::size_t>(t.numel()));
    copy_to_host(h.data(), t.data(), h.size() * sizeof(float));
    return h;
  }
};

/// Token ids on the device (tensor<> holds floating-point elements: the space directly).
struct device_ids {
  std::size_t bytes;
  void* p;
  explicit device_ids(const std::vector<std::int32_t>& h)
      : bytes(h.size() * sizeof(std::int32_t)), p(cuda_space::allocate(bytes)) {
    copy_to_device(p, h.data(), bytes);
  }
  ~device_ids() { cuda_space::deallocate(p, bytes); }
  device_ids(const device_ids&) = delete;
  device_ids& operator=(const device_ids&) = delete;
  const std::int32_t* get() const { return static_cast<const std::int32_t*>(p); }
};

void expect_close(const char* what, const std::vector<float>& gpu, const std::vector<float>& cpu, double tol) {
  double worst = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(gpu[i]) - cpu[i]) / std::max(1.0, std::abs(static_cast<double>(cpu[i]))));
  const bool ok = gpu.size() == cpu.size() && worst <= tol;
  std::printf("%-40s %s  max relative difference %.2e (tolerance %.0e)\n", what, ok ? "PASS" : "FAIL", worst, tol);
  failures += ok ? 0 : 1;
}

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
  dvec dp(p), dm(m), dv(v);
  cpu::adamw_config cfg;
  for (std::int64_t step = 1; step <= 3; ++step) {
    const auto g = randn(n, 10 + static_cast<unsigned>(step));
    cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, step, cfg);
    dvec dg(g);
    cuda::adamw_update(dp.get(), dg.get(), dm.get(), dv.get(), static_cast<std::int64_t>(n), cpu::adamw_step_scalars(step, cfg));
  }
  expect_close("adamw parameters (3 steps)", dp.host(), p, 2e-5);
  expect_close("adamw m", dm.host(), m, 2e-5);
  expect_close("adamw v", dv.host(), v, 2e-5);
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
void attention() {
  for (const std::int64_t HD : {16, 64}) {
    const std::int64_t B = 2, T = 100, NH = 4, NKV = 2;  // T: no tile divides it; GQA groups of 2
    const std::size_t nq = static_cast<std::size_t>(B * T * NH * HD), nk = static_cast<std::size_t>(B * T * NKV * HD),
                      nl = static_cast<std::size_t>(B * NH * T);
    const auto q = randn(nq, 20), k = randn(nk, 21), v = randn(nk, 22), dy = randn(nq, 23);
    std::vector<float> out(nq), lse(nl), dq(nq), dk(nk), dv(nk);
    cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD);
    cpu::attention_backward(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(), v.data(), out.data(),
                            lse.data(), B, T, NH, NKV, HD);
    dvec dq_(q), dk_(k), dv_(v), ddy(dy), dout{std::vector<float>(nq)}, dlse{std::vector<float>(nl)},
        ddq{std::vector<float>(nq)}, ddk{std::vector<float>(nk)}, ddv{std::vector<float>(nk)}, D{std::vector<float>(nl)};
    cuda::attention_forward(dout.get(), dlse.get(), dq_.get(), dk_.get(), dv_.get(), B, T, NH, NKV, HD);
    cuda::attention_backward(ddq.get(), ddk.get(), ddv.get(), ddy.get(), dq_.get(), dk_.get(), dv_.get(), dout.get(),
                             dlse.get(), D.get(), B, T, NH, NKV, HD);
    const std::string hd = " (head dim " + std::to_string(HD) + ")";
    expect_close(("attention forward out" + hd).c_str(), dout.host(), out, 1e-5);
    expect_close(("attention forward lse" + hd).c_str(), dlse.host(), lse, 1e-5);
    expect_close(("attention backward dq" + hd).c_str(), ddq.host(), dq, 1e-4);
    expect_close(("attention backward dk" + hd).c_str(), ddk.host(), dk, 1e-4);
    expect_close(("attention backward dv" + hd).c_str(), ddv.host(), dv, 1e-4);
  }
}
void float8() {
  const std::int64_t rows = 33, cols = 300;
  auto x = randn(static_cast<std::size_t>(rows * cols), 30, 4.0f);
  x[7] = 1e4f, x[500] = -3e-9f;  // saturating and subnormal codes
  for (dtype target : {dtype::f8_e4m3fn, dtype::f8_e5m2})
    for (cpu::f8_granularity gr : {cpu::f8_granularity::tensorwise, cpu::f8_granularity::per_row,
                                   cpu::f8_granularity::per_column})
      for (cpu::f8_scale_rounding rd : {cpu::f8_scale_rounding::none, cpu::f8_scale_rounding::power_of_two}) {
        const cpu::f8_cast c{target, gr, rd};
        const std::int64_t n = cpu::f8_scale_count(gr, rows, cols);
        std::vector<float> scales(static_cast<std::size_t>(n)), back(x.size());
        std::vector<std::uint8_t> bits(x.size());
        cpu::f8_scales(scales.data(), x.data(), rows, cols, c);
        cpu::f8_quantize(bits.data(), x.data(), scales.data(), rows, cols, c);
        cpu::f8_dequantize(back.data(), bits.data(), scales.data(), rows, cols, c);
        dvec dx(x), dscales{std::vector<float>(scales.size())}, dback{std::vector<float>(back.size())};
        tensor<float, cuda_space> dbits({static_cast<std::int64_t>((bits.size() + 3) / 4)});  // the codes' bytes
        auto* db = reinterpret_cast<std::uint8_t*>(dbits.data());
        cuda::f8_scales(dscales.get(), dx.get(), rows, cols, c);
        cuda::f8_quantize(db, dx.get(), dscales.get(), rows, cols, c);
        cuda::f8_dequantize(dback.get(), db, dscales.get(), rows, cols, c);
        std::vector<std::uint8_t> gbits(bits.size());
        copy_to_host(gbits.data(), db, gbits.size());
        const std::string what = std::string("float8 ") + std::string(short_name(target)) +
                                 (gr == cpu::f8_granularity::tensorwise ? " tensorwise"
                                  : gr == cpu::f8_granularity::per_row ? " per row" : " per column") +
                                 (rd == cpu::f8_scale_rounding::power_of_two ? ", pow2" : "");
        expect_close((what + ": scales").c_str(), dscales.host(), scales, 0);
        expect_close((what + ": codes").c_str(), std::vector<float>(gbits.begin(), gbits.end()),
                     std::vector<float>(bits.begin(), bits.end()), 0);
        expect_close((what + ": dequantized").c_str(), dback.host(), back, 0);
      }
}
/// An operand through an FP8 cast on the CPU: its codes, its dequantized values, and the
/// inverse scales the GPU's GEMM takes.
struct f8_host_operand {
  std::vector<std::uint8_t> codes;
  std::vector<float> values, inverse_scales;
  cudaDataType_t type;
  f8_host_operand(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, const cpu::f8_cast& c)
      : codes(x.size()), values(x.size()), type(c.target == dtype::f8_e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3) {
    std::vector<float> scales(static_cast<std::size_t>(cpu::f8_scale_count(c.granularity, rows, cols)));
    cpu::f8_scales(scales.data(), x.data(), rows, cols, c);
    cpu::f8_quantize(codes.data(), x.data(), scales.data(), rows, cols, c);
    cpu::f8_dequantize(values.data(), codes.data(), scales.data(), rows, cols, c);
    for (float v : scales) inverse_scales.push_back(1.0f / v);
  }
};

/// Device bytes.
struct dbytes {
  tensor<float, cuda_space> t;
  explicit dbytes(std::size_t n) : t({static_cast<std::int64_t>((n + 3) / 4)}) {}
  explicit dbytes(const std::vector<std::uint8_t>& h) : dbytes(h.size()) { copy_to_device(get(), h.data(), h.size()); }
  std::uint8_t* get() { return reinterpret_cast<std::uint8_t*>(t.data()); }
};

/// The backward's FP8 GEMMs (grad_input, grad_weight; accumulating onto 0.25) with each
/// recipe's casts (f8_linear_casts_of), against the CPU's emulation; and f8_transpose (exact).
void gemm_f8_backward(std::int64_t N, std::int64_t C, std::int64_t OC, const std::vector<float>& x,
                      const std::vector<float>& w, int sm) {
  const auto dy = randn(static_cast<std::size_t>(N * OC), 52, 0.5f);
  cuda::blas b;
  {  // the transpose
    std::vector<std::uint8_t> in(static_cast<std::size_t>(70 * 45)), want(in.size()), got(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 31 + 7);
    for (std::int64_t r = 0; r < 70; ++r)
      for (std::int64_t c = 0; c < 45; ++c) want[static_cast<std::size_t>(c * 70 + r)] = in[static_cast<std::size_t>(r * 45 + c)];
    dbytes din(in), dout(in.size());
    cuda::f8_transpose(dout.get(), din.get(), 70, 45);
    copy_to_host(got.data(), dout.get(), got.size());
    expect_close("FP8 codes: transpose (70 x 45)", std::vector<float>(got.begin(), got.end()),
                 std::vector<float>(want.begin(), want.end()), 0);
  }
  for (const f8_recipe r : {f8_recipe::tensorwise, f8_recipe::rowwise}) {
    const bool rowwise = r == f8_recipe::rowwise;
    if (rowwise && sm < 90) continue;  // outer-vector scales: sm_90 and newer (reported above)
    const cpu::f8_linear_casts c = cpu::f8_linear_casts_of(r);
    const std::string name = rowwise ? " (rowwise)" : " (tensorwise)";
    // grad_input: dinp += q(dy) . q(w)
    const f8_host_operand gy(dy, N, OC, *c.grad_output), gw(w, OC, C, *c.weight_for_grad_input);
    std::vector<float> want(static_cast<std::size_t>(N * C), 0.25f);
    cpu::matmul_backward(want.data(), nullptr, nullptr, gy.values.data(), nullptr, gw.values.data(), N, C, OC);
    dbytes dgy(gy.codes), dgw(gw.codes), dgw_t(gw.codes.size());
    cuda::f8_transpose(dgw_t.get(), dgw.get(), OC, C);
    dvec sy(gy.inverse_scales), sw(gw.inverse_scales), dinp{std::vector<float>(want.size(), 0.25f)};
    cuda::matmul_grad_input_f8(b, dinp.get(), dgy.get(), gy.type, sy.get(), dgw_t.get(), gw.type, sw.get(), N, C, OC,
                               rowwise);
    expect_close(("cuBLASLt FP8 grad_input" + name).c_str(), dinp.host(), want, 2e-3);
    // grad_weight: dw += q(dy)^T . q(x)
    const f8_host_operand hy(dy, N, OC, *c.grad_output_for_grad_weight), hx(x, N, C, *c.input_for_grad_weight);
    std::vector<float> want_w(static_cast<std::size_t>(OC * C), 0.25f);
    cpu::matmul_backward(nullptr, want_w.data(), nullptr, hy.values.data(), hx.values.data(), nullptr, N, C, OC);
    dbytes dhy(hy.codes), dhx(hx.codes), dhy_t(hy.codes.size()), dhx_t(hx.codes.size());
    cuda::f8_transpose(dhy_t.get(), dhy.get(), N, OC);
    cuda::f8_transpose(dhx_t.get(), dhx.get(), N, C);
    dvec ty(hy.inverse_scales), tx(hx.inverse_scales), dw{std::vector<float>(want_w.size(), 0.25f)};
    cuda::matmul_grad_weight_f8(b, dw.get(), dhy_t.get(), hy.type, ty.get(), dhx_t.get(), hx.type, tx.get(), N, C, OC,
                                rowwise);
    expect_close(("cuBLASLt FP8 grad_weight" + name).c_str(), dw.host(), want_w, 2e-3);
  }
}

void gemm_f8(int sm) {
  if (sm < 89) {
    std::printf("%-40s skipped (sm_%d: FP8 GEMMs need sm_89 or newer)\n", "cuBLASLt FP8 GEMMs", sm);
    return;
  }
  const std::int64_t N = 64, C = 128, OC = 96;  // multiples of 16, as cuBLASLt's FP8 needs
  const auto x = randn(static_cast<std::size_t>(N * C), 50), w = randn(static_cast<std::size_t>(OC * C), 51, 0.1f);
  cuda::blas b;
  for (const bool rowwise : {false, true}) {
    if (rowwise && sm < 90) {
      std::printf("%-40s skipped (sm_%d: outer-vector scales need sm_90 or newer)\n", "cuBLASLt FP8 GEMM (rowwise)", sm);
      continue;
    }
    const cpu::f8_cast c{dtype::f8_e4m3fn, rowwise ? cpu::f8_granularity::per_row : cpu::f8_granularity::tensorwise,
                         cpu::f8_scale_rounding::none};
    // the CPU's emulation: quantize, dequantize, f32 GEMM
    std::vector<float> sx(static_cast<std::size_t>(cpu::f8_scale_count(c.granularity, N, C))),
        sw(static_cast<std::size_t>(cpu::f8_scale_count(c.granularity, OC, C))), xd(x.size()), wd(w.size()),
        want(static_cast<std::size_t>(N * OC));
    std::vector<std::uint8_t> xb(x.size()), wb(w.size());
    cpu::f8_scales(sx.data(), x.data(), N, C, c);
    cpu::f8_scales(sw.data(), w.data(), OC, C, c);
    cpu::f8_quantize(xb.data(), x.data(), sx.data(), N, C, c);
    cpu::f8_quantize(wb.data(), w.data(), sw.data(), OC, C, c);
    cpu::f8_dequantize(xd.data(), xb.data(), sx.data(), N, C, c);
    cpu::f8_dequantize(wd.data(), wb.data(), sw.data(), OC, C, c);
    cpu::matmul_forward(want.data(), xd.data(), wd.data(), nullptr, N, C, OC);
    // the GPU: the same codes, the dequantization scales 1 / scale
    std::vector<float> ix(sx.size()), iw(sw.size());
    for (std::size_t i = 0; i < sx.size(); ++i) ix[i] = 1.0f / sx[i];
    for (std::size_t i = 0; i < sw.size(); ++i) iw[i] = 1.0f / sw[i];
    tensor<float, cuda_space> codes({(N * C + OC * C + 3) / 4});
    auto* dxb = reinterpret_cast<std::uint8_t*>(codes.data());
    std::uint8_t* dwb = dxb + N * C;
    copy_to_device(dxb, xb.data(), xb.size());
    copy_to_device(dwb, wb.data(), wb.size());
    dvec dix(ix), diw(iw), dout{std::vector<float>(want.size())};
    cuda::matmul_forward_f8(b, dout.get(), dxb, CUDA_R_8F_E4M3, dix.get(), dwb, CUDA_R_8F_E4M3, diw.get(), N, C, OC,
                            rowwise);
    expect_close(rowwise ? "cuBLASLt FP8 GEMM (rowwise scales)" : "cuBLASLt FP8 GEMM (tensorwise scales)", dout.host(),
                 want, 2e-3);
  }
  gemm_f8_backward(N, C, OC, x, w, sm);
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
  const int devices = cuda_device_count();
  if (devices == 0) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    std::printf("skipped: no CUDA device (cudaGetDeviceCount: %s)\n",
                e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    return 77;
  }
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
    attention();
    float8();
    grad_norm();
    bf16_casts();
    gemm_f8(prop.major * 10 + prop.minor);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf(failures ? "FAILED: %d check(s)\n" : "PASSED\n", failures);
  return failures ? 1 : 0;
}
