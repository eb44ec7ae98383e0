// Device memory of the host emulation of CUDA (included by cuda_runtime_emulation.hpp): the
// registry of live allocations, their pages, and what a GPU would fault on that host memory
// would not.
//
// Each allocation is its own mapping, its bytes 256-byte aligned (cudaMalloc's promise) and
// ending where an inaccessible guard page begins; between its last byte and the next multiple
// of 256 lie guard bytes. Its pages are inaccessible to the host except while an emulated
// operation on it runs (a kernel whose pointer argument points into it, a copy, a memset, a
// cuBLASLt GEMM, an NCCL call: each holds a device_access over the allocations it names). So:
//   - host code that dereferences device memory -- which faults on a GPU -- faults here too,
//     and the fault handler names the allocation, the offset and the fix;
//   - a kernel that reaches an allocation none of its arguments points into faults the same
//     way (on a GPU it would read another buffer or fault);
//   - a read or write past an allocation's end faults on its guard page, named as such; a
//     write into the guard bytes before it fails the launch (cudaErrorIllegalAddress).
// Not caught: an access inside the slack up to the next multiple of 256 that only reads, an
// access before an allocation's start that stays inside its first page.
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <cuda_stream_order.hpp>

namespace tessera::cuda::emulation {

/// Everything the runtime keeps: live allocations (address -> bytes, device, pages), streams,
/// events, the kernels' shared-memory opt-ins.
struct runtime {
  std::mutex m;
  struct allocation {
    std::size_t bytes;
    int device;
    char* map = nullptr;  // its pages: [map, map + map_bytes), the last one the guard page
    std::size_t map_bytes = 0;
    int users = 0;  // operations running on it: while any, its pages are the host's
  };
  std::map<std::uintptr_t, allocation> allocations;
  std::set<const void*> streams, events;
  std::map<const void*, int> shared_optin;
  std::map<std::string, std::int64_t> launches;  // kernel launches by the kernel's name, as spelled
  static runtime& get() {
    static runtime r;
    return r;
  }
};

inline constexpr unsigned char guard_byte = 0xfd;
inline std::size_t rounded(std::size_t n) { return (n + 255) / 256 * 256; }
inline std::size_t page_bytes() {
  static const auto p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}
/// The allocation whose bytes, or one past its end (a kernel's end pointer), hold address a
/// (caller holds runtime::m), or allocations.end().
inline auto holding(runtime& r, std::uintptr_t a) {
  auto it = r.allocations.upper_bound(a);
  if (it == r.allocations.begin()) return r.allocations.end();
  --it;
  return a <= it->first + it->second.bytes ? it : r.allocations.end();
}
/// The pages of an allocation its operations unprotect: from its first byte's page to the guard page.
inline void set_access(const std::pair<const std::uintptr_t, runtime::allocation>& a, bool host) {
  char* from = a.second.map + (a.first - reinterpret_cast<std::uintptr_t>(a.second.map)) / page_bytes() * page_bytes();
  char* guard = a.second.map + a.second.map_bytes - page_bytes();
  mprotect(from, static_cast<std::size_t>(guard - from), host ? PROT_READ | PROT_WRITE : PROT_NONE);
}

namespace detail {
inline struct sigaction previous_segv {};
/// What a fault at `a` was, when it is in an emulated device allocation's pages (else "").
inline void describe_fault(std::uintptr_t a, char* msg, std::size_t size) {
  msg[0] = 0;
  auto& r = runtime::get();
  // another thread may be changing the registry: wait a little (this one never faults while
  // holding it), else give no name
  bool locked = false;
  for (int i = 0; i < 10000 && !(locked = r.m.try_lock()); ++i) sched_yield();
  if (!locked) return;
  for (const auto& [base, al] : r.allocations) {
    const auto m = reinterpret_cast<std::uintptr_t>(al.map);
    if (a < m || a >= m + al.map_bytes) continue;
    const auto guard = m + al.map_bytes - page_bytes();
    if (a >= base + al.bytes)
      std::snprintf(msg, size,
                    "an access %zu bytes past the end of the device allocation of %zu bytes at %p (device %d)%s: on a "
                    "GPU it reads another buffer or faults; check the bounds of the kernel or copy that ran",
                    static_cast<std::size_t>(a - base - al.bytes), al.bytes, reinterpret_cast<void*>(base), al.device,
                    a >= guard ? "" : " (into its padding)");
    else if (a < base)
      std::snprintf(msg, size, "an access %zu bytes before the start of the device allocation of %zu bytes at %p (device %d)",
                    static_cast<std::size_t>(base - a), al.bytes, reinterpret_cast<void*>(base), al.device);
    else
      std::snprintf(msg, size,
                    "byte %zu of the device allocation of %zu bytes at %p (device %d) was dereferenced outside every CUDA "
                    "operation on it: host code reading device memory (a GPU faults: copy it to the host with "
                    "cudaMemcpy first), or a kernel reaching a buffer none of its pointer arguments points into",
                    static_cast<std::size_t>(a - base), al.bytes, reinterpret_cast<void*>(base), al.device);
    break;
  }
  r.m.unlock();
}
inline void on_segv(int sig, siginfo_t* info, void* context) {
  char msg[768];
  describe_fault(reinterpret_cast<std::uintptr_t>(info->si_addr), msg, sizeof msg);
  if (msg[0]) {
    const char head[] = "tessera CUDA emulation: segmentation fault on device memory: ";
    (void)!write(2, head, sizeof head - 1);
    (void)!write(2, msg, std::strlen(msg));
    (void)!write(2, "\n", 1);
    std::abort();
  }
  // not ours: the handler there was before, or the default action
  if (previous_segv.sa_flags & SA_SIGINFO) {
    if (previous_segv.sa_sigaction) return previous_segv.sa_sigaction(sig, info, context);
  } else if (previous_segv.sa_handler != SIG_DFL && previous_segv.sa_handler != SIG_IGN) {
    return previous_segv.sa_handler(sig);
  }
  signal(SIGSEGV, SIG_DFL);  // the faulting access runs again and ends the process
}
/// Installs on_segv unless it is SIGSEGV's handler already; the one it replaces handles the
/// faults that are not on device memory. Called at every allocation and operation, since a
/// test framework may install its own handler after ours (doctest does, per test case).
inline void install_fault_handler() {
  struct sigaction now {};
  sigaction(SIGSEGV, nullptr, &now);
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_segv) return;
  static std::mutex m;
  std::lock_guard lock(m);
  struct sigaction sa {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &previous_segv);
  if ((previous_segv.sa_flags & SA_SIGINFO) && previous_segv.sa_sigaction == on_segv) previous_segv = {};
}
}  // namespace detail

/// Maps the pages of an allocation of `bytes` (> 0) on `device` and registers it: its bytes
/// start as 0xff bytes -- NaN as f32, bf16 or f16, -1 as an integer: cudaMalloc does not zero, and a
/// read before a write shows in the results --, then guard bytes; the host has no access to them
/// until an operation runs. Null when the mapping fails.
inline void* map_allocation(std::size_t bytes, int device) {
  detail::install_fault_handler();
  const std::size_t span = rounded(bytes), data = (span + page_bytes() - 1) / page_bytes() * page_bytes();
  void* m = mmap(nullptr, data + page_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  char* map = static_cast<char*>(m);
  char* p = map + data - span;
  std::memset(p, 0xff, bytes);
  std::memset(p + bytes, guard_byte, span - bytes);
  mprotect(map + data, page_bytes(), PROT_NONE);
  auto& r = runtime::get();
  std::lock_guard lock(r.m);
  auto it = r.allocations.insert_or_assign(reinterpret_cast<std::uintptr_t>(p),
                                           runtime::allocation{bytes, device, map, data + page_bytes(), 0}).first;
  set_access(*it, false);
  return p;
}
/// Unregisters and unmaps the allocation at p; false when p is none.
inline bool unmap_allocation(void* p) {
  auto& r = runtime::get();
  runtime::allocation al{};
  {
    std::lock_guard lock(r.m);
    auto it = r.allocations.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == r.allocations.end()) return false;
    al = it->second;
    r.allocations.erase(it);
  }
  munmap(al.map, al.map_bytes);
  return true;
}

/// While alive, the host (an emulated operation) may touch the allocations that the added
/// pointers point into; when it ends, they are inaccessible again (unless another operation
/// still runs on them). overran() checks their guard bytes meanwhile.
class device_access {
 public:
  device_access() { detail::install_fault_handler(); }
  device_access(const device_access&) = delete;
  device_access& operator=(const device_access&) = delete;
  /// Opens the allocation p points into (nothing when p is null or host memory) and returns
  /// the bytes [p, p + bytes) of it the operation reads or writes, for the order checker
  /// (none when bytes is 0 or they are not inside it).
  order::range add(const void* p, std::size_t bytes, bool write) { return enter(p, bytes, write, true); }
  /// The bytes [p, p + bytes) for the order checker as add() gives them, without opening
  /// their allocation: for what the operation names but its emulation never touches (cuBLASLt's
  /// workspace: opening its 32 MiB on every GEMM was most of an emulated recipe's time, in
  /// the kernel's page-table walks of mprotect).
  order::range named(const void* p, std::size_t bytes, bool write) { return enter(p, bytes, write, false); }
  /// Whether an operation wrote into the guard bytes of one of them.
  bool overran() const {
    auto& r = runtime::get();
    std::lock_guard lock(r.m);
    for (std::uintptr_t b : held_) {
      auto it = r.allocations.find(b);
      if (it == r.allocations.end()) continue;
      const auto* q = reinterpret_cast<const unsigned char*>(b);
      for (std::size_t i = it->second.bytes; i < rounded(it->second.bytes); ++i)
        if (q[i] != guard_byte) return true;
    }
    return false;
  }
  ~device_access() {
    auto& r = runtime::get();
    std::lock_guard lock(r.m);
    for (std::uintptr_t b : held_) {
      auto it = r.allocations.find(b);
      if (it != r.allocations.end() && --it->second.users == 0) set_access(*it, false);
    }
  }

 private:
  order::range enter(const void* p, std::size_t bytes, bool write, bool open) {
    if (!p) return {};
    auto& r = runtime::get();
    std::lock_guard lock(r.m);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto it = holding(r, a);
    if (it == r.allocations.end()) return {};
    if (open && std::find(held_.begin(), held_.end(), it->first) == held_.end()) {
      if (it->second.users++ == 0) set_access(*it, true);
      held_.push_back(it->first);
    }
    if (bytes == 0 || a + bytes > it->first + it->second.bytes) return {};
    return {it->first, a, a + bytes, write};
  }
  std::vector<std::uintptr_t> held_;  // the allocations' addresses
};

}  // namespace tessera::cuda::emulation
