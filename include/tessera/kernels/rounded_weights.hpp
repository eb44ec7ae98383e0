// tessera/kernels/rounded_weights.hpp: the weights of a model's linears rounded to a bf16
// backend's GEMM operand type once a forward, and kept for the backward.
//
// A backend with bf16 GEMM operands (cpu_bf16_kernels, cuda_bf16_kernels: kernels/backend.hpp's
// bf16_operand_linears) rounds each GEMM's f32 operands before it multiplies. A weight is an
// operand twice a step: in the forward (out = in . W^T) and in the backward (din = dout . W).
// A model that owns its parameter arena (basic_llama_model constructed with allocate, as
// device_llama is) keeps one `rounded_weights<K>` store covering that arena. While the store is
// active on a thread (a `scope`, which the model opens around each part that runs linears):
//   - a forward GEMM rounds its weight into the store's place for it (refresh), as it would
//     have rounded it into scratch -- a forward always rounds, so what it multiplies is the
//     weight as it is now;
//   - a backward GEMM multiplies the copy its weight's latest forward made (find), instead
//     of rounding the weight again.
// The rounding is deterministic, so the results are the same bits as rounding each time: the
// saving is one pass over every weight a step (read 4 bytes, write 2), about 7 ms of a step of
// 18 of Llama 3 8B's blocks on an H200 (docs/performance.md). torch.autocast keeps its weight
// casts the same way (its cache, from a forward to the end of the autocast region).
// Only memory inside the covered arena is kept: a weight outside it -- an FSDP unit's gathered
// buffer, which holds another block's weights the next time -- is rounded each time as before.
// The store's memory (`capacity` elements of K::operand_type, allocated by cover()) is what
// the model's memory estimate counts (model/cuda_workspace.hpp's `kept`).
#pragma once

#include <cstdint>
#include <vector>

#include <tessera/tensor/tensor.hpp>

namespace tessera {

/// Whether backend K rounds GEMM operands (has K::operand_type and K::round_into).
template <class K>
concept rounds_operands = requires(typename K::operand_type* y, const float* x, std::int64_t n) {
  K::round_into(y, x, n);
};

template <rounds_operands K>
class rounded_weights {
 public:
  using operand_type = typename K::operand_type;

  rounded_weights() = default;
  rounded_weights(const rounded_weights&) = delete;
  rounded_weights& operator=(const rounded_weights&) = delete;
  rounded_weights(rounded_weights&&) noexcept = default;
  rounded_weights& operator=(rounded_weights&&) noexcept = default;

  /// Keeps the weights inside [base, base + n) floats: `capacity` operand elements in all.
  void cover(const float* base, std::int64_t n, std::int64_t capacity) {
    base_ = base, n_ = n, used_ = 0;
    entries_.clear();
    buf_ = capacity > 0 ? tensor<operand_type, typename K::space>({capacity}) : tensor<operand_type, typename K::space>{};
  }
  std::int64_t capacity() const noexcept { return buf_.numel(); }

  /// A forward's operand of weight w [n]: w rounded now into its place in the store; nullptr
  /// when w is not inside the covered arena or the store has no room (the caller rounds it
  /// into scratch).
  const operand_type* refresh(const float* w, std::int64_t n) {
    if (!covers(w, n)) return nullptr;
    entry* e = lookup(w);
    if (e == nullptr) {
      if (used_ + n > buf_.numel()) return nullptr;
      entries_.push_back({w, n, buf_.data() + used_});
      used_ += n;
      e = &entries_.back();
    } else if (e->n != n) {
      return nullptr;
    }
    K::round_into(e->at, w, n);
    return e->at;
  }
  /// A backward's operand of weight w [n]: the copy its latest forward made (nullptr: none).
  const operand_type* find(const float* w, std::int64_t n) {
    const entry* e = covers(w, n) ? lookup(w) : nullptr;
    return e != nullptr && e->n == n ? e->at : nullptr;
  }

  /// The store the linears of this thread use (nullptr: none).
  static rounded_weights*& active() noexcept {
    thread_local rounded_weights* a = nullptr;
    return a;
  }
  /// Makes a store (or none) the thread's active one until the scope ends.
  class scope {
   public:
    explicit scope(rounded_weights* s) noexcept : prev_(active()) { active() = s; }
    ~scope() { active() = prev_; }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    rounded_weights* prev_;
  };

 private:
  struct entry {
    const float* w;
    std::int64_t n;
    operand_type* at;
  };
  const float* base_ = nullptr;
  std::int64_t n_ = 0, used_ = 0;
  tensor<operand_type, typename K::space> buf_;
  std::vector<entry> entries_;  // a few per block: searched from the latest

  bool covers(const float* w, std::int64_t n) const noexcept {
    if (base_ == nullptr || n > n_) return false;  // addresses compared as integers: w may be in any allocation
    const auto at = reinterpret_cast<std::uintptr_t>(w), lo = reinterpret_cast<std::uintptr_t>(base_);
    return at >= lo && (at - lo) / sizeof(float) <= static_cast<std::uintptr_t>(n_ - n);
  }
  entry* lookup(const float* w) noexcept {
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
      if (it->w == w) return &*it;
    return nullptr;
  }
};

namespace detail {
struct no_rounded_weights {};
template <class K>
struct rounded_weights_or_none {
  using type = no_rounded_weights;
};
template <rounds_operands K>
struct rounded_weights_or_none<K> {
  using type = rounded_weights<K>;
};
}  // namespace detail

/// rounded_weights<K> for a backend that rounds its GEMM operands, else an empty type.
template <class K>
using rounded_weights_of = typename detail::rounded_weights_or_none<K>::type;

/// A scope that makes store `s` the thread's active one (nothing for a backend that does not
/// round its operands).
template <class K>
auto use_rounded_weights(rounded_weights_of<K>& s) {
  if constexpr (rounds_operands<K>)
    return typename rounded_weights<K>::scope(&s);
  else
    return 0;
}
/// The bytes store `s` holds (0 for a backend that does not round its operands).
template <class K>
std::int64_t rounded_weight_bytes(const rounded_weights_of<K>& s) {
  if constexpr (rounds_operands<K>)
    return s.capacity() * static_cast<std::int64_t>(sizeof(typename K::operand_type));
  else
    return 0;
}

}  // namespace tessera
