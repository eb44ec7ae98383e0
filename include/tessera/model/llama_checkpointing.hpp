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
// redoes its collectives through the same hooks (the traffic estimator counts them). Like the
// parts, everything here is generic over the memory space and the kernel backend (device_llama).
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include <tessera/model/llama_ac.hpp>
#include <tessera/model/llama_block.hpp>
#include <tessera/model/llama_shard.hpp>

namespace tessera {

namespace detail {
template <class Space>
std::array<tensor<float, Space>*, 15> saved_fields(basic_block_saved<Space>& s) {
  return {&s.an, &s.rstd1, &s.an_full, &s.q, &s.k, &s.v, &s.att, &s.lse, &s.mid, &s.fn, &s.rstd2, &s.fn_full,
          &s.h1, &s.h3, &s.act};
}
}  // namespace detail

/// Allocates the fields of `s` a block keeps under `keep` (the others stay empty).
template <class Space>
void allocate_kept(basic_block_saved<Space>& s, const llama_dims& d, std::uint16_t keep) {
  const auto n = block_saved_sizes(d);
  const auto f = detail::saved_fields(s);
  for (std::size_t i = 0; i < n.size(); ++i)
    *f[i] = (keep & ac_bit(ac_field_group[i])) ? tensor<float, Space>({n[i]}) : tensor<float, Space>();
}

/// Allocates the fields a recompute rebuilds: those not in `keep` (the kept ones come in
/// from the block by swap_kept()).
template <class Space>
void allocate_recompute(basic_block_saved<Space>& s, const llama_dims& d, std::uint16_t keep) {
  allocate_kept(s, d, static_cast<std::uint16_t>(ac_keep_all & ~keep));
}

/// Exchanges the kept fields of a block's own `mine` with the shared buffer `work`, and the
/// pointers to what the column-parallel GEMMs saw: before the block's forward or recompute
/// (so `work` is a whole block_saved), and again after (so `mine` holds what it keeps).
template <class Space>
void swap_kept(basic_block_saved<Space>& mine, basic_block_saved<Space>& work, std::uint16_t keep,
               bool with_seen = true) {
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
template <class Space = host_space>
class basic_block_work {
  using saved_t = basic_block_saved<Space>;

 public:
  basic_block_work(saved_t& mine, saved_t& shared, std::uint16_t keep) : mine_(mine), shared_(shared), keep_(keep) {
    if (checkpointed()) swap_kept(mine_, shared_, keep_);
  }
  ~basic_block_work() {
    if (checkpointed()) swap_kept(mine_, shared_, keep_);
  }
  basic_block_work(const basic_block_work&) = delete;
  basic_block_work& operator=(const basic_block_work&) = delete;
  bool checkpointed() const noexcept { return keep_ != ac_keep_all; }
  std::uint16_t keep() const noexcept { return keep_; }
  saved_t& saved() noexcept { return checkpointed() ? shared_ : mine_; }

 private:
  saved_t& mine_;
  saved_t& shared_;
  std::uint16_t keep_;
};
using block_work = basic_block_work<>;

/// Frees the fields of `s` in the groups of `groups`.
template <class Space>
void release_groups(basic_block_saved<Space>& s, std::uint16_t groups) {
  const auto f = detail::saved_fields(s);
  for (std::size_t i = 0; i < f.size(); ++i)
    if (groups & ac_bit(ac_field_group[i])) *f[i] = tensor<float, Space>();
}

/// Rebuilds in `s` every group not in `keep` from the block's input x, as block_forward made
/// it (the same kernels, inputs and order: bit-identical). The block's output is not
/// recomputed: it is the next block's kept input. Matmul FLOPs done are added to `flops`.
template <class K = cpu_kernels, class Hooks>
void block_recompute(const float* x, const block_params& w, basic_block_saved<typename K::space>& s,
                     basic_block_scratch<typename K::space>& k, const llama_dims& d, Hooks& h, std::uint16_t keep,
                     std::int64_t& flops) {
  const std::int64_t N = d.N(), Nr = d.Nr(), D = d.D, Hq = d.Hq(), Hk = d.Hk();
  auto redo = [&](ac_op o) { return !(keep & ac_bit(o)); };
  auto mm = [&](std::int64_t in, std::int64_t out) { flops += 2 * N * in * out; };
  if (redo(ac_op::attention_norm))
    K::rmsnorm_forward(s.an.data(), s.rstd1.data(), x, w.attention_norm, Nr, D, d.eps);
  detail::qkv_forward<K>(s, k, w, d, h, redo(ac_op::attention_norm), redo(ac_op::wq), redo(ac_op::wk),
                         redo(ac_op::wv));
  if (redo(ac_op::wq)) {
    K::rope_forward(s.q.data(), s.q.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.heads, d.hd);
    mm(D, Hq);
  }
  if (redo(ac_op::wk)) {
    K::rope_forward(s.k.data(), s.k.data(), k.cos.data(), k.sin.data(), d.rope_B(), d.rope_T(), d.kv_heads, d.hd);
    mm(D, Hk);
  }
  if (redo(ac_op::wv)) mm(D, Hk);
  if (redo(ac_op::attention)) {
    h.attention_forward(s.att.data(), s.lse.data(), s.q.data(), s.k.data(), s.v.data(), d);
    flops += 4 * d.B * d.heads * d.T * d.T * d.hd / 2;  // causal: QK^T and PV over half the pairs
  }
  if (redo(ac_op::wo)) {
    detail::wo_forward<K>(x, s, k, w, d, h);
    mm(Hq, D);
  }
  if (redo(ac_op::ffn_norm)) K::rmsnorm_forward(s.fn.data(), s.rstd2.data(), s.mid.data(), w.ffn_norm, Nr, D, d.eps);
  detail::ffn_in_forward<K>(s, k, w, d, h, redo(ac_op::ffn_norm), redo(ac_op::w1), redo(ac_op::w3));
  if (redo(ac_op::w1)) mm(D, d.F);
  if (redo(ac_op::w3)) mm(D, d.F);
  if (redo(ac_op::swiglu)) K::swiglu_forward(s.act.data(), s.h1.data(), s.h3.data(), N * d.F);
}

}  // namespace tessera
