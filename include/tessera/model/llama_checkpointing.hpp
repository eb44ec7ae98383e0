// tessera/model/llama_checkpointing.hpp: activation checkpointing of Llama blocks -- which of
// a block's saved activations (block_saved, llama_block.hpp) forward keeps, and the
// recompute that rebuilds the others in backward.
// tessera-requires: openblas
//
// The groups, modes and keep masks are in llama_ac.hpp. A checkpointed block runs its
// forward in one shared buffer (its kept groups swapped in and out again), and before its
// backward rebuilds there every group it did not keep from its input.
// Recompute runs the same kernels on the same inputs in the same order as forward, so its
// results are bit-identical and so are the gradients. Under TP / SP the recomputed region
// redoes its collectives through the same hooks (the traffic estimator counts them).
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include <tessera/model/llama_ac.hpp>
#include <tessera/model/llama_block.hpp>
#include <tessera/model/llama_shard.hpp>

namespace tessera {

namespace detail {
inline std::array<tensor<float>*, 15> saved_fields(block_saved& s) {
  return {&s.an, &s.rstd1, &s.an_full, &s.q, &s.k, &s.v, &s.att, &s.lse, &s.mid, &s.fn, &s.rstd2, &s.fn_full,
          &s.h1, &s.h3, &s.act};
}
}  // namespace detail

/// Allocates the fields of `s` a block keeps under `keep` (the others stay empty).
inline void allocate_kept(block_saved& s, const llama_dims& d, std::uint16_t keep) {
  const auto n = block_saved_sizes(d);
  const auto f = detail::saved_fields(s);
  for (std::size_t i = 0; i < n.size(); ++i)
    *f[i] = (keep & ac_bit(ac_field_group[i])) ? tensor<float>({n[i]}) : tensor<float>();
}

/// Allocates the fields a recompute rebuilds: those not in `keep` (the kept ones come in
/// from the block by swap_kept()).
inline void allocate_recompute(block_saved& s, const llama_dims& d, std::uint16_t keep) {
  allocate_kept(s, d, static_cast<std::uint16_t>(ac_keep_all & ~keep));
}

/// Exchanges the kept fields of a block's own `mine` with the shared buffer `work`, and the
/// pointers to what the column-parallel GEMMs saw: before the block's forward or recompute
/// (so `work` is a whole block_saved), and again after (so `mine` holds what it keeps).
inline void swap_kept(block_saved& mine, block_saved& work, std::uint16_t keep, bool with_seen = true) {
  const auto a = detail::saved_fields(mine), b = detail::saved_fields(work);
  for (std::size_t i = 0; i < a.size(); ++i)
    if (keep & ac_bit(ac_field_group[i])) std::swap(*a[i], *b[i]);
  if (!with_seen) return;
  std::swap(mine.an_seen, work.an_seen);
  std::swap(mine.fn_seen, work.fn_seen);
}

/// What a block runs on: its own saved tensors, or for a checkpointed block (keep !=
/// ac_keep_all) the shared recompute buffer with the block's kept groups swapped in -- and
/// out again when this goes, so the block keeps what it keeps.
class block_work {
 public:
  block_work(block_saved& mine, block_saved& shared, std::uint16_t keep) : mine_(mine), shared_(shared), keep_(keep) {
    if (checkpointed()) swap_kept(mine_, shared_, keep_);
  }
  ~block_work() {
    if (checkpointed()) swap_kept(mine_, shared_, keep_);
  }
  block_work(const block_work&) = delete;
  block_work& operator=(const block_work&) = delete;
  bool checkpointed() const noexcept { return keep_ != ac_keep_all; }
  std::uint16_t keep() const noexcept { return keep_; }
  block_saved& saved() noexcept { return checkpointed() ? shared_ : mine_; }

 private:
  block_saved& mine_;
  block_saved& shared_;
  std::uint16_t keep_;
};

/// Frees the fields of `s` in the groups of `groups`.
inline void release_groups(block_saved& s, std::uint16_t groups) {
  const auto f = detail::saved_fields(s);
  for (std::size_t i = 0; i < f.size(); ++i)
    if (groups & ac_bit(ac_field_group[i])) *f[i] = tensor<float>();
}

/// Rebuilds in `s` every group not in `keep` from the block's input x, as block_forward made
/// it (the same kernels, inputs and order: bit-identical). The block's output is not
/// recomputed: it is the next block's kept input. Matmul FLOPs done are added to `flops`.
template <class Hooks>
void block_recompute(const float* x, const block_params& w, block_saved& s, block_scratch& k, const llama_dims& d,
                     Hooks& h, std::uint16_t keep, std::int64_t& flops) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D, Hq = d.Hq(), Hk = d.Hk();
  auto redo = [&](ac_op o) { return !(keep & ac_bit(o)); };
  auto mm = [&](std::int64_t in, std::int64_t out) { flops += 2 * N * in * out; };
  if (redo(ac_op::attention_norm)) {
    cpu::rmsnorm_forward(s.an.data(), s.rstd1.data(), x, w.attention_norm, Nr, D, d.eps);
    s.an_seen = h.gather(s.an.data(), s.an_full.data());
  }
  if (redo(ac_op::wq)) {
    detail::linear_forward(s.q.data(), s.an_seen, w.wq, N, D, Hq, param_role::attention_q, d, k, h);
    cpu::rope_forward(s.q.data(), s.q.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.heads, d.hd);
    mm(D, Hq);
  }
  if (redo(ac_op::wk)) {
    detail::linear_forward(s.k.data(), s.an_seen, w.wk, N, D, Hk, param_role::attention_k, d, k, h);
    cpu::rope_forward(s.k.data(), s.k.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.kv_heads, d.hd);
    mm(D, Hk);
  }
  if (redo(ac_op::wv)) {
    detail::linear_forward(s.v.data(), s.an_seen, w.wv, N, D, Hk, param_role::attention_v, d, k, h);
    mm(D, Hk);
  }
  if (redo(ac_op::attention)) {
    h.attention_forward(s.att.data(), s.lse.data(), s.q.data(), s.k.data(), s.v.data(), d);
    flops += 4 * d.B * d.heads * d.T * d.T * d.hd / 2;  // causal: QK^T and PV over half the pairs
  }
  if (redo(ac_op::wo)) {
    detail::linear_forward(k.proj.data(), s.att.data(), w.wo, N, Hq, D, param_role::attention_o, d, k, h);
    detail::add(s.mid.data(), x, h.reduce(k.proj.data(), s.mid.data()), Nr * D);
    mm(Hq, D);
  }
  if (redo(ac_op::ffn_norm)) {
    cpu::rmsnorm_forward(s.fn.data(), s.rstd2.data(), s.mid.data(), w.ffn_norm, Nr, D, d.eps);
    s.fn_seen = h.gather(s.fn.data(), s.fn_full.data());
  }
  if (redo(ac_op::w1)) {
    detail::linear_forward(s.h1.data(), s.fn_seen, w.w1, N, D, d.F, param_role::ffn_w1, d, k, h);
    mm(D, d.F);
  }
  if (redo(ac_op::w3)) {
    detail::linear_forward(s.h3.data(), s.fn_seen, w.w3, N, D, d.F, param_role::ffn_w3, d, k, h);
    mm(D, d.F);
  }
  if (redo(ac_op::swiglu)) cpu::swiglu_forward(s.act.data(), s.h1.data(), s.h3.data(), N * d.F);
}

}  // namespace tessera
