// tessera/tensor/memory.hpp: memory spaces and the tracking allocator.
//
// A memory space is a type with static allocate/deallocate, a name and whether the host may
// dereference its pointers. `host_space` is the only one here; a CUDA device space slots in
// later with the same surface. Every allocation through a space is counted by
// memory_tracker<Space> (current and peak bytes, and an optional hook called on each
// allocation and release), which the trainer reads for its peak-memory metric.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string_view>

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
};

/// What tensors and arenas require of a memory space.
template <class S>
concept memory_space = requires(std::size_t n, void* p) {
  { S::allocate(n) } -> std::same_as<void*>;
  S::deallocate(p, n);
  { S::name } -> std::convertible_to<std::string_view>;
  { S::host_accessible } -> std::convertible_to<bool>;
};


}  // namespace tessera
