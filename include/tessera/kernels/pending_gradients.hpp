// tessera/kernels/pending_gradients.hpp: gradients zeroed in name, written by the GEMM that
// would have added to them first.
//
// Every backward accumulates into the parameter gradients (docs/kernels.md, the gradient rule),
// so a step zeroes them first: at Llama 3 8B's 18-block benchmark a memset of 19.9 GB, after
// which each weight-gradient GEMM reads back the zeros it adds to (beta 1). A model that owns
// its gradient arena (basic_llama_model constructed with allocate, as device_llama is) keeps a
// `pending_gradients` over it instead: zero_grad() marks every tensor pending -- zero in name,
// its memory untouched -- and
//   - a backward part opens a `scope` on its thread; the first weight-gradient GEMM into a
//     pending tensor writes it (beta 0: the backends ask writes_gradient<K>, which takes the
//     tensor off the list) instead of adding to it;
//   - a part zeroes, before it runs, the pending tensors of its own that no GEMM writes (the
//     norms' weights, the embedding), and after it runs every pending tensor of its own;
//   - the model's accessors of its gradients (grads(), grad(i), block_grads_of) zero every
//     pending tensor first, so that no caller sees one.
// A GEMM whose output lies inside a pending tensor without covering it zeroes that tensor and
// adds, as before. The results are the same bits (0 + x is x) -- tests/model/test_device_llama.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/thread_active.hpp>
#include <tessera/tensor/arena.hpp>

namespace tessera {

/// The store the thread's GEMMs consult is active() (nullptr: none, every GEMM adds), made so by
/// a `scope` (thread_active.hpp).
class pending_gradients : public thread_active<pending_gradients> {
 public:
  /// The tensors of the gradient arena: tensor i is [offsets[i], offsets[i] + sizes[i]) floats
  /// from `base`, the offsets increasing. None is pending.
  void cover(float* base, std::vector<std::int64_t> offsets, std::vector<std::int64_t> sizes) {
    check(offsets.size() == sizes.size() && std::is_sorted(offsets.begin(), offsets.end()),
          "pending_gradients::cover: one size per offset, the offsets increasing");
    base_ = base, offset_ = std::move(offsets), size_ = std::move(sizes);
    pending_.assign(offset_.size(), 0);
    count_ = 0;
  }
  /// The slots of an arena at `base`.
  void cover(float* base, std::span<const arena_slot> slots) {
    std::vector<std::int64_t> offsets, sizes;
    for (const arena_slot& s : slots)
      offsets.push_back(static_cast<std::int64_t>(s.offset)), sizes.push_back(static_cast<std::int64_t>(s.numel));
    cover(base, std::move(offsets), std::move(sizes));
  }
  bool covers() const noexcept { return base_ != nullptr; }
  /// zero_grad(): every tensor zero in name.
  void defer_all() noexcept {
    std::fill(pending_.begin(), pending_.end(), std::uint8_t{1});
    count_ = static_cast<std::int64_t>(pending_.size());
  }
  bool any() const noexcept { return count_ > 0; }
  bool pending(std::int64_t i) const { return pending_.at(static_cast<std::size_t>(i)) != 0; }

  /// For a GEMM about to add into p [n]: true when p is exactly a pending tensor, which the GEMM
  /// then writes (it is no longer pending); a pending tensor that p lies in without covering
  /// it is zeroed first (zero(ptr, count)) and false returned, as for memory not pending.
  template <class Zero>
  bool take(float* p, std::int64_t n, Zero&& zero) {
    const std::int64_t i = tensor_of(p);
    if (i < 0 || !pending(i)) return false;
    if (p == base_ + offset_[static_cast<std::size_t>(i)] && n == size_[static_cast<std::size_t>(i)]) {
      unmark(i);
      return true;
    }
    settle(i, zero);
    return false;
  }
  /// Zeroes tensor i if it is pending.
  template <class Zero>
  void settle(std::int64_t i, Zero&& zero) {
    if (!pending(i)) return;
    zero(base_ + offset_[static_cast<std::size_t>(i)], size_[static_cast<std::size_t>(i)]);
    unmark(i);
  }
  template <class Zero>
  void settle_all(Zero&& zero) {
    for (std::int64_t i = 0; any() && i < static_cast<std::int64_t>(pending_.size()); ++i) settle(i, zero);
  }

 private:
  float* base_ = nullptr;
  std::vector<std::int64_t> offset_, size_;
  std::vector<std::uint8_t> pending_;
  std::int64_t count_ = 0;

  /// The tensor p lies in, or -1.
  std::int64_t tensor_of(const float* p) const {
    const auto addr = reinterpret_cast<std::uintptr_t>(p), base = reinterpret_cast<std::uintptr_t>(base_);
    if (base_ == nullptr || addr < base || (addr - base) % sizeof(float) != 0) return -1;
    const auto at = static_cast<std::int64_t>((addr - base) / sizeof(float));
    const auto it = std::upper_bound(offset_.begin(), offset_.end(), at);
    if (it == offset_.begin()) return -1;
    const auto i = static_cast<std::size_t>(it - offset_.begin() - 1);
    return at < offset_[i] + size_[i] ? static_cast<std::int64_t>(i) : -1;
  }
  void unmark(std::int64_t i) {
    pending_[static_cast<std::size_t>(i)] = 0;
    --count_;
  }
};

/// For backend K's weight-gradient GEMM into dw [n] (nullptr: none): whether it writes dw
/// (beta 0) because dw is a pending tensor of the thread's active store (pending_gradients::take).
template <class K>
bool writes_gradient(float* dw, std::int64_t n) {
  pending_gradients* p = pending_gradients::active();
  return dw != nullptr && p != nullptr && p->any() && p->take(dw, n, [](float* x, std::int64_t m) { K::zero(x, m); });
}
/// For a backend kernel that only adds into dw [n]: zeroes it first if it is pending.
template <class K>
void settle_gradient(float* dw, std::int64_t n) {
  if (writes_gradient<K>(dw, n)) K::zero(dw, n);
}

/// A backward part's gradients, tensors [first, first + count) of `p`: makes p the thread's
/// active store while the part runs, and zeroes now the pending tensors of the part that no
/// GEMM writes (by_gemm(i) false); done(), when the part has run, zeroes the rest still pending.
template <class K>
class pending_part {
 public:
  template <class ByGemm>
  pending_part(pending_gradients& p, std::int64_t first, std::int64_t count, ByGemm&& by_gemm)
      : p_(p), scope_(&p), first_(first), count_(count) {
    for (std::int64_t i = first; p_.any() && i < first + count; ++i)
      if (!by_gemm(i)) p_.settle(i, zero);
  }
  void done() {
    for (std::int64_t i = first_; p_.any() && i < first_ + count_; ++i) p_.settle(i, zero);
  }

 private:
  pending_gradients& p_;
  pending_gradients::scope scope_;
  std::int64_t first_, count_;
  static void zero(float* x, std::int64_t n) { K::zero(x, n); }
};

}  // namespace tessera
