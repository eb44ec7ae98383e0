// A memory space for host tests of the path device memory takes (dist_tensor, the redistribute
// executor, a model on a kernel backend whose memory is not the host's): host memory that the
// library may reach only through the space's operations (host_accessible = false, so tensor
// spans and the host-only paths are off), with every operation counted. Allocations are
// zeroed, as cuda_space's are. It moves host buffers (device_buffers = false), so the threads
// communicator carries it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>

#include <tessera/tensor/memory.hpp>

namespace staged {

struct counters {
  std::atomic<std::int64_t> copies{0}, copies_2d{0}, zeros{0}, from_host{0}, to_host{0}, fences{0};
};
inline counters& count() {
  static counters c;
  return c;
}

struct space {
  static constexpr std::string_view name = "staged";
  static constexpr bool host_accessible = false;
  static constexpr bool device_buffers = false;
  static constexpr std::size_t alignment = 64;

  static void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = ::operator new(bytes, std::align_val_t{alignment});
    std::memset(p, 0, bytes);
    tessera::memory_tracker<space>::record(static_cast<std::int64_t>(bytes));
    return p;
  }
  static void deallocate(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    ::operator delete(p, std::align_val_t{alignment});
    tessera::memory_tracker<space>::record(-static_cast<std::int64_t>(bytes));
  }
  static void copy(void* d, const void* s, std::size_t n) {
    ++count().copies;
    if (n && d != s) std::memcpy(d, s, n);
  }
  static void copy_2d(void* d, std::size_t dp, const void* s, std::size_t sp, std::size_t w, std::size_t h) {
    ++count().copies_2d;
    for (std::size_t r = 0; r < h; ++r) std::memcpy(static_cast<char*>(d) + r * dp, static_cast<const char*>(s) + r * sp, w);
  }
  static void zero(void* d, std::size_t n) {
    ++count().zeros;
    if (n) std::memset(d, 0, n);
  }
  static void from_host(void* d, const void* s, std::size_t n) {
    ++count().from_host;
    if (n) std::memcpy(d, s, n);
  }
  static void to_host(void* d, const void* s, std::size_t n) {
    ++count().to_host;
    if (n) std::memcpy(d, s, n);
  }
  static void fence() { ++count().fences; }
};
static_assert(tessera::data_space<space>);

}  // namespace staged
