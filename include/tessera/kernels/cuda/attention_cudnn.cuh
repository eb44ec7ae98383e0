// tessera/kernels/cuda/attention_cudnn.cuh: cuDNN's fused attention with the interface of
// attention.cuh's causal attention (f32 tensors in tessera's layouts), for cuda_bf16_kernels
// when TESSERA_ATTENTION=cudnn (attention_library.hpp):
//   q, out, dq, dout [B, T, NH, HD];  k, v, dk, dv [B, T, NKV, HD];  lse [B, NH, T]
// tessera-requires: cuda (compiled by nvcc: include from a .cu translation unit)
//
// q, k, v (and in the backward out and dout) are rounded to bf16 into this host thread's
// buffers -- as tessera's tensor-core attention rounds them --, cuDNN runs on them
// (cudnn_attention.hpp, through the functions a host unit of the program registered:
// attention_library.hpp's cudnn::linked), and its bf16 out, dq, dk, dv are widened back to
// f32; lse is cuDNN's f32 statistics, written in place. So beyond the tensor-core attention's
// roundings, out, dq, dk and dv are rounded to bf16 once (cuDNN's outputs are bf16); the
// backward's out is the forward's bf16 out again, exactly. Buffers: 4 of B x T x NH x HD and 4 of
// B x T x NKV x HD bf16 (the forward uses the first of each pair), grown to the largest call
// and kept, plus cuDNN's workspace (model/cuda_workspace.hpp counts both). In a program that
// does not link cuDNN's attention (no unit includes cudnn_attention.hpp) these throw, naming
// how to build it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cuda/attention_library.hpp>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera::cuda {

namespace detail::library {
/// This host thread's bf16 buffers of cuDNN's attention.
inline tensor<bf16, cuda_space> (&buffers())[8] {
  thread_local tensor<bf16, cuda_space> bufs[8];
  return bufs;
}
/// Buffer i, at least n elements.
inline bf16* buffer(int i, std::int64_t n) { return grown(buffers()[i], n, "cuDNN attention's bf16 buffers"); }
/// q, k, v rounded into buffers 0, 4, 5 (q's nq elements, k's and v's nkv).
struct rounded_qkv {
  bf16 *q, *k, *v;
};
inline rounded_qkv round_qkv(const float* q, const float* k, const float* v, std::int64_t nq, std::int64_t nkv,
                             cudaStream_t s) {
  const rounded_qkv r{buffer(0, nq), buffer(4, nkv), buffer(5, nkv)};
  to_bf16(r.q, q, nq, s);
  to_bf16(r.k, k, nkv, s);
  to_bf16(r.v, v, nkv, s);
  return r;
}
/// The functions of cuDNN's attention this program links, or throws how to build it.
inline const cudnn::linked_functions& linked() {
  if (!cudnn::linked()) (void)attention_library_named("cudnn");  // throws how to build it
  return *cudnn::linked();
}
}  // namespace detail::library

/// Why cuDNN's attention cannot run in this process ("" when it can): not linked (no unit
/// includes cudnn_attention.hpp), or cuDNN 9 not found.
inline std::string cudnn_attention_unavailable() {
  try {
    detail::library::linked().load_library();
  } catch (const error& e) {
    return e.what();
  }
  return {};
}

/// Frees this host thread's buffers of cuDNN's attention and cuDNN's workspace (its handle and
/// built graphs stay).
inline void release_cudnn_attention_buffers() {
  for (auto& b : detail::library::buffers()) b = {};
  if (const cudnn::linked_functions* f = cudnn::linked()) f->release_workspace();
}

/// Bytes of cuDNN's workspace for a causal attention of these sizes on this thread's GPU
/// (builds the forward's and the backward's graphs when first asked).
inline std::int64_t cudnn_attention_workspace(std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                                              std::int64_t HD) {
  return detail::library::linked().workspace_bytes({B, T, NH, NKV, HD});
}

/// attention_forward (attention.cuh) by cuDNN's fused attention: out [B, T, NH, HD] and
/// lse [B, NH, T].
inline void attention_forward_cudnn(float* out, float* lse, const float* q, const float* k, const float* v,
                                    std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD,
                                    cudaStream_t s = nullptr) {
  const cudnn::linked_functions& f = detail::library::linked();
  check(B > 0 && T > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_forward_cudnn: bad sizes (NH must be a multiple of NKV)");
  const std::int64_t nq = B * T * NH * HD, nkv = B * T * NKV * HD;
  const auto r = detail::library::round_qkv(q, k, v, nq, nkv, s);
  bf16* ob = detail::library::buffer(1, nq);
  f.forward(ob, lse, r.q, r.k, r.v, {B, T, NH, NKV, HD}, s);
  from_bf16(out, ob, nq, s);
}

/// attention_backward (attention.cuh) by cuDNN's fused attention: dq, dk, dv written, from the
/// forward's out and lse.
inline void attention_backward_cudnn(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                     const float* k, const float* v, const float* out, const float* lse,
                                     std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                                     std::int64_t HD, cudaStream_t s = nullptr) {
  const cudnn::linked_functions& f = detail::library::linked();
  check(B > 0 && T > 0 && NKV > 0 && NH % NKV == 0,
        "cuda::attention_backward_cudnn: bad sizes (NH must be a multiple of NKV)");
  const std::int64_t nq = B * T * NH * HD, nkv = B * T * NKV * HD;
  using detail::library::buffer;
  const auto r = detail::library::round_qkv(q, k, v, nq, nkv, s);
  bf16 *ob = buffer(1, nq), *gb = buffer(2, nq), *dqb = buffer(3, nq), *dkb = buffer(6, nkv), *dvb = buffer(7, nkv);
  to_bf16(ob, out, nq, s);
  to_bf16(gb, dout, nq, s);
  f.backward(dqb, dkb, dvb, gb, r.q, r.k, r.v, ob, lse, {B, T, NH, NKV, HD}, s);
  from_bf16(dq, dqb, nq, s);
  from_bf16(dk, dkb, nkv, s);
  from_bf16(dv, dvb, nkv, s);
}

}  // namespace tessera::cuda
