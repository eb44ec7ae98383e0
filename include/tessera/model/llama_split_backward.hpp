// tessera/model/llama_split_backward.hpp: the backward of a block, of the head and of the
// embedding split in two halves, as zero-bubble pipeline schedules run them (Qi et al.,
// "Zero Bubble Pipeline Parallelism", 2023; PyTorch's I and W actions):
//   *_backward_input   the gradient of the part's input (I), which the previous stage waits
//                      for; it keeps in a `*_deferred` struct the gradient that reached each
//                      weight;
//   *_backward_weight  the weight gradients (W) from what I kept and what forward saved,
//                      with no communication and no recomputation.
// The two halves run the same kernels on the same operands as block_backward / head_backward
// / embed_backward, so I then W gives bit for bit what the whole backward gives (one
// microbatch; across microbatches the accumulation follows the schedule's order of W).
// Norm weights are weights: their gradients are in W as well. Like the whole backward they
// are templates on a kernel backend K: what I keeps lives in K's memory.
// tessera-requires: openblas
#pragma once

#include <cstdint>

#include <tessera/model/llama_block.hpp>
#include <tessera/model/llama_ends.hpp>

namespace tessera {

/// What a block's I keeps for its W (sizes on the shard: N tokens, Nr residual rows), in
/// memory of `Space`.
template <class Space = host_space>
struct basic_block_deferred {
  using buffer = tensor<float, Space>;
  buffer d_ffn;   ///< the gradient into w2's output, gathered        [N, D]
  buffer dh13;    ///< into w1's and w3's outputs (dh1, then dh3)    [2 N F]
  buffer dn2;     ///< into ffn_norm's output, reduced                [Nr, D]
  buffer d_att;   ///< into wo's output, gathered                     [N, D]
  buffer dq, dk, dv;  ///< into wq's, wk's, wv's outputs (after RoPE's backward)
  buffer dn1;     ///< into attention_norm's output, reduced          [Nr, D]
  /// Under activation checkpointing: the groups the block's I recomputed, kept for its W
  /// (llama_model moves them here from the shared recompute buffer).
  basic_block_saved<Space> recomputed;
  std::int64_t recomputed_floats = 0;

  void allocate(const llama_dims& d) {
    const auto n = block_deferred_sizes(d);
    buffer* f[] = {&d_ffn, &dh13, &dn2, &d_att, &dq, &dk, &dv, &dn1};
    for (std::size_t i = 0; i < n.size(); ++i) *f[i] = buffer({n[i]});
  }
  void release() { *this = basic_block_deferred{}; }
  /// Bytes held (0 once released).
  std::int64_t bytes() const {
    return 4 * (static_cast<std::int64_t>(d_ffn.numel() + dh13.numel() + dn2.numel() + d_att.numel() + dq.numel() +
                                          dk.numel() + dv.numel() + dn1.numel()) +
                recomputed_floats);
  }
};

using block_deferred = basic_block_deferred<>;

namespace detail {
/// dst (allocated) = src, both in K's memory.
template <class K>
void keep(tensor<float, typename K::space>& dst, const float* src) {
  K::copy(dst.data(), src, dst.numel());
}
/// dst = a new buffer of n floats holding src, in K's memory.
template <class K>
void keep(tensor<float, typename K::space>& dst, const float* src, std::int64_t n) {
  dst = tensor<float, typename K::space>({n});
  keep<K>(dst, src);
}
}  // namespace detail

/// The I half of block_backward: dres [Nr, D] in, the gradient of the block's output; out,
/// of its input. Weight gradients are not touched; `def` keeps what block_backward_weight needs.
template <class K = cpu_kernels, class Hooks>
void block_backward_input(float* dres, const float* x, const block_params& w,
                          const basic_block_saved<typename K::space>& s, basic_block_scratch<typename K::space>& k,
                          basic_block_deferred<typename K::space>& def, const llama_dims& d, Hooks& h) {
  const std::int64_t Nr = d.Nr(), D = d.D;
  def.allocate(d);
  // feed-forward branch
  const detail::region_grads f = detail::ffn_backward<K>(dres, nullptr, nullptr, nullptr, s, k, w, d, h);
  detail::keep<K>(def.d_ffn, f.dout);
  detail::keep<K>(def.dh13, k.ffn.data());  // dh1 then dh3, as ffn_backward leaves them
  detail::keep<K>(def.dn2, f.dn);
  K::rmsnorm_backward(dres, nullptr, f.dn, s.mid.data(), w.ffn_norm, s.rstd2.data(), Nr, D);
  // attention branch
  detail::keep<K>(def.d_att, detail::wo_backward<K>(dres, nullptr, s, k, w, d, h));
  h.attention_backward(k.dq.data(), k.dk.data(), k.dv.data(), k.datt.data(), s.q.data(), s.k.data(), s.v.data(),
                       s.att.data(), s.lse.data(), d);
  K::rope_backward(k.dq.data(), k.dq.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.heads, d.hd);
  K::rope_backward(k.dk.data(), k.dk.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.kv_heads, d.hd);
  detail::keep<K>(def.dq, k.dq.data());
  detail::keep<K>(def.dk, k.dk.data());
  detail::keep<K>(def.dv, k.dv.data());
  const float* dn1 = detail::qkv_backward<K>(nullptr, nullptr, nullptr, s, k, w, d, h);
  detail::keep<K>(def.dn1, dn1);
  K::rmsnorm_backward(dres, nullptr, dn1, x, w.attention_norm, s.rstd1.data(), Nr, D);
}

/// The W half: accumulates the block's weight gradients into g from what I kept, in
/// block_backward's order; then frees `def`. It communicates nothing, except the amax
/// all-reduces of Float8 tensorwise casts of TP-split operands (through `h`).
template <class K = cpu_kernels, class Hooks>
void block_backward_weight(const block_grads& g, const float* x, const basic_block_saved<typename K::space>& s,
                           basic_block_deferred<typename K::space>& def, basic_block_scratch<typename K::space>& k,
                           const llama_dims& d, Hooks& h) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D, Hq = d.Hq(), Hk = d.Hk(), F = d.F;
  using r = param_role;
  detail::linear_backward<K>(nullptr, g.w2, def.d_ffn.data(), s.act.data(), nullptr, N, F, D, r::ffn_w2, d, k, h);
  detail::linear_backward<K>(nullptr, g.w1, def.dh13.data(), s.fn_seen, nullptr, N, D, F, r::ffn_w1, d, k, h);
  detail::linear_backward<K>(nullptr, g.w3, def.dh13.data() + N * F, s.fn_seen, nullptr, N, D, F, r::ffn_w3, d, k, h);
  K::rmsnorm_backward(nullptr, g.ffn_norm, def.dn2.data(), s.mid.data(), nullptr, s.rstd2.data(), Nr, D);
  detail::linear_backward<K>(nullptr, g.wo, def.d_att.data(), s.att.data(), nullptr, N, Hq, D, r::attention_o, d, k, h);
  detail::linear_backward<K>(nullptr, g.wq, def.dq.data(), s.an_seen, nullptr, N, D, Hq, r::attention_q, d, k, h);
  detail::linear_backward<K>(nullptr, g.wk, def.dk.data(), s.an_seen, nullptr, N, D, Hk, r::attention_k, d, k, h);
  detail::linear_backward<K>(nullptr, g.wv, def.dv.data(), s.an_seen, nullptr, N, D, Hk, r::attention_v, d, k, h);
  K::rmsnorm_backward(nullptr, g.attention_norm, def.dn1.data(), x, nullptr, s.rstd1.data(), Nr, D);
  def.release();
}

/// The I half of head_backward: writes the gradient of x into dres [Nr, D] and keeps the
/// final norm's reduced output gradient in `dxf_keep` [Nr, D] (the logits' gradient stays
/// in s.logits for W).
template <class K = cpu_kernels, class Hooks>
void head_backward_input(float* dres, tensor<float, typename K::space>& dxf_keep, const float* x, const float* norm,
                         const float* output, const basic_head_saved<typename K::space>& s, float* dfull, float* dtmp,
                         const llama_dims& d, Hooks& h) {
  K::matmul_backward(dfull, nullptr, s.logits.data(), s.xf_seen, output, d.N(), d.D, d.Vl, true);
  const float* dxf = h.reduce(dfull, dtmp);
  detail::keep<K>(dxf_keep, dxf, d.Nr() * d.D);
  K::zero(dres, d.Nr() * d.D);
  K::rmsnorm_backward(dres, nullptr, dxf, x, norm, s.rstdf.data(), d.Nr(), d.D);
}
/// The W half of head_backward (then frees `dxf_keep`).
template <class K = cpu_kernels>
void head_backward_weight(float* dnorm, float* doutput, tensor<float, typename K::space>& dxf_keep, const float* x,
                          const basic_head_saved<typename K::space>& s, const llama_dims& d) {
  K::matmul_backward(nullptr, doutput, s.logits.data(), s.xf_seen, nullptr, d.N(), d.D, d.Vl);
  K::rmsnorm_backward(nullptr, dnorm, dxf_keep.data(), x, nullptr, s.rstdf.data(), d.Nr(), d.D);
  dxf_keep = tensor<float, typename K::space>{};
}

/// The embedding's backward has no input gradient: I only gathers dres to every token
/// (the communication) into `dres_keep` [N, D]; W accumulates the table's gradient.
template <class K = cpu_kernels, class Hooks>
void embed_backward_input(tensor<float, typename K::space>& dres_keep, const float* dres, float* dgath,
                          const llama_dims& d, Hooks& h) {
  detail::keep<K>(dres_keep, h.gather(dres, dgath), d.N() * d.D);
}
template <class K = cpu_kernels>
void embed_backward_weight(float* dtable, tensor<float, typename K::space>& dres_keep, const std::int32_t* ids,
                           const llama_dims& d) {
  K::embedding_backward(dtable, dres_keep.data(), ids, d.N(), d.V, d.v0, d.Vl, d.D);
  dres_keep = tensor<float, typename K::space>{};
}

}  // namespace tessera
