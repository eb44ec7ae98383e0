// tessera/kernels/rounded_weights.hpp: the weights of a model's linears rounded to a bf16
// backend's GEMM operand type once a forward, and kept for the backward.
//
// A backend with bf16 GEMM operands (cpu_bf16_kernels, cuda_bf16_kernels: kernels/backend.hpp's
// bf16_operand_linears) rounds each GEMM's f32 operands before it multiplies. A weight is an
// operand twice a step: in the forward (out = in . W^T) and in the backward (din = dout . W).
// A model that owns its parameter arena (basic_llama_model constructed with allocate, as
// device_llama is) keeps one `rounded_weights<K>` store covering that arena. While the store is
// active on a thread (a `scope`, which the model opens around each part that runs linears):
//   - a forward GEMM multiplies the store's copy of its weight, rounding the weight into it
//     first unless the copy is fresh (refresh);
//   - a backward GEMM multiplies the copy its weight's latest forward used (find), instead of
//     rounding the weight again;
//   - the optimizer step (adamw_update, which the model's adamw_update calls) writes the
//     copies as it updates the weights (K::adamw_update_rounded: one pass), and marks them
//     fresh -- as Megatron's mixed-precision optimizer writes the bf16 model weights from its
//     f32 main weights.
// A copy stops being fresh when the model hands out its parameters for writing (params(),
// param(i), init_weights, load_params, bind() to other memory: the model calls invalidate()). The rounding is
// deterministic, so the results are the same bits as rounding for each GEMM: the saving is two
// passes over every weight a step (each reads 4 bytes and writes 2) for 2 more bytes written by
// AdamW, about 12 ms of a step of 18 of Llama 3 8B's blocks on an H200 (docs/performance.md).
// Only memory inside the covered arena is kept. A weight outside it that is already its GEMM
// operands -- an FSDP unit's gather in bf16 (mixed_precision<bf16, float>), whose values are
// bf16's -- is adopted by the FSDP runtime for as long as the unit stays gathered (adopt /
// release): its linears multiply the gathered operands, rounding nothing, and on a backend
// whose operands are bf16 codes (cuda_bf16_kernels) the unit holds those codes only, not an
// f32 copy (parallel/fsdp.hpp). Any other weight outside the arena is rounded for each GEMM
// (unkept() counts those elements).
// A parallel runtime's model covers the runtime's arena of stored blocks instead
// (basic_llama_model::keep_rounded_weights; train/parallel_llama.hpp): the weights computed on
// their stored blocks -- TP, PP and CP shards, where no FSDP gather moves them -- are kept, and a
// pipeline's microbatches multiply one copy a step instead of rounding each weight twice each.
// The store's memory (`capacity` elements of K::operand_type, allocated by cover()) is what
// the model's memory estimate counts (model/cuda_workspace.hpp's `kept`).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/thread_active.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

/// Whether backend K rounds GEMM operands (has K::operand_type, K::round_into and
/// K::adamw_update_rounded).
template <class K>
concept rounds_operands = requires(typename K::operand_type* y, float* p, const float* x, std::int64_t n,
                                   const cpu::adamw_config& c) {
  K::round_into(y, x, n);
  K::adamw_update_rounded(p, x, p, p, n, n, c, y);
};

/// The store the linears of this thread use is active() (nullptr: none), made so by a `scope`
/// (thread_active.hpp).
template <rounds_operands K>
class rounded_weights : public thread_active<rounded_weights<K>> {
 public:
  using operand_type = typename K::operand_type;

  rounded_weights() = default;
  rounded_weights(const rounded_weights&) = delete;
  rounded_weights& operator=(const rounded_weights&) = delete;
  rounded_weights(rounded_weights&&) noexcept = default;
  rounded_weights& operator=(rounded_weights&&) noexcept = default;

  /// Keeps the weights inside [base, base + n) floats: `capacity` operand elements in all.
  void cover(const float* base, std::int64_t n, std::int64_t capacity) {
    base_ = base, n_ = n, used_ = 0, rounded_ = 0, unkept_ = 0;
    entries_.clear();
    buf_ = capacity > 0 ? tensor<operand_type, typename K::space>({capacity}) : tensor<operand_type, typename K::space>{};
  }
  std::int64_t capacity() const noexcept { return buf_.numel(); }
  /// Elements rounded into the store by forwards since cover() (AdamW's writes not counted).
  std::int64_t rounded() const noexcept { return rounded_; }

  /// Elements the linears rounded for one GEMM because the store had no copy of the weight
  /// (refresh or find answered nullptr).
  std::int64_t unkept() const noexcept { return unkept_; }
  /// Uses of adopted weights (forwards and backwards).
  std::int64_t adopted_uses() const noexcept { return adopted_uses_; }

  /// Weight w [n], held outside the covered arena, is already its operands `at` [n] (an FSDP
  /// unit's bf16 gather, parallel/fsdp.hpp): the linears multiply `at` as it is, in forwards
  /// and backwards, until release(w). Not stale after invalidate(), not written by adamw_update.
  void adopt(const float* w, std::int64_t n, const operand_type* at) {
    release(w);
    adopted_.push_back({w, n, const_cast<operand_type*>(at), true});
  }
  void release(const float* w) noexcept {
    std::erase_if(adopted_, [w](const entry& e) { return e.w == w; });
  }

  /// A forward's operand of weight w [n]: an adopted weight's operands, or w rounded now into
  /// its place in the store; nullptr when w is not inside the covered arena or the store has
  /// no room (the caller rounds it into scratch).
  const operand_type* refresh(const float* w, std::int64_t n) {
    if (const operand_type* a = adopted(w, n)) return a;
    if (!covers(w, n)) return unkept_ += n, nullptr;
    entry* e = lookup(w);
    if (e == nullptr) {
      if (used_ + n > buf_.numel()) return unkept_ += n, nullptr;
      entries_.push_back({w, n, buf_.data() + used_, false});
      used_ += n;
      e = &entries_.back();
    } else if (e->n != n) {
      return unkept_ += n, nullptr;
    }
    if (!e->fresh) K::round_into(e->at, w, n), e->fresh = true, rounded_ += n;
    return e->at;
  }
  /// A backward's operand of weight w [n]: the copy its latest forward made (nullptr: none).
  const operand_type* find(const float* w, std::int64_t n) {
    if (const operand_type* a = adopted(w, n)) return a;
    const entry* e = covers(w, n) ? lookup(w) : nullptr;
    if (e != nullptr && e->n == n) return e->at;
    return unkept_ += n, nullptr;
  }

  /// The weights may have changed: the next forward rounds each again.
  void invalidate() noexcept {
    for (entry& e : entries_) e.fresh = false;
  }
  /// One AdamW step (K::adamw_update's) over the covered arena p [n], which writes the copies
  /// of the weights the store keeps as it updates them (K::adamw_update_rounded) and marks them
  /// fresh. The same arithmetic per element as one K::adamw_update over the arena.
  void adamw_update(float* p, const float* g, float* m, float* v, std::int64_t n, std::int64_t step,
                    const cpu::adamw_config& cfg) {
    check(p == base_ && n == n_, "rounded_weights::adamw_update: not the arena this store covers");
    std::vector<entry*> order;
    for (entry& e : entries_) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const entry* a, const entry* b) { return a->w < b->w; });
    std::int64_t at = 0;
    for (entry* e : order) {
      const std::int64_t off = e->w - base_;
      if (off > at) K::adamw_update(p + at, g + at, m + at, v + at, off - at, step, cfg);
      K::adamw_update_rounded(p + off, g + off, m + off, v + off, e->n, step, cfg, e->at);
      e->fresh = true;
      at = off + e->n;
    }
    if (n > at) K::adamw_update(p + at, g + at, m + at, v + at, n - at, step, cfg);
  }

 private:
  struct entry {
    const float* w;
    std::int64_t n;
    operand_type* at;
    bool fresh;  // equal to the weight as it is now
  };
  const float* base_ = nullptr;
  std::int64_t n_ = 0, used_ = 0, rounded_ = 0, unkept_ = 0, adopted_uses_ = 0;
  tensor<operand_type, typename K::space> buf_;
  std::vector<entry> entries_;  // a few per block: searched from the latest
  std::vector<entry> adopted_;  // the gathered units' weights (a few blocks' worth)

  const operand_type* adopted(const float* w, std::int64_t n) noexcept {
    for (const entry& e : adopted_)
      if (e.w == w && e.n == n) return ++adopted_uses_, e.at;
    return nullptr;
  }

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
struct no_rounded_weights {  // a backend that does not round: nothing kept
  void cover(const float*, std::int64_t, std::int64_t) noexcept {}
  void invalidate() noexcept {}
  std::int64_t rounded() const noexcept { return 0; }
  std::int64_t unkept() const noexcept { return 0; }
  std::int64_t adopted_uses() const noexcept { return 0; }
};
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
/// One AdamW step over a model's arena p [n] whose store is s: rounded_weights::adamw_update
/// when s keeps weights, else K::adamw_update.
template <class K>
void adamw_update_kept(rounded_weights_of<K>& s, float* p, const float* g, float* m, float* v, std::int64_t n,
                       std::int64_t step, const cpu::adamw_config& cfg) {
  if constexpr (rounds_operands<K>)
    if (s.capacity() > 0) return s.adamw_update(p, g, m, v, n, step, cfg);
  K::adamw_update(p, g, m, v, n, step, cfg);
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
