// tessera/model/llama_block.hpp: one Llama 3 transformer block, written as llm.c writes a
// layer: named parameter views, a named struct of what forward keeps for backward, and
// block_forward / block_backward whose signatures carry every buffer and shape.
// tessera-requires: openblas
//
//   mid = x + wo(attention(rope(wq(n1)), rope(wk(n1)), wv(n1))),   n1 = attention_norm(x)
//   out = mid + w2(silu(w1(n2)) * w3(n2)),                           n2 = ffn_norm(mid)
//
// A block runs on a shard (llama_shard.hpp): its own heads and FFN columns, and the rows
// of the residual stream it holds. The hooks are where a layout changes (the parallel
// layer runs its plans there; serial_hooks does nothing):
//   gather(in, out)   residual rows -> every token, in front of a column-parallel region;
//   reduce(in, out)   partial sums -> residual rows, after a row-parallel region;
//   attention_forward / attention_backward: the attention itself (context parallel swaps
//                     it; local_attention calls the backend's kernels).
// The kernels are a backend's (kernels/backend.hpp): block_forward<K> calls K's on memory of
// K::space; K is cpu_kernels unless named (model/device_llama.hpp runs them on CUDA).
// Both return the buffer holding the result (their input when nothing moves).
//
// Gradients follow one rule (docs/kernels.md): parameter gradients accumulate (+=);
// block_backward turns the gradient of the block's output, held in `dres`, into the
// gradient of its input, in place.
#pragma once

#include <cstdint>

#include <tessera/model/llama_block_regions.hpp>

namespace tessera {

/// out [Nr, D] = the block applied to x [Nr, D] (this shard's residual rows).
template <class K = cpu_kernels, class Hooks>
void block_forward(float* out, const float* x, const block_params& w, basic_block_saved<typename K::space>& s,
                   basic_block_scratch<typename K::space>& k, const llama_dims& d, Hooks& h) {
  const std::int64_t Nr = d.Nr(), D = d.D;
  // attention branch: mid = x + R(wo(attention(rope(q), rope(k), v))), q, k, v = w{q,k,v}(G(norm(x)))
  K::rmsnorm_forward(s.an.data(), s.rstd1.data(), x, w.attention_norm, Nr, D, d.eps);
  detail::qkv_forward<K>(s, k, w, d, h, true, true, true, true);
  K::rope_forward(s.q.data(), s.q.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.heads, d.hd);
  K::rope_forward(s.k.data(), s.k.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.kv_heads, d.hd);
  h.attention_forward(s.att.data(), s.lse.data(), s.q.data(), s.k.data(), s.v.data(), d);
  detail::wo_forward<K>(x, s, k, w, d, h);
  // feed-forward branch: out = mid + R(w2(silu(w1 n2) * w3 n2)), n2 = G(norm(mid))
  K::rmsnorm_forward(s.fn.data(), s.rstd2.data(), s.mid.data(), w.ffn_norm, Nr, D, d.eps);
  detail::ffn_forward<K>(out, s, k, w, d, h);
}

/// dres [Nr, D]: in, the gradient of the block's output; out, of its input x. Parameter
/// gradients accumulate into g. The gather (G) of forward has the reduce (R) as its
/// backward and the other way round.
template <class K = cpu_kernels, class Hooks>
void block_backward(float* dres, const block_grads& g, const float* x, const block_params& w,
                    const basic_block_saved<typename K::space>& s, basic_block_scratch<typename K::space>& k,
                    const llama_dims& d, Hooks& h) {
  const std::int64_t Nr = d.Nr(), D = d.D;
  // feed-forward branch
  const detail::region_grads f = detail::ffn_backward<K>(dres, g.w1, g.w3, g.w2, s, k, w, d, h);
  K::rmsnorm_backward(dres, g.ffn_norm, f.dn, s.mid.data(), w.ffn_norm, s.rstd2.data(), Nr, D);
  // attention branch
  detail::wo_backward<K>(dres, g.wo, s, k, w, d, h);
  h.attention_backward(k.dq.data(), k.dk.data(), k.dv.data(), k.datt.data(), s.q.data(), s.k.data(), s.v.data(),
                       s.att.data(), s.lse.data(), d);
  K::rope_backward(k.dq.data(), k.dq.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.heads, d.hd);
  K::rope_backward(k.dk.data(), k.dk.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.kv_heads, d.hd);
  const float* dn1 = detail::qkv_backward<K>(g.wq, g.wk, g.wv, s, k, w, d, h);
  K::rmsnorm_backward(dres, g.attention_norm, dn1, x, w.attention_norm, s.rstd1.data(), Nr, D);
}

}  // namespace tessera
