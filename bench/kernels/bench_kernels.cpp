// Benchmarks of tessera's CPU kernels: sgemm peak (2 threads), and each kernel's forward
// and backward at shapes of a small Llama. Compare with bench/kernels/torch_kernels.py
// (same shapes, PyTorch eager CPU); docs/performance.md has both and the commands.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/grad_norm.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>

using namespace tessera::cpu;

namespace {
std::vector<float> randv(std::size_t n, float scale = 1.0f) {
  std::mt19937 g(7);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
void flops(benchmark::State& st, double f) {
  st.counters["FLOP/s"] = benchmark::Counter(f, benchmark::Counter::kIsIterationInvariantRate);
}

// C[n,n] = A[n,n] B[n,n]: tessera's panel split over its pool, OpenBLAS single-threaded
// per panel.
void BM_sgemm_tessera(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  auto a = randv(static_cast<std::size_t>(n * n)), b = randv(static_cast<std::size_t>(n * n));
  std::vector<float> c(static_cast<std::size_t>(n * n));
  for (auto _ : st) gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  flops(st, 2.0 * double(n) * double(n) * double(n));
}
// The same product with OpenBLAS's own threads (2), for comparison.
void BM_sgemm_openblas_threads(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  auto a = randv(static_cast<std::size_t>(n * n)), b = randv(static_cast<std::size_t>(n * n));
  std::vector<float> c(static_cast<std::size_t>(n * n));
  gemm_serial(false, false, 1, 1, 1, 1.0f, a.data(), 1, b.data(), 1, 0.0f, c.data(), 1);  // init
  openblas_set_num_threads(num_threads());
  for (auto _ : st)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0f, a.data(),
                int(n), b.data(), int(n), 0.0f, c.data(), int(n));
  openblas_set_num_threads(1);
  flops(st, 2.0 * double(n) * double(n) * double(n));
}

// Linear [N,C] -> [N,OC] forward and backward (dinp and dweight).
void BM_linear_fwd(benchmark::State& st) {
  const std::int64_t N = st.range(0), C = st.range(1), OC = st.range(2);
  auto x = randv(static_cast<std::size_t>(N * C)), w = randv(static_cast<std::size_t>(OC * C));
  std::vector<float> y(static_cast<std::size_t>(N * OC));
  for (auto _ : st) matmul_forward(y.data(), x.data(), w.data(), nullptr, N, C, OC);
  flops(st, 2.0 * double(N) * double(C) * double(OC));
}
void BM_linear_bwd(benchmark::State& st) {
  const std::int64_t N = st.range(0), C = st.range(1), OC = st.range(2);
  auto x = randv(static_cast<std::size_t>(N * C)), w = randv(static_cast<std::size_t>(OC * C)), dy = randv(static_cast<std::size_t>(N * OC));
  std::vector<float> dx(static_cast<std::size_t>(N * C)), dw(static_cast<std::size_t>(OC * C));
  for (auto _ : st) matmul_backward(dx.data(), dw.data(), nullptr, dy.data(), x.data(), w.data(), N, C, OC);
  flops(st, 4.0 * double(N) * double(C) * double(OC));
}

// Attention [B,T,NH,HD] with NKV KV heads: causal FLOPs (half the square).
double attn_flops(std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t HD) {
  return 4.0 * double(B) * double(NH) * double(T) * double(T + 1) / 2.0 * double(HD);
}
void BM_attention_fwd(benchmark::State& st) {
  const std::int64_t B = st.range(0), T = st.range(1), NH = st.range(2), NKV = st.range(3), HD = st.range(4);
  auto q = randv(static_cast<std::size_t>(B * T * NH * HD)), k = randv(static_cast<std::size_t>(B * T * NKV * HD)),
       v = randv(static_cast<std::size_t>(B * T * NKV * HD));
  std::vector<float> o(q.size()), lse(static_cast<std::size_t>(B * NH * T));
  for (auto _ : st) attention_forward(o.data(), lse.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD);
  flops(st, attn_flops(B, T, NH, HD));
}
void BM_attention_bwd(benchmark::State& st) {
  const std::int64_t B = st.range(0), T = st.range(1), NH = st.range(2), NKV = st.range(3), HD = st.range(4);
  auto q = randv(static_cast<std::size_t>(B * T * NH * HD)), k = randv(static_cast<std::size_t>(B * T * NKV * HD)),
       v = randv(static_cast<std::size_t>(B * T * NKV * HD)), dout = randv(q.size());
  std::vector<float> o(q.size()), lse(static_cast<std::size_t>(B * NH * T)), dq(q.size()), dk(k.size()), dv(v.size());
  attention_forward(o.data(), lse.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD);
  for (auto _ : st)
    attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(),
                       o.data(), lse.data(), B, T, NH, NKV, HD);
  flops(st, 2.5 * attn_flops(B, T, NH, HD));  // 5 GEMMs per tile vs forward's 2
}

void BM_rmsnorm_fwd_bwd(benchmark::State& st) {
  const std::int64_t N = st.range(0), C = st.range(1);
  auto x = randv(static_cast<std::size_t>(N * C)), w = randv(static_cast<std::size_t>(C)), dy = randv(static_cast<std::size_t>(N * C));
  std::vector<float> y(x.size()), r(static_cast<std::size_t>(N)), dx(x.size()), dw(static_cast<std::size_t>(C));
  for (auto _ : st) {
    rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C);
    rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), r.data(), N, C);
  }
}
void BM_rope_fwd_bwd(benchmark::State& st) {
  const std::int64_t B = st.range(0), T = st.range(1), NH = st.range(2), HD = st.range(3);
  auto x = randv(static_cast<std::size_t>(B * T * NH * HD));
  std::vector<float> cs(static_cast<std::size_t>(T * HD / 2)), sn(cs.size()), y(x.size());
  rope_table(cs.data(), sn.data(), T, HD);
  for (auto _ : st) {
    rope_forward(y.data(), x.data(), cs.data(), sn.data(), B, T, NH, HD);
    rope_backward(y.data(), y.data(), cs.data(), sn.data(), B, T, NH, HD);
  }
}
void BM_swiglu_fwd_bwd(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  auto a = randv(static_cast<std::size_t>(n)), b = randv(static_cast<std::size_t>(n)), g = randv(static_cast<std::size_t>(n));
  std::vector<float> o(static_cast<std::size_t>(n)), da(o.size()), db(o.size());
  for (auto _ : st) {
    swiglu_forward(o.data(), a.data(), b.data(), n);
    swiglu_backward(da.data(), db.data(), g.data(), a.data(), b.data(), n);
  }
}
void BM_cross_entropy_fwd_bwd(benchmark::State& st) {
  const std::int64_t N = st.range(0), V = st.range(1);
  auto logits = randv(static_cast<std::size_t>(N * V), 2.0f);
  std::vector<std::int32_t> t(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < N; ++i) t[static_cast<std::size_t>(i)] = std::int32_t((i * 7919) % V);
  std::vector<float> d(logits.size());
  for (auto _ : st)
    benchmark::DoNotOptimize(cross_entropy_forward_backward(d.data(), nullptr, logits.data(), t.data(), N, V));
}
void BM_embedding_fwd_bwd(benchmark::State& st) {
  const std::int64_t N = st.range(0), V = st.range(1), C = st.range(2);
  auto wte = randv(static_cast<std::size_t>(V * C)), dy = randv(static_cast<std::size_t>(N * C));
  std::vector<std::int32_t> t(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < N; ++i) t[static_cast<std::size_t>(i)] = std::int32_t((i * 7919) % V);
  std::vector<float> y(dy.size()), dw(wte.size());
  for (auto _ : st) {
    embedding_forward(y.data(), t.data(), wte.data(), N, V, C);
    embedding_backward(dw.data(), dy.data(), t.data(), N, V, C);
  }
}
void BM_adamw(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  auto p = randv(static_cast<std::size_t>(n)), g = randv(static_cast<std::size_t>(n));
  std::vector<float> m(p.size()), v(p.size());
  std::int64_t step = 0;
  for (auto _ : st) adamw_update(p.data(), g.data(), m.data(), v.data(), static_cast<std::size_t>(n), ++step, {});
}
void BM_clip_grad_norm(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  auto g = randv(static_cast<std::size_t>(n));
  for (auto _ : st) benchmark::DoNotOptimize(clip_grad_norm(g.data(), static_cast<std::size_t>(n), 1e9f));
}
}  // namespace

BENCHMARK(BM_sgemm_tessera)->Arg(512)->Arg(1024)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sgemm_openblas_threads)->Arg(512)->Arg(1024)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);
// debug-model-like (dim 256, FFN 768, 8 x 512 tokens) and a wider layer (dim 1024)
BENCHMARK(BM_linear_fwd)->Args({4096, 256, 768})->Args({4096, 768, 256})->Args({4096, 1024, 1024})
    ->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_linear_bwd)->Args({4096, 256, 768})->Args({4096, 768, 256})->Args({4096, 1024, 1024})
    ->UseRealTime()->Unit(benchmark::kMillisecond);
// B, T, NH, NKV, HD
BENCHMARK(BM_attention_fwd)->Args({8, 512, 16, 16, 16})->Args({2, 2048, 8, 2, 64})->Args({1, 8192, 4, 1, 64})
    ->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_bwd)->Args({8, 512, 16, 16, 16})->Args({2, 2048, 8, 2, 64})
    ->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_rmsnorm_fwd_bwd)->Args({4096, 256})->Args({4096, 1024})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_rope_fwd_bwd)->Args({8, 512, 16, 16})->Args({2, 2048, 8, 64})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_swiglu_fwd_bwd)->Arg(4096 * 768)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_cross_entropy_fwd_bwd)->Args({4096, 2048})->Args({1024, 32000})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_embedding_fwd_bwd)->Args({4096, 2048, 256})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_adamw)->Arg(1 << 23)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_clip_grad_norm)->Arg(1 << 23)->UseRealTime()->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  use_native_blas_core(argv);  // OpenBLAS 0.3.21 misdetects this Xeon: see matmul.hpp
  benchmark::AddCustomContext("blas_core", blas_core());
  benchmark::AddCustomContext("threads", std::to_string(num_threads()));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
