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
// Norm weights are weights: their gradients are in W as well.
// tessera-requires: openblas
#pragma once

#include <cstdint>
#include <cstring>

#include <tessera/model/llama_block.hpp>
#include <tessera/model/llama_ends.hpp>

namespace tessera {

/// What a block's I keeps for its W (sizes on the shard: N tokens, Nr residual rows).
struct block_deferred {
  tensor<float> d_ffn;   ///< the gradient into w2's output, gathered        [N, D]
  tensor<float> dh13;    ///< into w1's and w3's outputs (dh1, then dh3)    [2 N F]
  tensor<float> dn2;     ///< into ffn_norm's output, reduced                [Nr, D]
  tensor<float> d_att;   ///< into wo's output, gathered                     [N, D]
  tensor<float> dq, dk, dv;  ///< into wq's, wk's, wv's outputs (after RoPE's backward)
  tensor<float> dn1;     ///< into attention_norm's output, reduced          [Nr, D]
  /// Under activation checkpointing: the groups the block's I recomputed, kept for its W
  /// (llama_model moves them here from the shared recompute buffer).
  block_saved recomputed;
  std::int64_t recomputed_floats = 0;

  void allocate(const llama_dims& d) {
    const auto n = block_deferred_sizes(d);
    tensor<float>* f[] = {&d_ffn, &dh13, &dn2, &d_att, &dq, &dk, &dv, &dn1};
    for (std::size_t i = 0; i < n.size(); ++i) *f[i] = tensor<float>({n[i]});
  }
  void release() { *this = block_deferred{}; }
  /// Bytes held (0 once released).
  std::int64_t bytes() const {
    return 4 * (static_cast<std::int64_t>(d_ffn.numel() + dh13.numel() + dn2.numel() + d_att.numel() + dq.numel() +
                                          dk.numel() + dv.numel() + dn1.numel()) +
                recomputed_floats);
  }
};

namespace detail {
inline void keep(tensor<float>& dst, const float* src) {
  std::memcpy(dst.data(), src, static_cast<std::size_t>(dst.numel()) * sizeof(float));
}
}  // namespace detail

/// The I half of block_backward: dres [Nr, D] in, the gradient of the block's output; out,
/// of its input. Weight gradients are not touched; `def` keeps what block_backward_weight needs.
template <class Hooks>
void block_backward_input(float* dres, const float* x, const block_params& w, const block_saved& s, block_scratch& k,
                          block_deferred& def, const llama_dims& d, Hooks& h) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D, Hq = d.Hq(), Hk = d.Hk();
  float* dfull = k.dfull.data();
  def.allocate(d);
  // feed-forward branch
  detail::zero(dfull, N * D);
  const float* dout2 = h.gather(dres, k.dgath.data());
  detail::keep(def.d_ffn, dout2);
  detail::feed_forward_backward(dfull, nullptr, nullptr, nullptr, dout2, s.fn_seen, s, w, d, k, h);
  detail::keep(def.dh13, k.ffn.data());  // dh1 then dh3, as feed_forward_backward leaves them
  const float* dn2 = h.reduce(dfull, k.dtmp.data());
  detail::keep(def.dn2, dn2);
  cpu::rmsnorm_backward(dres, nullptr, dn2, s.mid.data(), w.ffn_norm, s.rstd2.data(), Nr, D);
  // attention branch
  detail::zero(k.datt.data(), N * Hq);
  const float* dout1 = h.gather(dres, k.dgath.data());
  detail::keep(def.d_att, dout1);
  detail::linear_backward(k.datt.data(), nullptr, dout1, s.att.data(), w.wo, N, Hq, D, param_role::attention_o, d, k, h);
  h.attention_backward(k.dq.data(), k.dk.data(), k.dv.data(), k.datt.data(), s.q.data(), s.k.data(), s.v.data(),
                       s.att.data(), s.lse.data(), d);
  cpu::rope_backward(k.dq.data(), k.dq.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.heads, d.hd);
  cpu::rope_backward(k.dk.data(), k.dk.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.kv_heads, d.hd);
  detail::keep(def.dq, k.dq.data());
  detail::keep(def.dk, k.dk.data());
  detail::keep(def.dv, k.dv.data());
  detail::zero(dfull, N * D);
  detail::linear_backward(dfull, nullptr, k.dq.data(), s.an_seen, w.wq, N, D, Hq, param_role::attention_q, d, k, h);
  detail::linear_backward(dfull, nullptr, k.dk.data(), s.an_seen, w.wk, N, D, Hk, param_role::attention_k, d, k, h);
  detail::linear_backward(dfull, nullptr, k.dv.data(), s.an_seen, w.wv, N, D, Hk, param_role::attention_v, d, k, h);
  const float* dn1 = h.reduce(dfull, k.dtmp.data());
  detail::keep(def.dn1, dn1);
  cpu::rmsnorm_backward(dres, nullptr, dn1, x, w.attention_norm, s.rstd1.data(), Nr, D);
}

/// The W half: accumulates the block's weight gradients into g from what I kept, in
/// block_backward's order; then frees `def`. It communicates nothing, except the amax
/// all-reduces of Float8 tensorwise casts of TP-split operands (through `h`).
template <class Hooks>
void block_backward_weight(const block_grads& g, const float* x, const block_saved& s, block_deferred& def,
                           block_scratch& k, const llama_dims& d, Hooks& h) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D, Hq = d.Hq(), Hk = d.Hk(), F = d.F;
  using detail::linear_backward;
  using r = param_role;
  linear_backward(nullptr, g.w2, def.d_ffn.data(), s.act.data(), nullptr, N, F, D, r::ffn_w2, d, k, h);
  linear_backward(nullptr, g.w1, def.dh13.data(), s.fn_seen, nullptr, N, D, F, r::ffn_w1, d, k, h);
  linear_backward(nullptr, g.w3, def.dh13.data() + N * F, s.fn_seen, nullptr, N, D, F, r::ffn_w3, d, k, h);
  cpu::rmsnorm_backward(nullptr, g.ffn_norm, def.dn2.data(), s.mid.data(), nullptr, s.rstd2.data(), Nr, D);
  linear_backward(nullptr, g.wo, def.d_att.data(), s.att.data(), nullptr, N, Hq, D, r::attention_o, d, k, h);
  linear_backward(nullptr, g.wq, def.dq.data(), s.an_seen, nullptr, N, D, Hq, r::attention_q, d, k, h);
  linear_backward(nullptr, g.wk, def.dk.data(), s.an_seen, nullptr, N, D, Hk, r::attention_k, d, k, h);
  linear_backward(nullptr, g.wv, def.dv.data(), s.an_seen, nullptr, N, D, Hk, r::attention_v, d, k, h);
  cpu::rmsnorm_backward(nullptr, g.attention_norm, def.dn1.data(), x, nullptr, s.rstd1.data(), Nr, D);
  def.release();
}

/// The I half of head_backward: writes the gradient of x into dres [Nr, D] and keeps the
/// final norm's reduced output gradient in `dxf_keep` [Nr, D] (the logits' gradient stays
/// in s.logits for W).
template <class Hooks>
void head_backward_input(float* dres, tensor<float>& dxf_keep, const float* x, const float* norm, const float* output,
                         const head_saved& s, float* dfull, float* dtmp, const llama_dims& d, Hooks& h) {
  detail::zero(dfull, d.N() * d.D);
  cpu::matmul_backward(dfull, nullptr, nullptr, s.logits.data(), s.xf_seen, output, d.N(), d.D, d.Vl);
  const float* dxf = h.reduce(dfull, dtmp);
  dxf_keep = tensor<float>({d.Nr() * d.D});
  detail::keep(dxf_keep, dxf);
  detail::zero(dres, d.Nr() * d.D);
  cpu::rmsnorm_backward(dres, nullptr, dxf, x, norm, s.rstdf.data(), d.Nr(), d.D);
}
/// The W half of head_backward (then frees `dxf_keep`).
inline void head_backward_weight(float* dnorm, float* doutput, tensor<float>& dxf_keep, const float* x,
                                 const head_saved& s, const llama_dims& d) {
  cpu::matmul_backward(nullptr, doutput, nullptr, s.logits.data(), s.xf_seen, nullptr, d.N(), d.D, d.Vl);
  cpu::rmsnorm_backward(nullptr, dnorm, dxf_keep.data(), x, nullptr, s.rstdf.data(), d.Nr(), d.D);
  dxf_keep = tensor<float>{};
}

/// The embedding's backward has no input gradient: I only gathers dres to every token
/// (the communication) into `dres_keep` [N, D]; W accumulates the table's gradient.
template <class Hooks>
void embed_backward_input(tensor<float>& dres_keep, const float* dres, float* dgath, const llama_dims& d, Hooks& h) {
  dres_keep = tensor<float>({d.N() * d.D});
  detail::keep(dres_keep, h.gather(dres, dgath));
}
inline void embed_backward_weight(float* dtable, tensor<float>& dres_keep, const std::int32_t* ids,
                                  const llama_dims& d) {
  cpu::embedding_shard_backward(dtable, dres_keep.data(), ids, d.N(), d.V, d.v0, d.Vl, d.D);
  dres_keep = tensor<float>{};
}

}  // namespace tessera
