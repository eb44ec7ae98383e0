// tessera/parallel/cp_attention.hpp: context parallel's attention -- each rank's queries
// against every rank's keys and values, as ring attention (the runtime of the
// context_parallel policy, parallel/context_parallel.hpp).
// tessera-requires: openblas
//
// A cp rank holds T / cp tokens of every sequence (cp_positions: head-tail chunks or one
// contiguous chunk) and computes q, k, v for them. Attention then visits the cp blocks of
// K/V in ring order -- at step s the block of rank (r - s) mod cp -- computing the block's
// partial output with the mask of the tokens' global positions and folding it into the
// running output by its log-sum-exp (kernels/cpu/ring_attention.hpp, PyTorch's merge); a
// block whose keys no query sees is skipped (under contiguous chunks, the later ranks'). The
// rotation moves the blocks:
//   allgather  forward: K and V all-gathered over cp (two calls), the blocks read in place;
//              backward: gathered again (nothing kept from forward), dK/dV of every block
//              accumulated locally, then reduce-scattered (two calls) to their owners.
//   ring       forward: cp - 1 steps of sending the held K/V block to rank r + 1 and
//              receiving rank r - 1's, posted before the held block computes (the transfer
//              runs behind the compute); backward: the block travels with its dK/dV
//              accumulators (4 tensors per step), and after the last step the accumulators
//              take one more step home (cp sends of dK/dV, cp - 1 of K/V).
// Under cp_documents each batch row has its own documents: the blocks run row by row with
// the rows' document ids in the mask (and skip per row); balanced per document, each row
// also has its own token positions (cp_document_positions). GQA: K/V travel with their NKV
// heads, unrepeated. Backward computes dQ locally (the
// merged output's lse and D = rowsum(dO . O) are this rank's). Both rotations visit the
// blocks in the same order, so they give the same bits.
//
// The buffers (cp_attention_floats) are allocated once per batch shape and kept; the
// memory estimator adds the same count. basic_cp_attention<K> runs on kernel backend K
// (cp_attention: the CPU's): q, k, v, the outputs, the buffers and the spans' positions and
// document ids the kernels read are in K's memory (a GPU's: cuda/ring_attention.cuh, the
// blocks moved by NCCL after a fence); which blocks a rank's queries see is decided on the
// host, from host copies of the same positions.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include <tessera/comm/any_communicator.hpp>
#include <tessera/comm/communicator.hpp>
#include <tessera/core/error.hpp>
#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/ring_attention.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/parallel/context_parallel.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera::parallel {

/// Where a rank's attention time went since the last reset (wall clock): computing blocks
/// (and merging them), and communicating in the open -- posting sends and receives (which
/// copy, on in-process ranks) and waiting for K/V or dK/dV that had not arrived: under ring
/// the part of the transfers the compute did not hide; under all-gather every collective.
struct cp_attention_timing {
  double compute_s = 0, wait_s = 0;
  std::int64_t calls = 0;  ///< forward and backward passes
};

template <class K = cpu_kernels>
class basic_cp_attention {
 public:
  using space = typename K::space;
  basic_cp_attention(comm::any_communicator& group, const cp_settings& s) : g_(group), s_(s) {}

  int size() const { return g_.size(); }
  int rank() const { return g_.rank(); }
  const cp_settings& settings() const noexcept { return s_; }

  /// Sets the sequence length: every cp rank's token positions (checked: T divisible as
  /// cp_seq_problem says; tp_seq the sequence-parallel split of each part, 1 without).
  void set_sequence(std::int64_t T, std::int64_t tp_seq = 1) {
    if (T == T_) return;
    const std::string problem = cp_seq_problem(T, size(), s_.balance, tp_seq);
    if (!problem.empty()) throw error(problem);
    T_ = T;
    pos_.assign(static_cast<std::size_t>(size()), {});
    seen_.clear();
    if (per_row()) return;  // set_documents gives each row its positions
    for (int r = 0; r < size(); ++r) pos_[static_cast<std::size_t>(r)] = cp_positions(T, size(), r, s_.balance);
    for (int r = 0; r < size(); ++r) seen_.push_back(cpu::visibility(span_of(rank()), span_of(r)) != cpu::block_visibility::none);
    keep_spans();
  }
  /// Under cp_documents: the document ids of this rank's `rows` whole sequences of T ids
  /// (row-major), from which every rank's tokens get theirs, and balanced per document every
  /// rank's positions in each row (collective-free: every rank has the global batch). Call
  /// after set_sequence, before each forward.
  void set_documents(std::span<const std::int32_t> ids, std::int64_t rows) {
    if (s_.documents_eos < 0) return;
    const std::int64_t T = T_, cp = size(), Tl = T / cp;
    std::vector<std::int32_t> whole(static_cast<std::size_t>(T));
    docs_.assign(static_cast<std::size_t>(cp), std::vector<std::int32_t>(static_cast<std::size_t>(rows * Tl)));
    if (per_row())
      for (auto& p : pos_) p.clear();
    row0_ = 0;
    for (std::int64_t b = 0; b < rows; ++b) {
      document_ids(whole.data(), ids.data() + b * T, T, s_.documents_eos);
      for (std::int64_t r = 0; r < cp; ++r) {
        if (per_row()) cp_document_positions(pos_[static_cast<std::size_t>(r)], whole.data(), T, cp, r);
        const std::int64_t* p = row_positions(static_cast<int>(r), b);
        for (std::int64_t j = 0; j < Tl; ++j)
          docs_[static_cast<std::size_t>(r)][static_cast<std::size_t>(b * Tl + j)] = whole[static_cast<std::size_t>(p[j])];
      }
    }
    doc_rows_ = rows, row_count_ = rows;
    row_seen_.assign(static_cast<std::size_t>(rows * cp), false);
    for (std::int64_t b = 0; b < rows; ++b)
      for (int r = 0; r < cp; ++r)
        row_seen_[static_cast<std::size_t>(b * cp + r)] =
            cpu::visibility(span_of(rank(), b), span_of(r, b)) != cpu::block_visibility::none;
    keep_spans();
  }

  /// The rows [first, first + n) of set_documents' are the batch attention sees next (a
  /// pipeline's microbatch).
  void use_rows(std::int64_t first, std::int64_t n) {
    if (!documents()) return;
    check(first >= 0 && n >= 0 && first + n <= doc_rows_, "cp_attention::use_rows: rows out of range");
    row0_ = first, row_count_ = n;
  }

  /// The global positions of this rank's tokens (of rank r's), in order: T / cp of every
  /// sequence, or balanced per document those of each of set_documents' rows in turn.
  const std::vector<std::int64_t>& positions() const { return pos_.at(static_cast<std::size_t>(rank())); }
  const std::vector<std::int64_t>& positions(int r) const { return pos_.at(static_cast<std::size_t>(r)); }
  /// The tokens of each sequence a rank holds: T / cp.
  std::int64_t local_length() const noexcept { return T_ / size(); }
  /// The positions of rank r's local_length() tokens of set_documents' row b -- every row's
  /// the same unless balanced per document.
  const std::int64_t* row_positions(int r, std::int64_t b) const {
    return positions(r).data() + (per_row() ? b * local_length() : 0);
  }
  const cp_attention_timing& timing() const noexcept { return timing_; }
  void reset_timing() noexcept { timing_ = {}; }
  /// Bytes of the buffers held (0 before the first attention).
  std::int64_t buffer_bytes() const { return 4 * static_cast<std::int64_t>(buf_.numel()); }

  /// out [B, Tl, NH, HD], lse [B, NH, Tl] of this rank's queries against every rank's keys.
  void forward(float* out, float* lse, const float* q, const float* k, const float* v, const llama_dims& d) {
    prepare(d);
    const std::int64_t kvn = kv_numel(d), cp = size();
    K::zero(out, d.B * d.T * d.heads * d.hd);
    K::to_device(lse, ninf_.data(), d.B * d.heads * d.T);  // -inf: no block seen yet
    if (s_.rotation == cp_rotation_kind::allgather) {
      float* Ka = blocks(), * Va = Ka + cp * kvn;
      gather_kv(k, v, Ka, Va, kvn);
      for (int s = 0; s < cp; ++s) {
        const int src = source(s);
        block_forward(out, lse, q, Ka + src * kvn, Va + src * kvn, src, d);
      }
      ++timing_.calls;
      return;
    }
    float* cur = blocks(), * nxt = cur + 4 * kvn;
    K::copy(cur, k, kvn);
    K::copy(cur + kvn, v, kvn);
    for (int s = 0; s < cp; ++s) {
      std::vector<comm::any_request> inflight;
      if (s + 1 < cp) inflight = pass(cur, nxt, 2 * kvn, s);
      block_forward(out, lse, q, cur, cur + kvn, source(s), d);
      wait(inflight);
      std::swap(cur, nxt);
    }
    ++timing_.calls;
  }

  /// dq, dk, dv (written) of this rank's q, k, v, given the merged out and lse of forward.
  void backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                const float* out, const float* lse, const llama_dims& d) {
    prepare(d);
    const std::int64_t kvn = kv_numel(d), cp = size();
    float* D = delta();
    K::attention_delta(D, dout, out, d.B, d.T, d.heads, d.hd);
    K::zero(dq, d.B * d.T * d.heads * d.hd);
    if (s_.rotation == cp_rotation_kind::allgather) {
      float* Ka = blocks(), * Va = Ka + cp * kvn, * dK = Va + cp * kvn, * dV = dK + cp * kvn;
      gather_kv(k, v, Ka, Va, kvn);
      K::zero(dK, 2 * cp * kvn);
      for (int s = 0; s < cp; ++s) {
        const int src = source(s);
        block_backward(dq, dK + src * kvn, dV + src * kvn, dout, q, Ka + src * kvn, Va + src * kvn, lse, D, src, d);
      }
      std::vector<comm::any_request> r;
      const clock::time_point t0 = clock::now();
      space::fence();  // the blocks' kernels wrote dK, dV
      r.push_back(comm::reduce_scatter(g_, std::span<const float>(dK, static_cast<std::size_t>(cp * kvn)),
                                       std::span<float>(dk, static_cast<std::size_t>(kvn))));
      r.push_back(comm::reduce_scatter(g_, std::span<const float>(dV, static_cast<std::size_t>(cp * kvn)),
                                       std::span<float>(dv, static_cast<std::size_t>(kvn))));
      wait(r, t0);
      ++timing_.calls;
      return;
    }
    // the held block: K, V, dK, dV (4 kvn); it moves on with its accumulators
    float* cur = blocks(), * nxt = cur + 4 * kvn;
    K::copy(cur, k, kvn);
    K::copy(cur + kvn, v, kvn);
    K::zero(cur + 2 * kvn, 2 * kvn);
    for (int s = 0; s < cp; ++s) {
      // the next K/V go ahead while this block computes; its dK/dV follow once it has
      std::vector<comm::any_request> inflight;
      if (s + 1 < cp) inflight = pass(cur, nxt, 2 * kvn, 2 * s);
      block_backward(dq, cur + 2 * kvn, cur + 3 * kvn, dout, q, cur, cur + kvn, lse, D, source(s), d);
      auto grads = pass(cur + 2 * kvn, nxt + 2 * kvn, 2 * kvn, 2 * s + 1);
      wait(inflight);
      wait(grads);
      std::swap(cur, nxt);
    }
    ++timing_.calls;
    // after cp steps the accumulators of this rank's own block are held
    K::copy(dk, cur + 2 * kvn, kvn);
    K::copy(dv, cur + 3 * kvn, kvn);
  }

 private:
  comm::any_communicator& g_;
  cp_settings s_;
  std::int64_t T_ = 0;
  std::vector<std::vector<std::int64_t>> pos_;
  std::vector<bool> seen_;  // whether this rank's queries see any key of rank r's block
  // cp_documents: every rank's tokens' document ids per row [cp][rows * Tl], and whether
  // row b's queries see any key of rank r's block [rows * cp]
  std::vector<std::vector<std::int32_t>> docs_;
  std::vector<bool> row_seen_;
  std::int64_t doc_rows_ = 0, row0_ = 0, row_count_ = 0;  // rows held; the ones in use
  tensor<float, space> buf_;
  std::vector<float> ninf_;  // -inf for lse's start (B NH Tl), copied in
  // the spans' positions and document ids where the kernels read them: K's memory (on the
  // host, pos_ and docs_ themselves)
  std::vector<space_buffer<std::int64_t, space>> kpos_;
  std::vector<space_buffer<std::int32_t, space>> kdocs_;
  cp_attention_timing timing_;
  std::int64_t B_ = 0, Tl_ = 0, NH_ = 0, NKV_ = 0, HD_ = 0;

  static std::int64_t kv_numel(const llama_dims& d) { return d.B * d.T * d.kv_heads * d.hd; }
  int source(int s) const { return (rank() - s + size()) % size(); }
  float* partial() { return buf_.data(); }
  float* partial_lse() { return buf_.data() + B_ * Tl_ * NH_ * HD_; }
  float* delta() { return partial_lse() + B_ * NH_ * Tl_; }
  float* blocks() { return delta() + B_ * NH_ * Tl_; }

  void prepare(const llama_dims& d) {
    check(T_ > 0 && local_length() == d.T && (!per_row() || doc_rows_ > 0),
          "cp_attention: the local sequence (" + std::to_string(d.T) + " tokens) does not match the " +
              std::to_string(T_) + " / " + std::to_string(size()) + " of set_sequence()");
    if (d.B == B_ && d.T == Tl_ && d.heads == NH_ && d.kv_heads == NKV_ && d.hd == HD_) return;
    B_ = d.B, Tl_ = d.T, NH_ = d.heads, NKV_ = d.kv_heads, HD_ = d.hd;
    buf_ = tensor<float, space>({cp_attention_floats(s_, size(), d)});
    ninf_.assign(static_cast<std::size_t>(d.B * d.heads * d.T), -std::numeric_limits<float>::infinity());
  }
  /// Copies every rank's positions and document ids into K's memory (not on the host).
  void keep_spans() {
    if constexpr (!space::host_accessible) {
      auto copy_in = [](auto& to, const auto& from) {
        to.clear();
        for (const auto& x : from) {
          auto& b = to.emplace_back(x.size());
          if (!x.empty()) K::to_device(b.data(), x.data(), static_cast<std::int64_t>(x.size()));
        }
      };
      copy_in(kpos_, pos_);
      copy_in(kdocs_, docs_);
    }
  }
  /// span_of(r, b) with its pointers where K's kernels read them.
  cpu::token_span kernel_span(int r, std::int64_t b = -1) const {
    cpu::token_span s = span_of(r, b);
    if constexpr (!space::host_accessible) {
      const auto u = static_cast<std::size_t>(r);
      s.pos = kpos_[u].data() + (s.pos - pos_[u].data());
      if (s.doc) s.doc = kdocs_[u].data() + (s.doc - docs_[u].data());
    }
    return s;
  }
  /// Rank r's tokens (of row b of the rows in use, with its documents, under cp_documents).
  cpu::token_span span_of(int r, std::int64_t b = -1) const {
    const std::int64_t n = local_length();
    return {row_positions(r, b < 0 ? 0 : row0_ + b),
            b < 0 ? nullptr : docs_[static_cast<std::size_t>(r)].data() + (row0_ + b) * n, n};
  }
  bool documents() const { return s_.documents_eos >= 0; }
  bool per_row() const { return s_.balance == cp_balance_kind::per_document; }
  using clock = std::chrono::steady_clock;
  /// Waits for `r`, counting the time since `t0` (default: now) as waiting.
  void wait(std::vector<comm::any_request>& r, clock::time_point t0 = clock::now()) {
    for (auto& x : r) x.wait();
    timing_.wait_s += std::chrono::duration<double>(clock::now() - t0).count();
  }
  void gather_kv(const float* k, const float* v, float* Ka, float* Va, std::int64_t kvn) {
    const auto n = static_cast<std::size_t>(kvn), all = n * static_cast<std::size_t>(size());
    const clock::time_point t0 = clock::now();
    space::fence();  // the model's kernels wrote k and v
    std::vector<comm::any_request> r;
    r.push_back(comm::all_gather(g_, std::span<const float>(k, n), std::span<float>(Ka, all)));
    r.push_back(comm::all_gather(g_, std::span<const float>(v, n), std::span<float>(Va, all)));
    wait(r, t0);
  }
  /// Posts the send of `n` floats at `from` to rank + 1 and the receive of rank - 1's into `to`.
  std::vector<comm::any_request> pass(const float* from, float* to, std::int64_t n, int tag) {
    const int next = (rank() + 1) % size(), prev = (rank() - 1 + size()) % size();
    const clock::time_point t0 = clock::now();  // posting may copy (in-process ranks): exposed
    space::fence();  // the kernels that wrote the block (and its accumulators) have finished
    std::vector<comm::any_request> r;
    {
      comm::group grp(g_);
      r.push_back(comm::send(g_, std::span<const float>(from, static_cast<std::size_t>(n)), next, tag));
      r.push_back(comm::recv(g_, std::span<float>(to, static_cast<std::size_t>(n)), prev, tag));
    }
    timing_.wait_s += std::chrono::duration<double>(clock::now() - t0).count();
    return r;
  }
  void block_forward(float* out, float* lse, const float* q, const float* Kb, const float* Vb, int src,
                     const llama_dims& d) {
    const clock::time_point t0 = clock::now();
    if (documents()) {  // one row at a time: each has its own documents
      check(row_count_ == d.B, "cp_attention: the rows in use (set_documents, use_rows) are not the batch's");
      const std::int64_t qn = d.T * d.heads * d.hd, kn = d.T * d.kv_heads * d.hd, ln = d.heads * d.T;
      for (std::int64_t b = 0; b < d.B; ++b) {
        if (!row_seen_[static_cast<std::size_t>((row0_ + b) * size() + src)]) continue;
        K::attention_block_forward(partial(), partial_lse(), q + b * qn, Kb + b * kn, Vb + b * kn,
                                   kernel_span(rank(), b), kernel_span(src, b), 1, d.heads, d.kv_heads, d.hd);
        K::attention_merge(out + b * qn, lse + b * ln, partial(), partial_lse(), 1, d.T, d.heads, d.hd);
      }
    } else if (seen_[static_cast<std::size_t>(src)]) {
      K::attention_block_forward(partial(), partial_lse(), q, Kb, Vb, kernel_span(rank()), kernel_span(src), d.B,
                                 d.heads, d.kv_heads, d.hd);
      K::attention_merge(out, lse, partial(), partial_lse(), d.B, d.T, d.heads, d.hd);
    }
    timing_.compute_s += std::chrono::duration<double>(clock::now() - t0).count();
  }
  void block_backward(float* dq, float* dK, float* dV, const float* dout, const float* q, const float* Kb,
                      const float* Vb, const float* lse, const float* D, int src, const llama_dims& d) {
    const clock::time_point t0 = clock::now();
    if (documents()) {
      const std::int64_t qn = d.T * d.heads * d.hd, kn = d.T * d.kv_heads * d.hd, ln = d.heads * d.T;
      for (std::int64_t b = 0; b < d.B; ++b)
        if (row_seen_[static_cast<std::size_t>((row0_ + b) * size() + src)])
          K::attention_block_backward(dq + b * qn, dK + b * kn, dV + b * kn, dout + b * qn, q + b * qn, Kb + b * kn,
                                      Vb + b * kn, lse + b * ln, D + b * ln, kernel_span(rank(), b),
                                      kernel_span(src, b), 1, d.heads, d.kv_heads, d.hd);
    } else if (seen_[static_cast<std::size_t>(src)]) {
      K::attention_block_backward(dq, dK, dV, dout, q, Kb, Vb, lse, D, kernel_span(rank()), kernel_span(src), d.B,
                                  d.heads, d.kv_heads, d.hd);
    }
    timing_.compute_s += std::chrono::duration<double>(clock::now() - t0).count();
  }
};
using cp_attention = basic_cp_attention<>;

}  // namespace tessera::parallel
