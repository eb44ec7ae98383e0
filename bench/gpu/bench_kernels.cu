// GPU kernel throughput at Llama 3 8B's shapes, as Markdown tables (bench/gpu/run.sh runs it;
// docs/cuda.md). Without a GPU it says why and exits 77 (ctest: skipped).
//
//   GEMMs: the linears of one 8B block on 8,192 tokens (wq 4096 -> 4096, wk 4096 -> 1024,
//   w1 4096 -> 14336, w2 14336 -> 4096): cuda::matmul_forward (cuBLASLt) with f32 and bf16
//   operands next to cuBLAS's cublasGemmEx on the same operands, TFLOP/s = 2 N C OC / time.
//   FP8 GEMMs (sm_89 and newer): the same linears from e4m3 codes with tensorwise and rowwise
//   dequantization scales (cuda::matmul_forward_f8), next to the bf16 figure above.
//   Float8's casts for the backward (kernels/cuda/float8.cuh), a float and 4 floats a load: the
//   cast-and-transpose of 8B's operands by column, and an output gradient [8,192, OC] cast both
//   ways as two f8_codes calls against one f8_codes_both.
//   Attention: cuda::attention_forward / attention_backward (f32) and their tensor-core
//   counterparts attention_forward_bf16 / attention_backward_bf16 (bf16 operands, f32
//   accumulation: what cuda_bf16_kernels runs; the backward both with dq fused into the
//   dk/dv kernel, the default, and from its own kernel), 32 query and 8 KV heads of 128, one sequence
//   of 2,048 and 8,192 tokens; TFLOP/s with FlashAttention's count (forward 4 T^2 HD NH / 2
//   for causal, backward 2.5 x forward). Where built with tessera::cudnn and cuDNN 9 is found,
//   cuDNN's fused attention too: as cuda_bf16_kernels runs it (cuda::attention_*_cudnn, the
//   casts to and from bf16 included) and its kernels alone on bf16 tensors
//   (cudnn_attention.hpp's sdpa_forward / sdpa_backward, through cuda::cudnn::linked()).
// Each figure: the median of 10 timed runs (CUDA events) after 2 warm-up runs.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <tessera/kernels/cuda/attention.cuh>
#include <tessera/kernels/cuda/attention_cudnn.cuh>
#include <tessera/kernels/cuda/attention_tc.cuh>
#include <tessera/kernels/cuda/float8.cuh>
#include <tessera/kernels/cuda/float8_linear.cuh>
#include <tessera/kernels/cuda/gemm.hpp>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/tensor.hpp>

using namespace tessera;

namespace {
/// Median milliseconds of f() over 10 runs after 2 warm-ups.
double median_ms(const std::function<void()>& f) {
  cuda_event a, b;
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < 10; ++i) {
    a.record();
    f();
    b.record();
    b.synchronize();
    t.push_back(b.since(a));
  }
  std::sort(t.begin(), t.end());
  return t[5];
}

template <class T>
tensor<T, cuda_space> device_random(std::int64_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> f(static_cast<std::size_t>(n));
  for (auto& x : f) x = d(g);
  std::vector<T> h(f.size());
  if constexpr (std::is_same_v<T, float>) h = f;
  else convert(h.data(), f.data(), f.size());
  tensor<T, cuda_space> t({n});
  copy_to_device(t.data(), h.data(), h.size() * sizeof(T));
  return t;
}

void gemms() {
  struct shape {
    const char* name;
    std::int64_t C, OC;
  };
  const std::int64_t N = 8192;
  const shape shapes[] = {{"wq", 4096, 4096}, {"wk", 4096, 1024}, {"w1", 4096, 14336}, {"w2", 14336, 4096}};
  cuda::blas lt;
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw error("bench_kernels: cublasCreate failed");
  std::printf("## GEMMs (N = %lld tokens)\n\n| linear | C -> OC | operands | cuBLASLt (tessera) TFLOP/s | cublasGemmEx TFLOP/s |\n"
              "|---|---|---|---|---|\n",
              static_cast<long long>(N));
  for (const shape& s : shapes) {
    const double flops = 2.0 * static_cast<double>(N) * static_cast<double>(s.C) * static_cast<double>(s.OC);
    tensor<float, cuda_space> out({N * s.OC});
    auto run = [&]<class T>(T, const char* what, cudaDataType_t ty) {
      auto x = device_random<T>(N * s.C, 1), w = device_random<T>(s.OC * s.C, 2);
      const double ours = median_ms([&] { cuda::matmul_forward<T>(lt, out.data(), x.data(), w.data(), N, s.C, s.OC); });
      const float one = 1.0f, zero = 0.0f;
      const double ref = median_ms([&] {
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.OC), static_cast<int>(N), static_cast<int>(s.C),
                     &one, w.data(), ty, static_cast<int>(s.C), x.data(), ty, static_cast<int>(s.C), &zero, out.data(),
                     CUDA_R_32F, static_cast<int>(s.OC), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      });
      std::printf("| %s | %lld -> %lld | %s | %.1f | %.1f |\n", s.name, static_cast<long long>(s.C),
                  static_cast<long long>(s.OC), what, flops / ours / 1e9, flops / ref / 1e9);
    };
    run(float{}, "f32", CUDA_R_32F);
    run(bf16{}, "bf16", CUDA_R_16BF);
  }
  cublasDestroy(h);
  std::printf("\n");
}

void gemms_f8(int sm) {
  const std::int64_t N = 8192;
  if (sm < 89) {
    std::printf("## FP8 GEMMs\n\nskipped: sm_%d (FP8 GEMMs need sm_89 or newer)\n\n", sm);
    return;
  }
  struct shape {
    const char* name;
    std::int64_t C, OC;
  };
  const shape shapes[] = {{"wq", 4096, 4096}, {"wk", 4096, 1024}, {"w1", 4096, 14336}, {"w2", 14336, 4096}};
  cuda::blas lt;
  std::printf("## FP8 GEMMs (e4m3, N = %lld tokens)\n\n| linear | C -> OC | tensorwise TFLOP/s | rowwise TFLOP/s |\n"
              "|---|---|---|---|\n",
              static_cast<long long>(N));
  for (const shape& s : shapes) {
    const double flops = 2.0 * static_cast<double>(N) * static_cast<double>(s.C) * static_cast<double>(s.OC);
    tensor<float, cuda_space> out({N * s.OC}), codes({(N * s.C + s.OC * s.C + 3) / 4}), sx({N}), sw({s.OC});
    auto* x = reinterpret_cast<std::uint8_t*>(codes.data());
    std::uint8_t* w = x + N * s.C;  // codes of zeros: the timing does not depend on the values
    const std::vector<float> ones_x(static_cast<std::size_t>(N), 1.0f), ones_w(static_cast<std::size_t>(s.OC), 1.0f);
    copy_to_device(sx.data(), ones_x.data(), ones_x.size() * sizeof(float));
    copy_to_device(sw.data(), ones_w.data(), ones_w.size() * sizeof(float));
    double ms[2];
    for (const bool rowwise : {false, true})
      ms[rowwise] = median_ms([&] {
        cuda::matmul_forward_f8(lt, out.data(), x, CUDA_R_8F_E4M3, sx.data(), w, CUDA_R_8F_E4M3, sw.data(), N, s.C,
                                s.OC, rowwise);
      });
    std::printf("| %s | %lld -> %lld | %.1f | %.1f |\n", s.name, static_cast<long long>(s.C),
                static_cast<long long>(s.OC), flops / ms[0] / 1e9, flops / ms[1] / 1e9);
  }
  std::printf("\n");
}

/// Float8 rowwise's casts for the backward, by both of cuda::f8_transpose_path's tile reads
/// (a float a load, the default; 4 a load): the cast-and-transpose of 8B's operands by column
/// (f8_quantize_transposed, the scales given: 5 bytes an element), and an output gradient dY
/// [N, OC] cast both ways (by row for dX, by column and transposed for dW) as two f8_codes
/// calls (what the backward ran until 2026-12-07: 14 bytes an element) and as one
/// f8_codes_both (10); GB/s over those bytes.
void casts_f8() {
  const std::int64_t N = 8192;
  using path = cuda::f8_transpose_path;
  const cpu::f8_cast by_row{dtype::f8_e4m3fn, cpu::f8_granularity::per_row},
      by_col{dtype::f8_e4m3fn, cpu::f8_granularity::per_column};
  const auto gbs = [](double bytes_per, std::int64_t rows, std::int64_t cols, double ms) {
    return bytes_per * static_cast<double>(rows) * static_cast<double>(cols) / ms / 1e6;
  };
  struct operand {
    const char* name;
    std::int64_t rows, cols;
  };
  const operand operands[] = {{"x (wq's input)", N, 4096}, {"x (w2's input)", N, 14336}, {"w1", 14336, 4096},
                              {"w2", 4096, 14336}};
  std::printf("## Float8's cast-and-transpose by column (e4m3)\n\n"
              "| operand | rows x cols | a float a load: ms (GB/s at 5 B/elem) | 4 a load: ms (GB/s) |\n"
              "|---|---|---|---|\n");
  for (const operand& o : operands) {
    auto x = device_random<float>(o.rows * o.cols, 4);
    tensor<float, cuda_space> codes({(o.rows * o.cols + 3) / 4}), scales({o.cols});
    cuda::f8_scales(scales.data(), x.data(), o.rows, o.cols, by_col);
    double ms[2];
    for (const path p : {path::elements, path::fours}) {
      cuda::set_f8_transpose_path(p);
      ms[p == path::fours] = median_ms([&] {
        cuda::f8_quantize_transposed(reinterpret_cast<std::uint8_t*>(codes.data()), x.data(), scales.data(), o.rows,
                                     o.cols, by_col);
      });
    }
    std::printf("| %s | %lld x %lld | %.3f (%.0f) | %.3f (%.0f) |\n", o.name, static_cast<long long>(o.rows),
                static_cast<long long>(o.cols), ms[0], gbs(5, o.rows, o.cols, ms[0]), ms[1],
                gbs(5, o.rows, o.cols, ms[1]));
  }
  std::printf("\n## Float8 rowwise casts of an output gradient (N = %lld tokens)\n\n"
              "| OC | two f8_codes: ms (GB/s at 14 B/elem) | f8_codes_both: ms (GB/s at 10 B/elem) | "
              "f8_codes_both, 4 a load: ms (GB/s) |\n|---|---|---|---|\n",
              static_cast<long long>(N));
  for (const std::int64_t OC : {std::int64_t{1024}, std::int64_t{4096}, std::int64_t{14336}}) {
    auto dy = device_random<float>(N * OC, 3);
    tensor<float, cuda_space> codes({(2 * N * OC + 3) / 4}), inverse({N + OC});
    auto* rows = reinterpret_cast<std::uint8_t*>(codes.data());
    std::uint8_t* cols_t = rows + N * OC;
    cuda::set_f8_transpose_path(path::elements);
    const double apart = median_ms([&] {
      cuda::f8_codes(rows, inverse.data(), dy.data(), N, OC, by_row, cpu::f8_local_amax{});
      cuda::f8_codes(cols_t, inverse.data() + N, dy.data(), N, OC, by_col, cpu::f8_local_amax{}, true);
    });
    double both[2];
    for (const path p : {path::elements, path::fours}) {
      cuda::set_f8_transpose_path(p);
      both[p == path::fours] =
          median_ms([&] { cuda::f8_codes_both(rows, cols_t, inverse.data(), dy.data(), N, OC, by_row, by_col); });
    }
    std::printf("| %lld | %.3f (%.0f) | %.3f (%.0f) | %.3f (%.0f) |\n", static_cast<long long>(OC), apart,
                gbs(14, N, OC, apart), both[0], gbs(10, N, OC, both[0]), both[1], gbs(10, N, OC, both[1]));
  }
  cuda::set_f8_transpose_path(path::elements);
  std::printf("\n");
}

/// cuDNN's fused attention's row of attention(): through cuda_bf16_kernels' adapter (f32
/// tensors, the casts included) or, `alone`, its kernels on bf16 copies of the same tensors.
void cudnn_attention(bool alone, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                     double flops, const float* q, const float* k, const float* v, const float* dy, float* out,
                     float* lse, float* dq, float* dk, float* dv) {
  double fwd = 0, bwd = 0;
  if (!alone) {
    fwd = median_ms([&] { cuda::attention_forward_cudnn(out, lse, q, k, v, B, T, NH, NKV, HD); });
    bwd = median_ms([&] { cuda::attention_backward_cudnn(dq, dk, dv, dy, q, k, v, out, lse, B, T, NH, NKV, HD); });
  } else {
    const cuda::cudnn::linked_functions& f = *cuda::cudnn::linked();  // (cudnn_attention_unavailable asked)
    const std::int64_t nq = B * T * NH * HD, nkv = B * T * NKV * HD;
    tensor<bf16, cuda_space> qb({nq}), kb({nkv}), vb({nkv}), ob({nq}), gb({nq}), dqb({nq}), dkb({nkv}), dvb({nkv});
    cuda::to_bf16(qb.data(), q, nq);
    cuda::to_bf16(kb.data(), k, nkv);
    cuda::to_bf16(vb.data(), v, nkv);
    cuda::to_bf16(gb.data(), dy, nq);
    const cuda::cudnn::sdpa_shape s{B, T, NH, NKV, HD};
    fwd = median_ms([&] { f.forward(ob.data(), lse, qb.data(), kb.data(), vb.data(), s, nullptr); });
    bwd = median_ms([&] {
      f.backward(dqb.data(), dkb.data(), dvb.data(), gb.data(), qb.data(), kb.data(), vb.data(), ob.data(), lse, s,
                 nullptr);
    });
  }
  std::printf("| %s | %lld | %.2f | %.1f | %.2f | %.1f |\n",
              alone ? "cuDNN's kernels alone (bf16 tensors)" : "cuDNN (f32 tensors: the casts included)",
              static_cast<long long>(T), fwd, flops / fwd / 1e9, bwd, 2.5 * flops / bwd / 1e9);
}

void attention() {
  const std::int64_t B = 1, NH = 32, NKV = 8, HD = 128;
  std::printf("## Attention (causal, %lld query / %lld KV heads of %lld)\n\n| kernels | seq | forward ms | forward "
              "TFLOP/s | backward ms | backward TFLOP/s |\n|---|---|---|---|---|---|\n",
              static_cast<long long>(NH), static_cast<long long>(NKV), static_cast<long long>(HD));
  for (const std::int64_t T : {2048, 8192}) {
    auto q = device_random<float>(B * T * NH * HD, 3), k = device_random<float>(B * T * NKV * HD, 4),
         v = device_random<float>(B * T * NKV * HD, 5), dy = device_random<float>(B * T * NH * HD, 6);
    tensor<float, cuda_space> out({B * T * NH * HD}), lse({B * NH * T}), D({B * NH * T}), dq({B * T * NH * HD}),
        dk({B * T * NKV * HD}), dv({B * T * NKV * HD});
    const double flops = 4.0 * static_cast<double>(B * NH) * static_cast<double>(T) * static_cast<double>(T) *
                         static_cast<double>(HD) / 2.0;
    // f32; the tensor cores with dq fused into the dk/dv kernel; the tensor cores with dq from
    // its own kernel (dq_path::separate, what cuda_bf16_kernels runs); the same with the wide
    // forward (forward_path::wide: 128 rows a block, not yet the default)
    for (const int kind : {0, 1, 2, 3, 4, 5}) {
      const bool tc = kind > 0;
      if (tc && !cuda::tc_attention_supported(HD)) continue;
      if (kind >= 4) {  // cuDNN's
        if (const std::string why = cuda::cudnn_attention_unavailable(); !why.empty()) {
          if (kind == 4) std::printf("| cuDNN: not run here (%s) | %lld | | | | |\n", why.c_str(), static_cast<long long>(T));
          continue;
        }
        cudnn_attention(kind == 5, B, T, NH, NKV, HD, flops, q.data(), k.data(), v.data(), dy.data(), out.data(),
                        lse.data(), dq.data(), dk.data(), dv.data());
        continue;
      }
      const double fwd = median_ms([&] {
        if (tc)
          cuda::attention_forward_bf16(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD, nullptr,
                                       kind == 3 ? cuda::forward_path::wide : cuda::forward_path::narrow);
        else
          cuda::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD, nullptr);
      });
      const double bwd = median_ms([&] {
        if (tc)
          cuda::attention_backward_bf16(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(), v.data(),
                                        out.data(), lse.data(), D.data(), B, T, NH, NKV, HD, nullptr,
                                        kind == 1 ? cuda::dq_path::fused : cuda::dq_path::separate);
        else
          cuda::attention_backward(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(), v.data(), out.data(),
                                   lse.data(), D.data(), B, T, NH, NKV, HD, nullptr);
      });
      const char* name[] = {"f32", "bf16 tensor cores (dq fused)", "bf16 tensor cores (dq_k)",
                            "bf16 tensor cores (wide forward; dq_k)"};
      std::printf("| %s | %lld | %.2f | %.1f | %.2f | %.1f |\n", name[kind], static_cast<long long>(T), fwd,
                  flops / fwd / 1e9, bwd, 2.5 * flops / bwd / 1e9);
    }
  }
  std::printf("\n");
}
}  // namespace

int main() {
  if (cuda_device_count() == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("# Kernel throughput on %s (sm_%d%d)\n\n", prop.name, prop.major, prop.minor);
  try {
    gemms();
    gemms_f8(prop.major * 10 + prop.minor);
    casts_f8();
    attention();
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
