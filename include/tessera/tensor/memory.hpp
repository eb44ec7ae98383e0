// tessera/tensor/memory.hpp: memory spaces and the tracking allocator.
//
// A memory space is a type with static allocate/deallocate, a name and whether the host may
// dereference its pointers. `host_space` is here; `cuda_space` (tensor/cuda_memory.hpp) has
// the same surface. Every allocation through a space is counted by memory_tracker<Space>
// (current and peak bytes, and an optional hook called on each allocation and release),
// which the trainer reads for its peak-memory metric.
//
// A space that data moves in (a `data_space`: what dist_tensor and the redistribute executor
// take) also has byte copies within the space, strided 2-D copies (cudaMemcpy2D's
// arguments), zeroing, copies to and from host memory, and a fence that returns when every
// copy and kernel issued on the space so far is complete (collectives then read finished
// data). `device_buffers` says its pointers are device memory: only a communicator that
// takes device buffers (nccl) may move them.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera {

/// Called after every tracked allocation (delta > 0) and release (delta < 0).
using allocation_hook = void (*)(std::string_view space, std::int64_t delta_bytes,
                                 std::int64_t current_bytes, void* user);

/// Byte counters of one memory space (thread-safe).
template <class Space>
struct memory_tracker {
  static std::int64_t current_bytes() noexcept { return state().current.load(); }
  static std::int64_t peak_bytes() noexcept { return state().peak.load(); }
  static std::int64_t allocations() noexcept { return state().count.load(); }
  /// Starts a new measurement: the peak becomes the current number of bytes.
  static void reset_peak() noexcept { state().peak.store(state().current.load()); }
  /// Installs (or, with nullptr, removes) the hook. Not synchronized with allocations.
  static void set_hook(allocation_hook hook, void* user = nullptr) noexcept {
    state().hook = hook;
    state().user = user;
  }
  static void record(std::int64_t delta) noexcept {
    auto& s = state();
    const std::int64_t now = s.current.fetch_add(delta) + delta;
    if (delta > 0) {
      s.count.fetch_add(1);
      std::int64_t p = s.peak.load();
      while (now > p && !s.peak.compare_exchange_weak(p, now)) {
      }
    }
    if (s.hook) s.hook(Space::name, delta, now, s.user);
  }

 private:
  struct counters {
    std::atomic<std::int64_t> current{0}, peak{0}, count{0};
    allocation_hook hook = nullptr;
    void* user = nullptr;
  };
  static counters& state() noexcept {
    static counters c;
    return c;
  }
};

/// Ordinary host memory, 64-byte aligned (one cache line, one AVX-512 vector).
struct host_space {
  static constexpr std::string_view name = "host";
  static constexpr bool host_accessible = true;
  static constexpr std::size_t alignment = 64;

  static void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = ::operator new(bytes, std::align_val_t{alignment});
    memory_tracker<host_space>::record(static_cast<std::int64_t>(bytes));
    return p;
  }
  static void deallocate(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    ::operator delete(p, std::align_val_t{alignment});
    memory_tracker<host_space>::record(-static_cast<std::int64_t>(bytes));
  }

  static constexpr bool device_buffers = false;
  static void copy(void* dst, const void* src, std::size_t bytes) noexcept {
    if (bytes && dst != src) std::memcpy(dst, src, bytes);
  }
  /// `height` rows of `width` bytes, row r at src + r * spitch -> dst + r * dpitch.
  static void copy_2d(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                      std::size_t height) noexcept {
    for (std::size_t r = 0; r < height; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  }
  static void zero(void* dst, std::size_t bytes) noexcept {
    if (bytes) std::memset(dst, 0, bytes);
  }
  static void from_host(void* dst, const void* src, std::size_t bytes) noexcept { copy(dst, src, bytes); }
  static void to_host(void* dst, const void* src, std::size_t bytes) noexcept { copy(dst, src, bytes); }
  static void fence() noexcept {}
};

/// What tensors and arenas require of a memory space.
template <class S>
concept memory_space = requires(std::size_t n, void* p) {
  { S::allocate(n) } -> std::same_as<void*>;
  S::deallocate(p, n);
  { S::name } -> std::convertible_to<std::string_view>;
  { S::host_accessible } -> std::convertible_to<bool>;
};

/// A memory space data moves in: copies, strided copies, zeroing, host transfers, a fence.
template <class S>
concept data_space = memory_space<S> && requires(void* d, const void* s, std::size_t n) {
  { S::device_buffers } -> std::convertible_to<bool>;
  S::copy(d, s, n);
  S::copy_2d(d, n, s, n, n, n);
  S::zero(d, n);
  S::from_host(d, s, n);
  S::to_host(d, s, n);
  S::fence();
};

/// A block of elements of a data_space (device memory: dist_tensor's blocks, a model's ids):
/// allocated zeroed, copyable (a copy within the space), movable.
template <class T, data_space Space>
class space_vector {
 public:
  space_vector() = default;
  explicit space_vector(std::size_t n) : p_(static_cast<T*>(Space::allocate(n * sizeof(T)))), n_(n) {
    Space::zero(p_, n * sizeof(T));
  }
  space_vector(const space_vector& o) : space_vector(o.n_) { Space::copy(p_, o.p_, n_ * sizeof(T)); }
  space_vector(space_vector&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  space_vector& operator=(space_vector o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~space_vector() { Space::deallocate(p_, n_ * sizeof(T)); }
  T* data() noexcept { return p_; }
  const T* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// A buffer of T in memory space Space: a std::vector on the host (what no tracker counts:
/// staging, ids), a space_vector elsewhere.
template <class T, class Space>
using space_buffer = std::conditional_t<Space::host_accessible, std::vector<T>, space_vector<T, Space>>;

/// Makes `b` hold at least n elements (a host vector resized to exactly n; device memory
/// re-allocated only when it grows). Contents are not kept.
template <class T, class Space>
void reserve_buffer(space_buffer<T, Space>& b, std::size_t n) {
  if constexpr (Space::host_accessible)
    b.resize(n);
  else if (b.size() < n)
    b = space_vector<T, Space>(n);
}

}  // namespace tessera
