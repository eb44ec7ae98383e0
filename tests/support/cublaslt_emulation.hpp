// The part of cuBLASLt tessera calls (kernels/cuda/gemm.hpp), emulated on the host over
// OpenBLAS beside the CUDA runtime's emulation (cuda_runtime_emulation.hpp): handles, matmul
// descriptors with TRANSA / TRANSB and the FP8 scales (pointer and mode), matrix layouts,
// preferences, the heuristic and cublasLtMatmul.
//
// D = alpha (a_scale (x) b_scale) op(A) op(B) + beta C, column-major, f32 C and D, with A and
// B f32, bf16 (tessera::bf16, __nv_bfloat16's bits) or FP8 codes (e4m3 / e5m2) converted to
// f32 and multiplied by sgemm (f32 products and sums, as CUBLAS_COMPUTE_32F without TF32; the
// order of the sums differs from a GPU's). Scales: one float each (SCALAR_32F, the default)
// or, OUTER_VEC_32F, m floats for A and n for B, element (i, j) multiplied by a_scale[i] and
// b_scale[j] (cuBLASLt's documented meaning). C is not read when beta is 0.
// Refused as cuBLASLt refuses (the heuristic finds no algorithm, or the call returns
// CUBLAS_STATUS_NOT_SUPPORTED / INVALID_VALUE): FP8 operands other than "TN" (A transposed,
// B not), leading dimensions of FP8 operands not multiples of 16, e5m2 x e5m2, FP8 below sm_89,
// outer-vector scales below sm_90, FP8 without scale pointers, a layout whose leading dimension
// is shorter than its rows, mixed non-FP8 operand types; and what a GPU would fault on: an
// operand, scale or workspace outside every device allocation (CUBLAS_STATUS_INVALID_VALUE).
#pragma once

#include <cblas.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <cuda_runtime_emulation.hpp>
#include <tessera/core/float8.hpp>
#include <tessera/tensor/dtype.hpp>

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasLtMatmulMatrixScale_t {
  CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F = 0,
  CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F = 3,
};
enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17,
  CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18,
  CUBLASLT_MATMUL_DESC_A_SCALE_MODE = 31,
  CUBLASLT_MATMUL_DESC_B_SCALE_MODE = 32,
};
enum cublasLtMatmulPreferenceAttributes_t { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 };

namespace tessera::cuda::emulation::lt {
struct handle {};
struct matmul_desc {
  cublasComputeType_t compute;
  cudaDataType_t scale_type;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
  cublasLtMatmulMatrixScale_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
                              b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
};
struct layout {
  cudaDataType_t type;
  std::uint64_t rows, cols;
  std::int64_t ld;
};
struct preference {
  std::size_t workspace = 0;
};

inline bool fp8(cudaDataType_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }
inline std::size_t element_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : t == CUDA_R_16BF ? 2 : 1; }
inline std::size_t span_bytes(const layout& l) {
  return l.cols == 0 ? 0 : (static_cast<std::size_t>(l.ld) * (l.cols - 1) + l.rows) * element_bytes(l.type);
}

/// Why cuBLASLt would refuse these operands (nullptr: it runs them).
inline const char* unsupported(const matmul_desc& op, const layout& a, const layout& b, const layout& c) {
  if (op.compute != CUBLAS_COMPUTE_32F || op.scale_type != CUDA_R_32F || c.type != CUDA_R_32F) return "compute type";
  for (const layout* l : {&a, &b, &c})
    if (l->ld < static_cast<std::int64_t>(l->rows) || l->ld < 1) return "leading dimension shorter than the rows";
  const bool f8 = fp8(a.type) || fp8(b.type);
  if (!f8) return a.type == b.type ? nullptr : "mixed operand types";
  if (!fp8(a.type) || !fp8(b.type)) return "FP8 with a non-FP8 operand";
  if (a.type == CUDA_R_8F_E5M2 && b.type == CUDA_R_8F_E5M2) return "e5m2 x e5m2";
  if (compute_capability.load() < 89) return "FP8 below sm_89";
  if (op.ta != CUBLAS_OP_T || op.tb != CUBLAS_OP_N) return "FP8 outside the TN layout";
  if (a.ld % 16 || b.ld % 16) return "FP8 leading dimension not a multiple of 16";
  const bool outer = op.a_mode == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F ||
                     op.b_mode == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  if (outer && (op.a_mode != op.b_mode || compute_capability.load() < 90)) return "outer-vector scales";
  if (!op.a_scale || !op.b_scale) return "FP8 without scales";
  return nullptr;
}

/// The stored matrix l at p as f32, column-major with leading dimension rows.
inline std::vector<float> to_f32(const void* p, const layout& l) {
  std::vector<float> out(static_cast<std::size_t>(l.rows * l.cols));
  for (std::uint64_t j = 0; j < l.cols; ++j)
    for (std::uint64_t i = 0; i < l.rows; ++i) {
      const std::size_t at = static_cast<std::size_t>(j * static_cast<std::uint64_t>(l.ld) + i);
      float v = 0;
      switch (l.type) {
        case CUDA_R_32F: v = static_cast<const float*>(p)[at]; break;
        case CUDA_R_16BF: v = static_cast<float>(static_cast<const bf16*>(p)[at]); break;
        case CUDA_R_8F_E4M3: v = static_cast<float>(f8_e4m3fn::from_bits(static_cast<const std::uint8_t*>(p)[at])); break;
        case CUDA_R_8F_E5M2: v = static_cast<float>(f8_e5m2::from_bits(static_cast<const std::uint8_t*>(p)[at])); break;
      }
      out[static_cast<std::size_t>(j * l.rows + i)] = v;
    }
  return out;
}
}  // namespace tessera::cuda::emulation::lt

using cublasLtHandle_t = tessera::cuda::emulation::lt::handle*;
using cublasLtMatmulDesc_t = tessera::cuda::emulation::lt::matmul_desc*;
using cublasLtMatrixLayout_t = tessera::cuda::emulation::lt::layout*;
using cublasLtMatmulPreference_t = tessera::cuda::emulation::lt::preference*;
struct cublasLtMatmulAlgo_t {
  std::uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  std::size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

inline const char* cublasLtGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}
inline const char* cublasLtGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  }
  return "unknown";
}

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = new tessera::cuda::emulation::lt::handle;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                                               cudaDataType_t scale_type) {
  *d = new tessera::cuda::emulation::lt::matmul_desc{compute, scale_type};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                     const void* value, std::size_t bytes) {
  const auto take = [&](auto& field) {
    if (bytes != sizeof field) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&field, value, bytes);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return take(d->ta);
    case CUBLASLT_MATMUL_DESC_TRANSB: return take(d->tb);
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return take(d->a_scale);
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return take(d->b_scale);
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE: return take(d->a_mode);
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: return take(d->b_mode);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType_t type, std::uint64_t rows,
                                                 std::uint64_t cols, std::int64_t ld) {
  *l = new tessera::cuda::emulation::lt::layout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = new tessera::cuda::emulation::lt::preference;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                           cublasLtMatmulPreferenceAttributes_t a, const void* value,
                                                           std::size_t bytes) {
  if (a != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES || bytes != sizeof p->workspace) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&p->workspace, value, bytes);
  return CUBLAS_STATUS_SUCCESS;
}
/// One algorithm when cuBLASLt runs these operands, none when it refuses them.
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                                     cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                     cublasLtMatmulPreference_t, int requested,
                                                     cublasLtMatmulHeuristicResult_t* results, int* found) {
  if (!h || !op || !a || !b || !c || !d || requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  *found = 0;
  if (tessera::cuda::emulation::lt::unsupported(*op, *a, *b, *c)) return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = {};
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                                     cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b,
                                     const void* beta, const void* C, cublasLtMatrixLayout_t c, void* D,
                                     cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t*, void* workspace,
                                     std::size_t workspace_bytes, cudaStream_t stream) {
  namespace emu = tessera::cuda::emulation;
  namespace lt = tessera::cuda::emulation::lt;
  if (!h || !op || !a || !b || !c || !d || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  if (lt::unsupported(*op, *a, *b, *c) || d->type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool ta = op->ta == CUBLAS_OP_T, tb = op->tb == CUBLAS_OP_T;
  const std::uint64_t m = c->rows, n = c->cols, k = ta ? a->rows : a->cols;
  if ((ta ? a->cols : a->rows) != m || (tb ? b->rows : b->cols) != n || (tb ? b->cols : b->rows) != k ||
      d->rows != m || d->cols != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool outer = op->a_mode == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  const bool f8 = lt::fp8(a->type);
  if (!emu::on_device(A, lt::span_bytes(*a)) || !emu::on_device(B, lt::span_bytes(*b)) ||
      !emu::on_device(C, lt::span_bytes(*c)) || !emu::on_device(D, lt::span_bytes(*d)) ||
      (workspace_bytes && !emu::on_device(workspace, workspace_bytes)) || !emu::valid_stream(stream) ||
      (f8 && (!emu::on_device(op->a_scale, (outer ? m : 1) * sizeof(float)) ||
              !emu::on_device(op->b_scale, (outer ? n : 1) * sizeof(float)))))
    return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  emu::device_access open;
  emu::issue(stream, "cublasLtMatmul",
             {open.add(A, lt::span_bytes(*a), false), open.add(B, lt::span_bytes(*b), false),
              open.add(C, be == 0.0f ? 0 : lt::span_bytes(*c), false), open.add(D, lt::span_bytes(*d), true),
              open.named(workspace, workspace_bytes, true),  // the emulation never touches it
              open.add(op->a_scale, f8 ? (outer ? m : 1) * sizeof(float) : 0, false),
              open.add(op->b_scale, f8 ? (outer ? n : 1) * sizeof(float) : 0, false)});
  const std::vector<float> fa = lt::to_f32(A, *a), fb = lt::to_f32(B, *b);
  std::vector<float> prod(static_cast<std::size_t>(m * n));
  if (k > 0)
    cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), 1.0f, fa.data(), static_cast<int>(a->rows), fb.data(),
                static_cast<int>(b->rows), 0.0f, prod.data(), static_cast<int>(m));
  const auto* cp = static_cast<const float*>(C);
  auto* dp = static_cast<float*>(D);
  for (std::uint64_t j = 0; j < n; ++j)
    for (std::uint64_t i = 0; i < m; ++i) {
      float s = al * prod[static_cast<std::size_t>(j * m + i)];
      if (f8) s *= op->a_scale[outer ? i : 0] * op->b_scale[outer ? j : 0];
      const float prior = be == 0.0f ? 0.0f : be * cp[j * static_cast<std::uint64_t>(c->ld) + i];
      dp[j * static_cast<std::uint64_t>(d->ld) + i] = s + prior;
    }
  return CUBLAS_STATUS_SUCCESS;
}
