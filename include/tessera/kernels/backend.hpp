// tessera/kernels/backend.hpp: kernel backends -- the memory space and the kernels a model's
// parts run on, as one type.
// tessera-requires: openblas
//
// The Llama's parts (model/llama_block.hpp, llama_ends.hpp) are templates on a backend K and
// call K::rmsnorm_forward, K::matmul_forward, ... on pointers into K::space; `cpu_kernels`
// (here, the default everywhere) forwards to the CPU kernels, `cuda_kernels`
// (kernels/cuda/backend.cuh, nvcc) to the CUDA ones on device memory. The signatures are the
// CPU kernels' (docs/kernels.md: gradients accumulate where the CPU kernel accumulates).
// Two flags say which optional paths a backend has; a part that needs one it lacks refuses
// at run time with a message naming the backend (the model checks them first):
//   float8          the Float8 linears, K::f8_matmuls_forward / _backward (a group of
//                   linears on one input) with cpu::f8_matmuls_forward's interface,
//   vocab_parallel  cross-entropy's vocab-parallel finish (loss parallel: K::ce_shard_*
//                   with cpu::ce_shard_*'s interface).
// `cpu_bf16_kernels` and `cuda_bf16_kernels` are the same backends with bf16 GEMM operands:
// every linear's inputs rounded to bf16 (nearest even), products and sums in f32 -- what a
// bf16 tensor-core GEMM computes --, and attention's q, k, v (and in the backward dout) too,
// causal or context parallel's blocks; the rest (norms, softmax, AdamW on f32 master
// weights) stays f32. The CPU one is the GPU one's reference (tests/gpu/test_cuda_llama.cu,
// test_cuda_attention.cu); the GPU's tensor-core attention also rounds its probabilities
// (kernels/cuda/attention_tc.cuh), which the CPU's keeps in f32.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/float8_linear.hpp>
#include <tessera/kernels/cpu/grad_norm.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/kernels/cpu/ring_attention.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>
#include <tessera/kernels/cpu/vocab_parallel.hpp>
#include <tessera/kernels/linears.hpp>
#include <tessera/kernels/pending_gradients.hpp>
#include <tessera/kernels/rounded_weights.hpp>
#include <tessera/tensor/dtype.hpp>
#include <tessera/tensor/memory.hpp>

namespace tessera {

/// What every kernel backend has besides its kernels: a memory space, a name, the flags, and
/// copies between the host and its space.
template <class K>
concept kernel_backend = memory_space<typename K::space> && requires(float* p, const float* c, std::int64_t n) {
  { K::name } -> std::convertible_to<std::string_view>;
  { K::float8 } -> std::convertible_to<bool>;
  { K::vocab_parallel } -> std::convertible_to<bool>;
  K::zero(p, n);
  K::copy(p, c, n);
  K::to_device(p, c, n);
  K::to_host(p, c, n);
  K::synchronize();
};

/// Linears that share their input (kernels/linears.hpp), as backend K's own GEMMs one after
/// the other (K derives from composed_linears<K>): K::matmuls_forward / matmuls_backward for a
/// backend whose GEMMs read the input as it is. dinp accumulates in the group's order; with write_dinp the first
/// linear writes it (a group without linears then zeroes it), so what it held is not read.
template <class K>
struct composed_linears {
  static void matmuls_forward(const float* inp, std::int64_t N, std::int64_t C, std::span<const linear_out> ls) {
    for (const linear_out& l : ls) K::matmul_forward(l.out, inp, l.w, N, C, l.OC);
  }
  static void matmuls_backward(float* dinp, const float* inp, std::int64_t N, std::int64_t C,
                               std::span<const linear_grad> ls, bool write_dinp = false) {
    for (const linear_grad& l : ls) {
      if (!dinp && !l.dw) continue;
      K::matmul_backward(dinp, l.dw, l.dout, inp, l.w, N, C, l.OC, write_dinp);
      write_dinp = false;
    }
    if (write_dinp && dinp) K::zero(dinp, N * C);
  }
};

/// The linears of a backend with bf16 GEMM operands (cpu_bf16_kernels, cuda_bf16_kernels):
/// each operand rounded by K::operand(x, n, slot) into K's scratch slot -- an input the group's
/// linears share once for all of them (the 635 roundings of a step of 18 of Llama 3 8B's
/// blocks were 6% of it on an H200; docs/cuda.md) -- and multiplied by K::operand_forward /
/// operand_backward (the GEMMs on rounded operands, f32 accumulation). Slots: forward 0 the
/// input, 1 the weight; backward 0 the output gradient, 1 the input, 2 the weight. A weight
/// inside the arena of the thread's active rounded_weights<K> store (kernels/rounded_weights.hpp)
/// is rounded into the store in the forward and multiplied from there in the backward.
template <class K>
struct bf16_operand_linears {
  static void matmul_forward(float* out, const float* inp, const float* w, std::int64_t N, std::int64_t C,
                             std::int64_t OC) {
    const linear_out l{out, w, OC};
    matmuls_forward(inp, N, C, {&l, 1});
  }
  /// With write_dinp, dinp = dout . w: what dinp held is not read.
  static void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                              std::int64_t N, std::int64_t C, std::int64_t OC, bool write_dinp = false) {
    const linear_grad l{dw, dout, w, OC};
    backward(dinp, inp, N, C, {&l, 1}, write_dinp);
  }
  static void matmuls_forward(const float* inp, std::int64_t N, std::int64_t C, std::span<const linear_out> ls) {
    if (ls.empty()) return;
    const auto* x = K::operand(inp, N * C, 0);
    for (const linear_out& l : ls) K::operand_forward(l.out, x, weight(l.w, l.OC * C, 1, true), N, C, l.OC);
  }
  /// With write_dinp, as composed_linears'.
  static void matmuls_backward(float* dinp, const float* inp, std::int64_t N, std::int64_t C,
                               std::span<const linear_grad> ls, bool write_dinp = false) {
    backward(dinp, inp, N, C, ls, write_dinp);
  }

 private:
  /// The group's backward; write_dinp: the first linear writes dinp, the rest add to it.
  static void backward(float* dinp, const float* inp, std::int64_t N, std::int64_t C, std::span<const linear_grad> ls,
                       bool write_dinp) {
    const bool dw = std::any_of(ls.begin(), ls.end(), [](const linear_grad& l) { return l.dw != nullptr; });
    const auto* x = dw ? K::operand(inp, N * C, 1) : nullptr;
    for (const linear_grad& l : ls)
      if (dinp || l.dw) {
        K::operand_backward(dinp, l.dw, K::operand(l.dout, N * l.OC, 0), l.dw ? x : nullptr,
                            dinp ? weight(l.w, l.OC * C, 2, false) : nullptr, N, C, l.OC, write_dinp);
        write_dinp = false;
      }
    if (write_dinp && dinp) K::zero(dinp, N * C);
  }
  /// Weight w [n]'s operand: from the active store (a forward rounds it there, a backward
  /// finds the forward's copy), else rounded into scratch slot `slot`.
  static auto weight(const float* w, std::int64_t n, int slot, bool forward) {
    const typename K::operand_type* r = nullptr;
    if (rounded_weights<K>* store = rounded_weights<K>::active()) r = forward ? store->refresh(w, n) : store->find(w, n);
    return r != nullptr ? r : K::operand(w, n, slot);
  }
};

/// The feed-forward branch from backend K's own GEMMs and SwiGLU, in cpu::feed_forward_forward
/// / _backward's order: the feed_forward_* of a backend with no fused one (K derives from
/// composed_feed_forward<K>). w1 and w3 run as one group on their shared input.
template <class K>
struct composed_feed_forward {
  /// h1 = inp w1^T, h3 = inp w3^T, act = silu(h1) h3, out = act w2^T.
  static void feed_forward_forward(float* out, float* h1, float* h3, float* act, const float* inp, const float* w1,
                                   const float* w3, const float* w2, std::int64_t N, std::int64_t C, std::int64_t H) {
    const linear_out in13[] = {{h1, w1, H}, {h3, w3, H}};
    K::matmuls_forward(inp, N, C, in13);
    K::swiglu_forward(act, h1, h3, N * H);
    K::matmul_forward(out, act, w2, N, H, C);
  }
  /// dinp (written with write_dinp) and the weight gradients accumulate; `scratch` 2 N H floats.
  static void feed_forward_backward(float* dinp, float* dw1, float* dw3, float* dw2, const float* dout,
                                    const float* inp, const float* h1, const float* h3, const float* act,
                                    const float* w1, const float* w3, const float* w2, std::int64_t N, std::int64_t C,
                                    std::int64_t H, float* scratch, bool write_dinp = false) {
    float* dh1 = scratch;  // dact first (written: no zeroing), dh1 over it
    float* dh3 = scratch + N * H;
    K::matmul_backward(dh1, dw2, dout, act, w2, N, H, C, true);
    K::swiglu_backward(dh1, dh3, dh1, h1, h3, N * H);
    const linear_grad in13[] = {{dw1, dh1, w1, H}, {dw3, dh3, w3, H}};
    K::matmuls_backward(dinp, inp, N, C, in13, write_dinp);
  }
};

/// A backend's memory operations in element counts, from its memory space (a data_space):
/// zeroing, copies within the space, host <-> space transfers, and synchronize() -- the
/// space's fence (every kernel and copy issued so far complete).
template <data_space Space>
struct space_transfers {
  using space = Space;
  static void zero(float* p, std::int64_t n) { Space::zero(p, static_cast<std::size_t>(n) * sizeof(float)); }
  template <class T>
  static void copy(T* dst, const T* src, std::int64_t n) { Space::copy(dst, src, static_cast<std::size_t>(n) * sizeof(T)); }
  template <class T>
  static void to_device(T* dst, const T* src, std::int64_t n) {
    Space::from_host(dst, src, static_cast<std::size_t>(n) * sizeof(T));
  }
  template <class T>
  static void to_host(T* dst, const T* src, std::int64_t n) {
    Space::to_host(dst, src, static_cast<std::size_t>(n) * sizeof(T));
  }
  static void synchronize() { Space::fence(); }
};

/// The CPU kernels on host memory.
struct cpu_kernels : space_transfers<host_space>, composed_linears<cpu_kernels> {
  static constexpr std::string_view name = "cpu";
  static constexpr bool float8 = true;
  static constexpr bool vocab_parallel = true;

  /// y = a + b elementwise (b may alias y).
  static void add(float* y, const float* a, const float* b, std::int64_t n) {
    cpu::parallel_for(n, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t i = lo; i < hi; ++i) y[i] = a[i] + b[i];
    }, 4096);
  }

  static void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, std::int64_t N, std::int64_t C,
                              float eps) {
    cpu::rmsnorm_forward(out, rstd, inp, w, N, C, eps);
  }
  static void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                               const float* rstd, std::int64_t N, std::int64_t C) {
    cpu::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C);
  }
  static void matmul_forward(float* out, const float* inp, const float* w, std::int64_t N, std::int64_t C,
                             std::int64_t OC) {
    cpu::matmul_forward(out, inp, w, nullptr, N, C, OC);
  }
  static void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                              std::int64_t N, std::int64_t C, std::int64_t OC, bool write_dinp = false) {
    const bool write_dw = writes_gradient<cpu_kernels>(dw, OC * C);  // a pending gradient (pending_gradients.hpp)
    cpu::matmul_backward(dinp, dw, nullptr, dout, inp, w, N, C, OC, write_dinp, write_dw);
  }
  static void rope_forward(float* out, const float* inp, const float* cos, const float* sin, std::int64_t B,
                           std::int64_t T, std::int64_t NH, std::int64_t HD) {
    cpu::rope_forward(out, inp, cos, sin, B, T, NH, HD);
  }
  static void rope_backward(float* dinp, const float* dout, const float* cos, const float* sin, std::int64_t B,
                            std::int64_t T, std::int64_t NH, std::int64_t HD) {
    cpu::rope_backward(dinp, dout, cos, sin, B, T, NH, HD);
  }
  static void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, std::int64_t B,
                                std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cpu::attention_forward(out, lse, q, k, v, B, T, NH, NKV, HD);
  }
  static void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* lse, std::int64_t B, std::int64_t T,
                                 std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cpu::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HD);
  }
  /// Context parallel's attention (cpu/ring_attention.hpp): one block of keys under the spans'
  /// mask (their positions and documents in this backend's memory), the merge, D, and the
  /// block backward (accumulating).
  static void attention_block_forward(float* out_b, float* lse_b, const float* q, const float* k, const float* v,
                                      const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                      std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cpu::attention_block_forward(out_b, lse_b, q, k, v, qs, ks, B, NH, NKV, HD);
  }
  static void attention_merge(float* out, float* lse, const float* out_b, const float* lse_b, std::int64_t B,
                              std::int64_t Tq, std::int64_t NH, std::int64_t HD) {
    cpu::attention_merge(out, lse, out_b, lse_b, B, Tq, NH, HD);
  }
  static void attention_delta(float* D, const float* dout, const float* out, std::int64_t B, std::int64_t Tq,
                              std::int64_t NH, std::int64_t HD) {
    cpu::attention_delta(D, dout, out, B, Tq, NH, HD);
  }
  static void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                       const float* k, const float* v, const float* lse, const float* D,
                                       const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                       std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cpu::attention_block_backward(dq, dk, dv, dout, q, k, v, lse, D, qs, ks, B, NH, NKV, HD);
  }
  static void swiglu_forward(float* out, const float* h1, const float* h3, std::int64_t n) {
    cpu::swiglu_forward(out, h1, h3, n);
  }
  static void swiglu_backward(float* dh1, float* dh3, const float* dout, const float* h1, const float* h3,
                              std::int64_t n) {
    cpu::swiglu_backward(dh1, dh3, dout, h1, h3, n);
  }
  static void feed_forward_forward(float* out, float* h1, float* h3, float* act, const float* inp, const float* w1,
                                   const float* w3, const float* w2, std::int64_t N, std::int64_t C, std::int64_t H) {
    cpu::feed_forward_forward(out, h1, h3, act, inp, w1, w3, w2, N, C, H);
  }
  static void feed_forward_backward(float* dinp, float* dw1, float* dw3, float* dw2, const float* dout,
                                    const float* inp, const float* h1, const float* h3, const float* act,
                                    const float* w1, const float* w3, const float* w2, std::int64_t N, std::int64_t C,
                                    std::int64_t H, float* scratch, bool write_dinp = false) {
    for (float* dw : {dw1, dw3, dw2}) settle_gradient<cpu_kernels>(dw, H * C);  // the fused kernels add
    cpu::feed_forward_backward(dinp, dw1, dw3, dw2, dout, inp, h1, h3, act, w1, w3, w2, N, C, H, scratch, write_dinp);
  }
  static void embedding_forward(float* out, const std::int32_t* ids, const float* table, std::int64_t N,
                                std::int64_t V, std::int64_t v0, std::int64_t Vl, std::int64_t C) {
    cpu::embedding_shard_forward(out, ids, table, N, V, v0, Vl, C);
  }
  static void embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, std::int64_t N,
                                 std::int64_t V, std::int64_t v0, std::int64_t Vl, std::int64_t C) {
    cpu::embedding_shard_backward(dtable, dout, ids, N, V, v0, Vl, C);
  }
  /// The targets that count (>= 0); refuses an id >= V.
  static std::int64_t count_targets(const std::int32_t* targets, std::int64_t N, std::int64_t V) {
    return cpu::count_targets(targets, N, V);
  }
  /// The mean loss over the `count` counted targets (count_targets'; the CPU kernels count
  /// them again as they go); with the gradient (grad_scale times it, in place).
  static float cross_entropy_forward(const float* logits, const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                     std::int64_t /*count*/) {
    return cpu::cross_entropy_forward(nullptr, logits, targets, N, V);
  }
  static float cross_entropy_forward_backward(float* dlogits, const float* logits, const std::int32_t* targets,
                                              std::int64_t N, std::int64_t V, std::int64_t /*count*/,
                                              float grad_scale) {
    return cpu::cross_entropy_forward_backward(dlogits, nullptr, logits, targets, N, V, grad_scale);
  }
  template <class Reduce>
  static void f8_matmuls_forward(const float* inp, std::int64_t N, std::int64_t C, std::span<const linear_out> ls,
                                 const cpu::f8_linear_casts& c, float* a, float* b, cpu::f8_split split,
                                 Reduce&& reduce) {
    cpu::f8_matmuls_forward(inp, N, C, ls, c, a, b, split, reduce);
  }
  /// The weight gradients pending in the active store (pending_gradients.hpp) are written.
  template <class Reduce>
  static void f8_matmuls_backward(float* dinp, const float* inp, std::int64_t N, std::int64_t C,
                                  std::span<const linear_grad> ls, const cpu::f8_linear_casts& c, float* a, float* b,
                                  cpu::f8_split split, Reduce&& reduce, bool write_dinp = false) {
    cpu::f8_matmuls_backward(dinp, inp, N, C, ls, c, a, b, split, reduce, write_dinp, writes_gradient<cpu_kernels>);
  }
  /// Float8's FP8 all-gather of a weight block (parallel/fsdp.hpp): *amax = max |x[i]| over
  /// n values, then the codes of x under one scale and back; amax and scale in this
  /// backend's memory (cpu/float8.hpp's tensorwise casts).
  static void abs_max(float* amax, const float* x, std::int64_t n) { *amax = cpu::abs_max(x, n); }
  /// The amaxes of x [rows, cols] under granularity g (cpu::f8_amax), in this backend's memory.
  static void f8_amax(float* amax, const float* x, std::int64_t rows, std::int64_t cols, cpu::f8_granularity g) {
    cpu::f8_amax(amax, x, rows, cols, g);
  }
  static void f8_quantize(std::uint8_t* codes, const float* x, const float* scale, std::int64_t n, cpu::f8_cast c) {
    cpu::f8_quantize(codes, x, scale, 1, n, c);
  }
  static void f8_dequantize(float* out, const std::uint8_t* codes, const float* scale, std::int64_t n,
                            cpu::f8_cast c) {
    cpu::f8_dequantize(out, codes, scale, 1, n, c);
  }
  static void adamw_update(float* p, const float* g, float* m, float* v, std::int64_t n, std::int64_t step,
                           const cpu::adamw_config& cfg) {
    cpu::adamw_update(p, g, m, v, static_cast<std::size_t>(n), step, cfg);
  }
  static double sum_of_squares(const float* g, std::int64_t n) {
    return cpu::sum_of_squares(g, static_cast<std::size_t>(n));
  }
  /// Loss parallel's three phases (cpu/vocab_parallel.hpp); `count` is count_targets' (the
  /// CPU kernel counts the host's targets itself).
  static void ce_shard_row_max(float* rowmax, const float* logits, std::int64_t N, std::int64_t Vl) {
    cpu::ce_shard_row_max(rowmax, logits, N, Vl);
  }
  static void ce_shard_row_stats(float* stats, const float* logits, const float* rowmax, const std::int32_t* targets,
                                 std::int64_t N, std::int64_t v0, std::int64_t Vl) {
    cpu::ce_shard_row_stats(stats, logits, rowmax, targets, N, v0, Vl);
  }
  static float ce_shard_finish(float* dlogits, const float* logits, const float* rowmax, const float* stats,
                               const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t v0,
                               std::int64_t Vl, std::int64_t /*count*/, float scale) {
    return cpu::ce_shard_finish(dlogits, logits, rowmax, stats, targets, N, V, v0, Vl, scale);
  }
  /// y = x rounded to bf16 (nearest even) / widened back to f32: FSDP's bf16 gathers.
  static void to_bf16(bf16* y, const float* x, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = bf16(x[i]);
  }
  static void from_bf16(float* y, const bf16* x, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i]);
  }
  static void scale_inplace(float* g, std::int64_t n, float s) { cpu::scale_inplace(g, static_cast<std::size_t>(n), s); }
};
static_assert(kernel_backend<cpu_kernels>);

/// The CPU kernels with bf16 GEMM operands (see the top of this file).
struct cpu_bf16_kernels : cpu_kernels,
                          composed_feed_forward<cpu_bf16_kernels>,
                          bf16_operand_linears<cpu_bf16_kernels> {
  static constexpr std::string_view name = "cpu-bf16";  // its Float8 linears are cpu_kernels'
  using composed_feed_forward<cpu_bf16_kernels>::feed_forward_forward;
  using composed_feed_forward<cpu_bf16_kernels>::feed_forward_backward;
  using bf16_operand_linears<cpu_bf16_kernels>::matmul_forward;
  using bf16_operand_linears<cpu_bf16_kernels>::matmul_backward;
  using bf16_operand_linears<cpu_bf16_kernels>::matmuls_forward;
  using bf16_operand_linears<cpu_bf16_kernels>::matmuls_backward;

  static void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, std::int64_t B,
                                std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cpu_kernels::attention_forward(out, lse, rounded(q, B * T * NH * HD, 0), rounded(k, B * T * NKV * HD, 1),
                                   rounded(v, B * T * NKV * HD, 2), B, T, NH, NKV, HD);
  }
  static void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* lse, std::int64_t B, std::int64_t T,
                                 std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cpu_kernels::attention_backward(dq, dk, dv, rounded(dout, B * T * NH * HD, 3), rounded(q, B * T * NH * HD, 0),
                                    rounded(k, B * T * NKV * HD, 1), rounded(v, B * T * NKV * HD, 2), out, lse, B, T,
                                    NH, NKV, HD);
  }
  static void attention_block_forward(float* out_b, float* lse_b, const float* q, const float* k, const float* v,
                                      const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                      std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cpu_kernels::attention_block_forward(out_b, lse_b, rounded(q, B * qs.n * NH * HD, 0),
                                         rounded(k, B * ks.n * NKV * HD, 1), rounded(v, B * ks.n * NKV * HD, 2), qs, ks,
                                         B, NH, NKV, HD);
  }
  static void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                       const float* k, const float* v, const float* lse, const float* D,
                                       const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                       std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cpu_kernels::attention_block_backward(dq, dk, dv, rounded(dout, B * qs.n * NH * HD, 3),
                                          rounded(q, B * qs.n * NH * HD, 0), rounded(k, B * ks.n * NKV * HD, 1),
                                          rounded(v, B * ks.n * NKV * HD, 2), lse, D, qs, ks, B, NH, NKV, HD);
  }

  /// The GEMMs on rounded operands (bf16_operand_linears): f32 ones, as the values are bf16's.
  static void operand_forward(float* out, const float* inp, const float* w, std::int64_t N, std::int64_t C,
                              std::int64_t OC) {
    cpu_kernels::matmul_forward(out, inp, w, N, C, OC);
  }
  static void operand_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                               std::int64_t N, std::int64_t C, std::int64_t OC, bool write_dinp) {
    cpu_kernels::matmul_backward(dinp, dw, dout, inp, w, N, C, OC, write_dinp);
  }
  /// The operands' type: bf16 values widened back to f32.
  using operand_type = float;
  static const float* operand(const float* x, std::int64_t n, int i) { return rounded(x, n, i); }
  /// x rounded to bf16 and widened back, in this thread's scratch slot i (a GEMM's operands).
  static const float* rounded(const float* x, std::int64_t n, int i) {
    thread_local std::vector<float> slots[4];
    std::vector<float>& v = slots[i];
    v.resize(static_cast<std::size_t>(n));
    round_into(v.data(), x, n);
    return v.data();
  }
  /// AdamW, then the new parameters rounded into r (cuda_bf16_kernels does both in one pass).
  static void adamw_update_rounded(float* p, const float* g, float* m, float* v, std::int64_t n, std::int64_t step,
                                   const cpu::adamw_config& cfg, float* r) {
    cpu_kernels::adamw_update(p, g, m, v, n, step, cfg);
    round_into(r, p, n);
  }
  /// y [n] = x rounded to bf16 and widened back.
  static void round_into(float* y, const float* x, std::int64_t n) {
    cpu::parallel_for(n, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t k = lo; k < hi; ++k) y[k] = static_cast<float>(bf16(x[k]));
    }, 4096);
  }
};
static_assert(kernel_backend<cpu_bf16_kernels>);

/// Clipping to max_norm given the global norm (computed, possibly across ranks, by the
/// caller), on backend K, by cpu::clip_by_norm's rule. Returns the coefficient applied (1
/// when no clipping happened).
template <kernel_backend K>
float clip_by_norm(float* g, std::int64_t n, float norm, float max_norm) {
  const float coef = max_norm / (norm + 1e-6f);
  if (coef >= 1.0f) return 1.0f;
  K::scale_inplace(g, n, coef);
  return coef;
}

}  // namespace tessera
