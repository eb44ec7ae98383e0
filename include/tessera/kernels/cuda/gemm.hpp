// tessera/kernels/cuda/gemm.hpp: GEMMs on the GPU through cuBLASLt, with the CPU matmul's
// interface (kernels/cpu/matmul.hpp) -- f32 or bf16 operands, f32 output and accumulation.
// tessera-requires: cuda
//
//   cuda::blas b(stream);                       a cuBLASLt handle, a workspace, a stream
//   b.gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
//                                               column-major C = alpha op(A) op(B) + beta C
//   cuda::matmul_forward(b, out, inp, w, N, C, OC)       out[N, OC] = inp[N, C] w[OC, C]^T
//   cuda::matmul_backward(b, dinp, dw, dout, inp, w, N, C, OC[, write_dinp, write_dw])
//                                               ACCUMULATES dinp[N, C] and dw[OC, C]
//                                               (write_dinp / write_dw: writes it, beta 0)
//   b.gemm_f8(m, n, k, A, ta, a_scale, B, tb, b_scale, rowwise, C)
//                                               FP8 codes (e4m3 / e5m2) in cuBLASLt's "TN"
//                                               layout with dequantization scales
//   cuda::matmul_forward_f8(b, out, x, x_type, x_scale, w, w_type, w_scale, N, C, OC, rowwise)
//                                               out = (x / sx) (w / sw)^T from FP8 codes
//   cuda::matmul_grad_input_f8(b, dinp, dout, ..., w_t, ..., N, C, OC, rowwise[, write_dinp])
//   cuda::matmul_grad_weight_f8(b, dw, dout_t, ..., inp_t, ..., N, C, OC, rowwise[, write_dw])
//                                               the backward's GEMMs, ACCUMULATING (written
//                                               with write_dinp / write_dw), from codes
//                                               transposed where the TN layout needs them
//                                               (cuda::f8_transpose, kernels/cuda/float8.cuh)
// Row-major data are column-major transposes, so the row-major products map onto cuBLASLt
// without copies: out^T = w . inp^T is (A = w stored [C, OC] col-major, op T) x (B = inp
// stored [C, N], op N), the "TN" layout that Hopper's FP8 GEMMs also need; dinp^T = w^T .
// dout^T (N, N); dw^T = inp^T . dout (N, T). Compute type CUBLAS_COMPUTE_32F (no TF32: the
// CPU path's f32 products), scale type f32. Operands are float or bf16 (tessera::bf16 has
// __nv_bfloat16's bits); the output is f32. Llama's linears have no bias: a bias is refused.
// FP8 (sm_89 and newer): A and B are codes (kernels/cuda/float8.cuh's f8_quantize) in the
// TN layout cuBLASLt's FP8 GEMMs take, each with its dequantization scales 1 / scale on the
// device -- one float (tensorwise) or, `rowwise`, a vector per operand of m and n floats
// (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F): torchao's tensorwise and rowwise recipes;
// accumulation in f32 without FAST_ACCUM.
// Host C++ against the cuBLASLt API: compiles with the host compiler.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <tessera/core/error.hpp>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/dtype.hpp>
#include <tessera/tensor/memory.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera::cuda {

/// Throws tessera::error naming `what` when a cuBLAS(Lt) call failed.
inline void blas_check(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw error(what + ": " + cublasLtGetStatusName(s) + ": " + cublasLtGetStatusString(s));
}

template <class T>
inline constexpr cudaDataType_t cuda_type_of = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;

/// A cuBLASLt handle with its workspace (device memory, tracked) and stream.
class blas {
 public:
  explicit blas(cudaStream_t stream = nullptr, std::size_t workspace_bytes = std::size_t{32} << 20)
      : stream_(stream), ws_bytes_(workspace_bytes) {
    blas_check(cublasLtCreate(&h_), "cuda::blas: cublasLtCreate");
    ws_ = cuda_space::allocate(ws_bytes_);
  }
  ~blas() {
    cuda_space::deallocate(ws_, ws_bytes_);
    if (h_) (void)cublasLtDestroy(h_);
  }
  blas(const blas&) = delete;
  blas& operator=(const blas&) = delete;
  cudaStream_t stream() const noexcept { return stream_; }

  /// Column-major C[m, n] = alpha op(A) op(B) + beta C, A and B of element type T (float or
  /// bf16), C float; op(A) is m x k, op(B) k x n.
  /// Column-major C[m, n] = op(A) op(B) + beta C with A, B FP8 codes of types a_type, b_type
  /// (CUDA_R_8F_E4M3 or CUDA_R_8F_E5M2; not both e5m2), A stored k x m (transposed) and B
  /// k x n (the TN layout), each multiplied by its dequantization scales (device floats: 1,
  /// or m and n under `rowwise`); C float (beta 1: accumulate, as the backward does).
  void gemm_f8(std::int64_t m, std::int64_t n, std::int64_t k, const void* A, cudaDataType_t a_type,
               const float* a_scale, const void* B, cudaDataType_t b_type, const float* b_scale, bool rowwise,
               float* C, float beta = 0.0f) {
    matmul(true, false, m, n, k, 1.0f, A, a_type, k, B, b_type, k, beta, C, m,
           [&](cublasLtMatmulDesc_t op, const std::string& what) {
             blas_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale),
                        what + ": A scale");
             blas_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale),
                        what + ": B scale");
             if (rowwise) {
               const cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
               blas_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode),
                          what + ": A scale mode (rowwise)");
               blas_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode),
                          what + ": B scale mode (rowwise)");
             }
           });
  }

  template <class T>
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const T* A,
            std::int64_t lda, const T* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>, "cuda::blas::gemm: float or bf16 operands");
    matmul(ta, tb, m, n, k, alpha, A, cuda_type_of<T>, lda, B, cuda_type_of<T>, ldb, beta, C, ldc,
           [](cublasLtMatmulDesc_t, const std::string&) {});
  }

 private:
  cublasLtHandle_t h_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::size_t ws_bytes_ = 0;
  void* ws_ = nullptr;

  /// The one cuBLASLt call of gemm and gemm_f8: descriptors, `extra(op, what)` for the
  /// FP8 scales, the heuristic's best algorithm, the matmul.
  template <class Extra>
  void matmul(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const void* A,
              cudaDataType_t a_type, std::int64_t lda, const void* B, cudaDataType_t b_type, std::int64_t ldb,
              float beta, float* C, std::int64_t ldc, Extra&& extra) {
    if (m == 0 || n == 0) return;
    const std::string what = "cuda::blas::gemm (" + std::to_string(m) + " x " + std::to_string(n) + " x " +
                             std::to_string(k) + ")";
    struct owned {  // the descriptors, released on every path
      cublasLtMatmulDesc_t op = nullptr;
      cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
      cublasLtMatmulPreference_t pref = nullptr;
      ~owned() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
      }
    } d;
    blas_check(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), what + ": cublasLtMatmulDescCreate");
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    blas_check(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), what + ": TRANSA");
    blas_check(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), what + ": TRANSB");
    // the stored matrices: A is m x k (k x m when transposed), B k x n (n x k)
    extra(d.op, what);
    blas_check(cublasLtMatrixLayoutCreate(&d.a, a_type, static_cast<std::uint64_t>(ta ? k : m),
                                          static_cast<std::uint64_t>(ta ? m : k), lda),
               what + ": layout of A");
    blas_check(cublasLtMatrixLayoutCreate(&d.b, b_type, static_cast<std::uint64_t>(tb ? n : k),
                                          static_cast<std::uint64_t>(tb ? k : n), ldb),
               what + ": layout of B");
    blas_check(cublasLtMatrixLayoutCreate(&d.c, CUDA_R_32F, static_cast<std::uint64_t>(m), static_cast<std::uint64_t>(n), ldc),
               what + ": layout of C");
    blas_check(cublasLtMatmulPreferenceCreate(&d.pref), what + ": preference");
    blas_check(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes_,
                                                    sizeof ws_bytes_),
               what + ": workspace");
    cublasLtMatmulHeuristicResult_t best{};
    int found = 0;
    blas_check(cublasLtMatmulAlgoGetHeuristic(h_, d.op, d.a, d.b, d.c, d.c, d.pref, 1, &best, &found),
               what + ": cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) throw error(what + ": cuBLASLt has no algorithm for these operands and layouts");
    blas_check(cublasLtMatmul(h_, d.op, &alpha, A, d.a, B, d.b, &beta, C, d.c, C, d.c, &best.algo, ws_, ws_bytes_, stream_),
               what + ": cublasLtMatmul");
  }
};

/// out[N, OC] = inp[N, C] . w[OC, C]^T (written), as cpu::matmul_forward without a bias.
template <class T>
void matmul_forward(blas& b, float* out, const T* inp, const T* w, std::int64_t N, std::int64_t C, std::int64_t OC) {
  b.gemm(true, false, OC, N, C, 1.0f, w, C, inp, C, 0.0f, out, OC);
}

/// ACCUMULATES dinp[N, C] += dout[N, OC] . w and dw[OC, C] += dout^T . inp (either may be
/// null; write_dinp, write_dw: written instead, beta 0), as cpu::matmul_backward without a bias.
template <class T>
void matmul_backward(blas& b, float* dinp, float* dw, const T* dout, const T* inp, const T* w, std::int64_t N,
                     std::int64_t C, std::int64_t OC, bool write_dinp = false, bool write_dw = false) {
  if (dinp) b.gemm(false, false, C, N, OC, 1.0f, w, C, dout, OC, write_dinp ? 0.0f : 1.0f, dinp, C);
  if (dw) b.gemm(false, true, C, OC, N, 1.0f, inp, C, dout, OC, write_dw ? 0.0f : 1.0f, dw, C);
}

/// The side of gemm_peak_flops's GEMMs: 4096 on a GPU (a few milliseconds of an H100); 512 on
/// the host's CUDA emulation (the GPU code's host tests, tests/support/emulated_cuda), where
/// cuBLASLt is OpenBLAS and twelve 4096-cubes took 27 s of every emulated trainer run for an
/// MFU that only gets printed.
#ifdef TESSERA_CUDA_EMULATION
inline constexpr std::int64_t gemm_peak_side = 512;
#else
inline constexpr std::int64_t gemm_peak_side = 4096;
#endif

/// The FLOP/s of GEMMs of n x n x n with operands of type T (float: no TF32; bf16: the
/// tensor cores) and f32 output through `b` (10 timed after 2 untimed): the MFU denominator of
/// a device run, measured as the CPU run measures its sgemm peak.
template <class T = float>
double gemm_peak_flops(blas& b, std::int64_t n = gemm_peak_side) {
  space_vector<T, cuda_space> A(static_cast<std::size_t>(n * n)), B(static_cast<std::size_t>(n * n));
  tensor<float, cuda_space> C({n * n});
  const auto run = [&] { b.gemm(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n); };
  run();
  run();
  cuda_event start, stop;
  start.record(b.stream());
  constexpr int reps = 10;
  for (int i = 0; i < reps; ++i) run();
  stop.record(b.stream());
  stop.synchronize();
  const double secs = static_cast<double>(stop.since(start)) / 1e3;
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) * reps / secs;
}

/// out[N, OC] = (x / sx)[N, C] . (w / sw)[OC, C]^T (written) from FP8 codes x, w of types
/// x_type, w_type with dequantization scales x_scale, w_scale (device; 1 float each, or
/// rowwise N and OC floats: per token and per output feature, torchao's rowwise recipe).
inline void matmul_forward_f8(blas& b, float* out, const std::uint8_t* x, cudaDataType_t x_type, const float* x_scale,
                              const std::uint8_t* w, cudaDataType_t w_type, const float* w_scale, std::int64_t N,
                              std::int64_t C, std::int64_t OC, bool rowwise) {
  b.gemm_f8(OC, N, C, w, w_type, w_scale, x, x_type, x_scale, rowwise, out);
}

/// dinp[N, C] += (dout / sd)[N, OC] . (w / sw)[OC, C] (with write_dinp, =) from FP8 codes:
/// dout [N, OC] as stored, w_t = w's codes transposed, [C, OC] (f8_transpose); dequantization scales dout_scale (1,
/// or N: per row of dout) and w_scale (1, or C: per column of w) -- torchao's rowwise
/// grad_input. The column-major product dinp^T = w^T . dout^T is TN with A = w_t, B = dout.
inline void matmul_grad_input_f8(blas& b, float* dinp, const std::uint8_t* dout, cudaDataType_t dout_type,
                                 const float* dout_scale, const std::uint8_t* w_t, cudaDataType_t w_type,
                                 const float* w_scale, std::int64_t N, std::int64_t C, std::int64_t OC, bool rowwise,
                                 bool write_dinp = false) {
  b.gemm_f8(C, N, OC, w_t, w_type, w_scale, dout, dout_type, dout_scale, rowwise, dinp, write_dinp ? 0.0f : 1.0f);
}

/// dw[OC, C] += (dout / sd)^T . (inp / si) (with write_dw, =) from transposed FP8 codes:
/// dout_t [OC, N], inp_t [C, N]; dequantization scales dout_scale (1, or OC: per column of dout) and inp_scale (1,
/// or C: per column of inp) -- torchao's rowwise grad_weight. dw^T = inp^T . dout is TN with
/// A = inp_t, B = dout_t.
inline void matmul_grad_weight_f8(blas& b, float* dw, const std::uint8_t* dout_t, cudaDataType_t dout_type,
                                  const float* dout_scale, const std::uint8_t* inp_t, cudaDataType_t inp_type,
                                  const float* inp_scale, std::int64_t N, std::int64_t C, std::int64_t OC,
                                  bool rowwise, bool write_dw = false) {
  b.gemm_f8(C, OC, N, inp_t, inp_type, inp_scale, dout_t, dout_type, dout_scale, rowwise, dw, write_dw ? 0.0f : 1.0f);
}

}  // namespace tessera::cuda
