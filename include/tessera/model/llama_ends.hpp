// tessera/model/llama_ends.hpp: the two ends of the Llama: the token embedding in front
// of the blocks, and the head behind them (final norm, output projection, cross-entropy).
// tessera-requires: openblas
//
// Like a block (llama_block.hpp) each end is a forward and a backward with every buffer
// in its signature; a pipeline's first stage owns the embedding, its last the head.
// Hooks: `reduce` after the embedding (vocabulary-split lookups are partial sums),
// `gather` in front of the output projection, and for a split vocabulary either the row
// statistics' reductions (llama_shard::vocab_loss) or the logits' gather and slice.
// Like the blocks, the ends run on a kernel backend K (cpu_kernels unless named).
#pragma once

#include <cstdint>
#include <cstring>

#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/vocab_parallel.hpp>
#include <tessera/model/llama_block.hpp>

namespace tessera {

/// What the head keeps for its backward (sizes: ends_saved_sizes, same order), in `Space`.
template <class Space = host_space>
struct basic_head_saved {
  using buffer = tensor<float, Space>;
  buffer xf;           ///< final_norm(residual)                       [Nr, D]
  buffer xf_full;      ///< every token's xf (seq split)              [N, D]
  buffer rstdf;        ///< [Nr]
  buffer logits;       ///< this shard's vocabulary; after forward with backward, its gradient [N, Vl]
  buffer logits_full;  ///< gathered logits (split vocabulary, no vocab_loss) [N, V]
  buffer rowmax;       ///< vocab_loss: row maxima [N]
  buffer stats;        ///< vocab_loss: sums of exponentials and target logits [N, 2]
  const float* xf_seen = nullptr;

  void allocate(const llama_dims& d) {
    const auto n = ends_saved_sizes(d);
    buffer* f[] = {&xf, &xf_full, &rstdf, &logits, &logits_full, &rowmax, &stats};
    for (std::size_t i = 0; i < n.size(); ++i) *f[i] = buffer({n[i]});
  }
};
using head_saved = basic_head_saved<>;

/// res0 [Nr, D] = rows of the embedding table `table` [Vl, D] for the tokens `ids` [B, T];
/// `proj` [N, D] scratch.
template <class K = cpu_kernels, class Hooks>
void embed_forward(float* res0, const std::int32_t* ids, const float* table, float* proj, const llama_dims& d,
                   Hooks& h) {
  K::embedding_forward(proj, ids, table, d.N(), d.V, d.v0, d.Vl, d.D);
  K::copy(res0, h.reduce(proj, res0), d.Nr() * d.D);
}

/// Accumulates into dtable [Vl, D] the gradient dres [Nr, D] of the embedding's output.
template <class K = cpu_kernels, class Hooks>
void embed_backward(float* dtable, const float* dres, const std::int32_t* ids, float* dgath, const llama_dims& d,
                    Hooks& h) {
  K::embedding_backward(dtable, h.gather(dres, dgath), ids, d.N(), d.V, d.v0, d.Vl, d.D);
}

/// The mean cross-entropy over the counted targets [B, T] (target < 0: ignored) of the
/// logits output(final_norm(x)), x [Nr, D]. With `grad_scale` > 0 (or 0: no backward),
/// leaves grad_scale / count times the loss's gradient in s.logits for head_backward.
template <class K = cpu_kernels, class Hooks>
float head_forward(const float* x, const std::int32_t* targets, const float* norm, const float* output,
                   basic_head_saved<typename K::space>& s, bool need_backward, float loss_scale, const llama_dims& d,
                   Hooks& h) {
  const std::int64_t N = d.N(), V = d.V, Vl = d.Vl;
  K::rmsnorm_forward(s.xf.data(), s.rstdf.data(), x, norm, d.Nr(), d.D, d.eps);
  s.xf_seen = h.gather(s.xf.data(), s.xf_full.data());
  K::matmul_forward(s.logits.data(), s.xf_seen, output, N, d.D, Vl);
  const std::int64_t count = K::count_targets(targets, N, V);
  const float scale = need_backward && count ? loss_scale / static_cast<float>(count) : 0.0f;
  float* dl = need_backward ? s.logits.data() : nullptr;
  if (Vl == V)  // the whole vocabulary here
    return need_backward ? K::cross_entropy_forward_backward(dl, s.logits.data(), targets, N, V, count, scale)
                         : K::cross_entropy_forward(s.logits.data(), targets, N, V, count);
  if (d.vocab_loss) {  // loss parallel: the vocabulary-parallel finish
    if constexpr (!K::vocab_parallel) {
      detail::need<K>(false, "loss parallel (cross-entropy's vocabulary-parallel finish)");
      return 0.0f;
    } else {
      K::ce_shard_row_max(s.rowmax.data(), s.logits.data(), N, Vl);
      h.reduce_row_max(s.rowmax.data());
      K::ce_shard_row_stats(s.stats.data(), s.logits.data(), s.rowmax.data(), targets, N, d.v0, Vl);
      h.reduce_row_stats(s.stats.data());
      return K::ce_shard_finish(dl, s.logits.data(), s.rowmax.data(), s.stats.data(), targets, N, V, d.v0, Vl, count,
                                scale);
    }
  }
  h.gather_logits(s.logits.data(), s.logits_full.data());
  float* dfull = need_backward ? s.logits_full.data() : nullptr;
  const float loss = need_backward ? K::cross_entropy_forward_backward(dfull, s.logits_full.data(), targets, N, V, count,
                                                                       scale)
                                   : K::cross_entropy_forward(s.logits_full.data(), targets, N, V, count);
  if (need_backward) h.slice_logits(s.logits_full.data(), s.logits.data());
  return loss;
}

/// From the logits' gradient head_forward left: accumulates into the output's and the
/// final norm's gradients, and writes the gradient of x into dres [Nr, D]. `dfull` [N, D]
/// and `dtmp` [Nr, D] scratch.
template <class K = cpu_kernels, class Hooks>
void head_backward(float* dres, float* dnorm, float* doutput, const float* x, const float* norm, const float* output,
                   const basic_head_saved<typename K::space>& s, float* dfull, float* dtmp, const llama_dims& d,
                   Hooks& h) {
  K::matmul_backward(dfull, doutput, s.logits.data(), s.xf_seen, output, d.N(), d.D, d.Vl, true);
  const float* dxf = h.reduce(dfull, dtmp);
  K::zero(dres, d.Nr() * d.D);
  K::rmsnorm_backward(dres, dnorm, dxf, x, norm, s.rstdf.data(), d.Nr(), d.D);
}

}  // namespace tessera
