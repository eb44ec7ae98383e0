// tessera/kernels/cpu/matmul.hpp: GEMM through OpenBLAS and the Linear layer.
// tessera-requires: openblas
//
// Row-major throughout. OpenBLAS is set to one thread on first use and tessera splits large
// GEMMs into row (or column) panels over its own pool (parallel.hpp), so that the kernels'
// threads and OpenBLAS's never compete for the same cores.
//
// OpenBLAS 0.3.21 (Debian 12) does not know CPUs newer than it (e.g. Xeon family 6 model
// 207) and then falls back to its generic "Prescott" SSE3 kernels, about 5x slower than its
// AVX-512 ones. blas_core() names the kernels in use; the first GEMM warns once on stderr
// when the fallback is active on an AVX2/AVX-512 CPU; use_native_blas_core(argv), called
// first thing in main, sets OPENBLAS_CORETYPE (read only when the library loads) and
// re-executes the program. Setting OPENBLAS_CORETYPE=SkylakeX by hand does the same.
//
// Linear (nn.Linear convention, weights stored [out, in] as PyTorch and Hugging Face):
//   matmul_forward:  out[N,OC]  = inp[N,C] . weight[OC,C]^T (+ bias[OC])
//   matmul_backward: dinp[N,C] += dout[N,OC] . weight[OC,C]
//                    dweight[OC,C] += dout^T . inp;  dbias[OC] += sum over N of dout
// Backward kernels ACCUMULATE (+=) into gradient buffers, as llm.c: zero them once per
// optimizer step; gradient accumulation and multiple consumers of one input then need no
// extra buffers. Any gradient pointer may be nullptr to skip it.
#pragma once

// OpenBLAS's config header uses C99 _Complex, which clang -Wpedantic flags in C++.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc99-extensions"
#endif
#include <cblas.h>
#if defined(__clang__)
#pragma clang diagnostic pop
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#if defined(__linux__)
#include <unistd.h>
#endif

#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/tensor/dtype.hpp>

namespace tessera::cpu {

/// The OpenBLAS kernel family in use ("SkylakeX", "Haswell", "Prescott", ...).
inline std::string blas_core() { return openblas_get_corename(); }

/// The OPENBLAS_CORETYPE this CPU should use when OpenBLAS fell back to its generic
/// kernels on a CPU with AVX-512 or AVX2, else "" (nothing to fix).
inline std::string blas_core_fix() {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  const std::string core = blas_core();
  if (core != "Prescott" && core != "Core2" && core != "Nehalem" && core != "Atom") return "";
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2")) return "Haswell";
#endif
  return "";
}

/// If OpenBLAS runs its generic kernels on an AVX2/AVX-512 CPU and OPENBLAS_CORETYPE is
/// unset, sets it and re-executes the program with the same arguments (Linux). Call at
/// the top of main(); returns when nothing needs doing (or re-execution failed).
inline void use_native_blas_core([[maybe_unused]] char** argv) {
#if defined(__linux__)
  const std::string fix = blas_core_fix();
  if (fix.empty() || std::getenv("OPENBLAS_CORETYPE")) return;
  ::setenv("OPENBLAS_CORETYPE", fix.c_str(), 1);
  ::execv("/proc/self/exe", argv);
#endif
}

namespace detail {
inline void openblas_single_threaded() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    const std::string fix = blas_core_fix();
    if (!fix.empty())
      std::fprintf(stderr,
                   "tessera: OpenBLAS uses its generic '%s' kernels on this CPU (about 5x slower); "
                   "run with OPENBLAS_CORETYPE=%s or call tessera::cpu::use_native_blas_core(argv) "
                   "first in main\n",
                   blas_core().c_str(), fix.c_str());
    return true;
  }();
  (void)once;
}
}  // namespace detail

/// C[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C on the calling thread only (use it
/// inside parallel loops). Leading dimensions are row strides in elements.
inline void gemm_serial(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                        float alpha, const float* A, std::int64_t lda, const float* B,
                        std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  detail::openblas_single_threaded();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

/// As gemm_serial, split over the pool: row panels of C when M >= N, else column panels.
/// Panels are multiples of 64 rows/columns; small products stay on one thread.
inline void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                 float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
                 float beta, float* C, std::int64_t ldc) {
  const std::int64_t nt = num_threads();
  const bool small = M * N * std::max<std::int64_t>(K, 1) < 64 * 64 * 64 || thread_pool::in_worker();
  if (nt == 1 || small) return gemm_serial(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  const bool by_rows = M >= N;
  const std::int64_t len = by_rows ? M : N;
  const std::int64_t blocks = (len + 63) / 64;
  parallel_for(blocks, [&](std::int64_t b0, std::int64_t b1) {
    const std::int64_t s = b0 * 64, e = std::min(len, b1 * 64);
    if (by_rows) {
      const float* a = trans_a ? A + s : A + s * lda;
      gemm_serial(trans_a, trans_b, e - s, N, K, alpha, a, lda, B, ldb, beta, C + s * ldc, ldc);
    } else {
      const float* b = trans_b ? B + s * ldb : B + s;
      gemm_serial(trans_a, trans_b, M, e - s, K, alpha, A, lda, b, ldb, beta, C + s, ldc);
    }
  });
}

/// out[N,OC] = inp[N,C] . weight[OC,C]^T + bias (bias may be nullptr).
inline void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                           std::int64_t N, std::int64_t C, std::int64_t OC) {
  if (bias) {
    parallel_for(N, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i)
        std::copy(bias, bias + OC, out + i * OC);
    }, 64);
  }
  gemm(false, true, N, OC, C, 1.0f, inp, C, weight, C, bias ? 1.0f : 0.0f, out, OC);
}

/// Accumulates dinp += dout . weight, dweight += dout^T . inp, dbias += colsum(dout) (with
/// write_dinp, dinp = dout . weight: what it held is not read; write_dweight likewise). Any of
/// dinp, dweight, dbias may be nullptr.
inline void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                            const float* inp, const float* weight, std::int64_t N, std::int64_t C,
                            std::int64_t OC, bool write_dinp = false, bool write_dweight = false) {
  if (dinp) gemm(false, false, N, C, OC, 1.0f, dout, OC, weight, C, write_dinp ? 0.0f : 1.0f, dinp, C);
  if (dweight) gemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, write_dweight ? 0.0f : 1.0f, dweight, C);
  if (dbias) {
    parallel_for(OC, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = 0; i < N; ++i)
        for (std::int64_t o = b; o < e; ++o) dbias[o] += dout[i * OC + o];
    }, 64);
  }
}

/// Mixed precision Linear: bf16 input and weight converted to f32, f32 accumulation and
/// output. Converts into temporary f32 buffers (the layer's cost stays in the GEMM).
inline void matmul_forward(float* out, const bf16* inp, const bf16* weight, const float* bias,
                           std::int64_t N, std::int64_t C, std::int64_t OC) {
  std::vector<float> a(static_cast<std::size_t>(N * C)), w(static_cast<std::size_t>(OC * C));
  parallel_for(N * C, [&](std::int64_t b, std::int64_t e) { convert(a.data() + b, inp + b, std::size_t(e - b)); }, 4096);
  parallel_for(OC * C, [&](std::int64_t b, std::int64_t e) { convert(w.data() + b, weight + b, std::size_t(e - b)); }, 4096);
  matmul_forward(out, a.data(), w.data(), bias, N, C, OC);
}

/// Mixed precision Linear backward: bf16 input and weight (as stored for forward), f32
/// gradients accumulated as the f32 matmul_backward does.
inline void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                            const bf16* inp, const bf16* weight, std::int64_t N, std::int64_t C,
                            std::int64_t OC) {
  std::vector<float> a(dweight ? static_cast<std::size_t>(N * C) : 0),
      w(dinp ? static_cast<std::size_t>(OC * C) : 0);
  if (dweight)
    parallel_for(N * C, [&](std::int64_t b, std::int64_t e) { convert(a.data() + b, inp + b, std::size_t(e - b)); }, 4096);
  if (dinp)
    parallel_for(OC * C, [&](std::int64_t b, std::int64_t e) { convert(w.data() + b, weight + b, std::size_t(e - b)); }, 4096);
  matmul_backward(dinp, dweight, dbias, dout, a.data(), w.data(), N, C, OC);
}

}  // namespace tessera::cpu
