// tessera/tensor/detail/result_pool.hpp: the cache of result buffers behind
// dist_tensor::redistribute<L>() (as a caching allocator keeps freed blocks): a
// dist_tensor's local buffer goes back to the pool when the tensor dies, and a fresh result
// of n elements reuses a cached buffer of n to 2n elements, so a transition called in a
// loop does not fault in new pages on every call. Users reach it through
// tessera::result_pool (dist_tensor.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace tessera::detail {

/// What every element type's pool shares: the byte limit and the bytes held.
struct result_pool_state {
  static inline std::atomic<std::int64_t> limit{std::int64_t{1} << 30};  // 1 GiB
  static inline std::atomic<std::int64_t> held{0};
  static inline std::atomic<std::int64_t> hits{0}, misses{0};
  /// clear() of every element type's pool that has been used.
  static std::mutex& clearers_mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<void (*)() noexcept>& clearers() {
    static auto* v = new std::vector<void (*)() noexcept>;  // never destroyed: see cache()
    return *v;
  }
};

/// Buffers of at least min_bytes are cached; smaller ones cost little to allocate.
inline constexpr std::size_t result_pool_min_bytes = std::size_t{64} << 10;

template <class T>
class result_pool_of {
 public:
  /// A buffer of exactly n elements: a cached one of n to 2n elements (contents
  /// unspecified), or a new zero-filled one.
  static std::vector<T> take(std::size_t n) {
    if (n * sizeof(T) >= result_pool_min_bytes) {
      auto& c = cache();
      std::lock_guard<std::mutex> lock(mutex());
      std::size_t best = c.size();
      for (std::size_t i = 0; i < c.size(); ++i)
        if (c[i].size() >= n && c[i].size() <= 2 * n && (best == c.size() || c[i].size() < c[best].size())) best = i;
      if (best < c.size()) {
        std::vector<T> v = std::move(c[best]);
        c[best] = std::move(c.back());
        c.pop_back();
        result_pool_state::held -= static_cast<std::int64_t>(v.size() * sizeof(T));
        ++result_pool_state::hits;
        v.resize(n);  // shrinks: writes nothing
        return v;
      }
      ++result_pool_state::misses;
    }
    return std::vector<T>(n);
  }
  /// Keeps `v` for a later take() unless it is small or the pool would exceed its limit.
  static void give(std::vector<T>&& v) noexcept {
    const auto bytes = static_cast<std::int64_t>(v.size() * sizeof(T));
    if (v.size() * sizeof(T) < result_pool_min_bytes || result_pool_state::held + bytes > result_pool_state::limit) return;
    try {
      auto& c = cache();
      std::lock_guard<std::mutex> lock(mutex());
      c.push_back(std::move(v));
      result_pool_state::held += bytes;
    } catch (...) {  // (a failed push_back keeps v: it is freed by the caller)
    }
  }
  static void clear() noexcept {
    auto& c = cache();
    std::lock_guard<std::mutex> lock(mutex());
    for (const auto& v : c) result_pool_state::held -= static_cast<std::int64_t>(v.size() * sizeof(T));
    c.clear();
    c.shrink_to_fit();
  }

 private:
  static std::mutex& mutex() {
    static auto* m = new std::mutex;
    return *m;
  }
  // Never destroyed: a dist_tensor that outlives main (a static) still gives its buffer back.
  static std::vector<std::vector<T>>& cache() {
    static auto* c = [] {
      std::lock_guard<std::mutex> lock(result_pool_state::clearers_mutex());
      result_pool_state::clearers().push_back(&result_pool_of::clear);
      return new std::vector<std::vector<T>>;
    }();
    return *c;
  }
};

}  // namespace tessera::detail
