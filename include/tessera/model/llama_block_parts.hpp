// tessera/model/llama_block_parts.hpp: the named pieces of one Llama 3 block (llama_block.hpp):
// its parameter views, what its forward keeps for backward, its scratch, the RoPE tables, and the
// hooks of a single rank.
// tessera-requires: openblas
#pragma once


#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/float8_linear.hpp>
#include <tessera/model/llama_float8.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

/// A block's parameters by name (T = const float: the weights; T = float: their gradients).
/// Shapes on a shard with h query heads, k KV heads, f FFN columns (hd = head_dim, D = dim):
/// wq [h hd, D], wk and wv [k hd, D], wo [D, h hd], w1 and w3 [f, D], w2 [D, f], norms [D].
template <class T>
struct block_weights {
  T* attention_norm = nullptr;
  T* wq = nullptr;
  T* wk = nullptr;
  T* wv = nullptr;
  T* wo = nullptr;
  T* ffn_norm = nullptr;
  T* w1 = nullptr;
  T* w2 = nullptr;
  T* w3 = nullptr;
};
using block_params = block_weights<const float>;
using block_grads = block_weights<float>;

/// The views of `p[k]` in block_roles order (attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3).
template <class T>
constexpr block_weights<T> block_weights_from(T* const* p) {
  return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]};
}

/// What block_forward keeps for block_backward (sizes: block_saved_sizes, same order), in
/// memory of `Space`.
template <class Space = host_space>
struct basic_block_saved {
  using buffer = tensor<float, Space>;
  buffer an;       ///< attention_norm(x)          [Nr, D]
  buffer rstd1;    ///< its 1 / rms                 [Nr]
  buffer an_full;  ///< every token's an (seq split) [N, D]
  buffer q, k, v;  ///< after RoPE (q, k)          [N, h hd], [N, k hd]
  buffer att;      ///< attention output           [N, h hd]
  buffer lse;      ///< its log-sum-exp            [B, h, T]
  buffer mid;      ///< x + attention branch       [Nr, D]
  buffer fn;       ///< ffn_norm(mid)              [Nr, D]
  buffer rstd2;    ///< [Nr]
  buffer fn_full;  ///< [N, D] (seq split)
  buffer h1, h3, act;  ///< w1 n2, w3 n2, silu(h1) h3 [N, f]
  const float* an_seen = nullptr;  ///< the norm output as the column-parallel GEMMs saw it
  const float* fn_seen = nullptr;

  void allocate(const llama_dims& d) {
    const auto n = block_saved_sizes(d);
    buffer* f[] = {&an, &rstd1, &an_full, &q, &k, &v, &att, &lse, &mid, &fn, &rstd2, &fn_full, &h1, &h3, &act};
    for (std::size_t i = 0; i < n.size(); ++i) *f[i] = buffer({n[i]});
  }
};
using block_saved = basic_block_saved<>;

/// Scratch every block uses in turn (sizes: block_scratch_sizes, same order), and the RoPE
/// tables of the current sequence length.
template <class Space = host_space>
struct basic_block_scratch {
  using buffer = tensor<float, Space>;
  buffer proj;   ///< a row-parallel GEMM's output (partial under a split)  [N, D]
  buffer dres;   ///< gradient of the residual stream                       [Nr, D]
  buffer dtmp;   ///< a reduced gradient                                    [Nr, D]
  buffer dfull;  ///< every token's input gradient (partial under a split)  [N, D]
  buffer dgath;  ///< dres gathered to every token (seq split)             [N, D]
  buffer datt, dq, dk, dv, ffn;
  buffer cos, sin;  ///< RoPE tables [T, hd / 2] ([B, T, hd / 2] per row: llama_dims::rope_rows)
  buffer f8a, f8b;  ///< Float8 linears' quantized operands (empty without them)

  void allocate(const llama_dims& d) {
    const auto n = block_scratch_sizes(d);
    buffer* f[] = {&proj, &dres, &dtmp, &dfull, &dgath, &datt, &dq, &dk, &dv, &ffn, &cos, &sin, &f8a, &f8b};
    for (std::size_t i = 0; i < n.size(); ++i) *f[i] = buffer({n[i]});
  }
};
using block_scratch = basic_block_scratch<>;

/// The RoPE settings of a model config (the tables block_scratch holds).
inline cpu::rope_config rope_config_of(const llama_config& c) {
  return {.theta = c.rope_theta, .scaling = c.rope_scaling, .factor = c.rope_scale_factor,
          .low_freq_factor = c.rope_low_freq_factor, .high_freq_factor = c.rope_high_freq_factor,
          .original_context = c.rope_original_context};
}

/// Fills the RoPE tables of `k` for the tokens of `d` at `positions` (empty: 0..T-1; per
/// row, llama_dims::rope_rows: B x T of them, row after row). Made on the host (copied to
/// K's memory where that is not the host's).
template <class K = cpu_kernels>
void rope_tables(basic_block_scratch<typename K::space>& k, const llama_dims& d, const llama_config& c,
                 const std::vector<std::int64_t>& positions) {
  check(positions.empty() ? !d.rope_rows : static_cast<std::int64_t>(positions.size()) == d.rope_T(),
        "llama: set_positions() gave " + std::to_string(positions.size()) + " positions for " +
            std::to_string(d.rope_T()) + " tokens");
  const std::int64_t* pos = positions.empty() ? nullptr : positions.data();
  if constexpr (K::space::host_accessible) {
    cpu::rope_table(k.cos.data(), k.sin.data(), d.rope_T(), d.hd, rope_config_of(c), pos);
  } else {
    std::vector<float> cos(static_cast<std::size_t>(d.rope_T() * d.hd / 2)), sin(cos.size());
    cpu::rope_table(cos.data(), sin.data(), d.rope_T(), d.hd, rope_config_of(c), pos);
    K::to_device(k.cos.data(), cos.data(), static_cast<std::int64_t>(cos.size()));
    K::to_device(k.sin.data(), sin.data(), static_cast<std::int64_t>(sin.size()));
  }
}

/// Attention on this rank's heads of whole sequences: backend K's kernels.
template <class K = cpu_kernels>
struct basic_local_attention {
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, const llama_dims& d) {
    K::attention_forward(out, lse, q, k, v, d.B, d.T, d.heads, d.kv_heads, d.hd);
  }
  void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                          const float* v, const float* out, const float* lse, const llama_dims& d) {
    K::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, d.B, d.T, d.heads, d.kv_heads, d.hd);
  }
};
using local_attention = basic_local_attention<>;

/// The hooks of a single rank: every layout change is the identity.
template <class K = cpu_kernels>
struct basic_serial_hooks : basic_local_attention<K> {
  void forward_begin(std::int64_t) {}
  void forward_end(std::int64_t) {}
  void backward_begin(std::int64_t) {}
  void backward_end(std::int64_t) {}
  const float* gather(const float* in, float*) { return in; }
  const float* reduce(const float* in, float*) { return in; }
  /// Async TP's regions (llama_block_regions.hpp): whether the ring runs them in parts of the
  /// sequence; gather_each / reduce_each are gather / reduce with the region's GEMMs
  /// (fn(rows, row0, n)) over every token; each_part runs fn on the rows as they would.
  bool overlaps(bool) const { return false; }
  template <class F>
  const float* gather_each(const float* in, float*, std::int64_t, std::int64_t B, std::int64_t T, bool, F&& fn) {
    fn(in, std::int64_t{0}, B * T);
    return in;
  }
  template <class F, class Add>
  const float* reduce_each(float* partial, float*, std::int64_t, std::int64_t B, std::int64_t T, bool, F&& fn, Add&&) {
    fn(partial, std::int64_t{0}, B * T);
    return partial;
  }
  template <class F>
  void each_part(const float* in, std::int64_t, std::int64_t B, std::int64_t T, bool, F&& fn) {
    fn(in, std::int64_t{0}, B * T);
  }
  /// Loss on part of the vocabulary: [B*T] row maxima reduced (max), [B*T, 2] sums (sum), in place.
  void reduce_row_max(float*) {}
  void reduce_row_stats(float*) {}
  /// Logits [B*T, Vl] -> [B*T, V], and the gradient back.
  void gather_logits(const float*, float*) {}
  void slice_logits(const float*, float*) {}
  /// Float8 scales: the amaxes [n] of groups other ranks hold parts of, max-reduced in place.
  void reduce_amax(float*, std::int64_t) {}
  /// n floats of K's memory for the whole tensors' amaxes of a region run in parts (async TP
  /// only: never asked of hooks that do not overlap).
  float* amax_staging(std::int64_t) { return nullptr; }
};
using serial_hooks = basic_serial_hooks<>;

}  // namespace tessera
