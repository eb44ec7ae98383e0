// Stream ordering for the host emulation of CUDA (cuda_runtime_emulation.hpp): a
// happens-before checker of device memory across streams. The emulation runs every call
// when it is issued, so a program that forgets to order two streams still computes the right
// numbers here -- and on a GPU reads half-written data. This finds such programs: every
// operation that touches device memory (a kernel, a copy, a memset, a cuBLASLt GEMM, an NCCL
// call) is an event on its stream, stamped with the stream's vector clock, and two
// operations on different streams that touch the same bytes, one of them writing, must be
// ordered -- by a stream waiting on an event recorded after the other, by the host waiting
// (stream, event or device synchronization, a copy to pageable host memory, cudaFree) before
// it issued the second, or by the legacy default stream's implicit ordering with the
// blocking streams of its device. An unordered pair is a race: it is reported naming both
// operations, their streams and the bytes, and the process aborts (tests of the checker
// itself set `policy` to record instead and read take_races()).
//
// What it knows of a kernel's reach: only its pointer arguments -- the first byte of each,
// written when the parameter points to non-const, read when to const. A race on the bytes a
// kernel reaches past its arguments' first is not found; a copy's, a memset's, a GEMM's and
// an NCCL call's bytes are exact. Host threads order their own calls only: one thread
// waiting for a stream does not order another thread's later calls (tessera's ranks each
// drive their own device).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessera::cuda::emulation::order {

/// A vector clock: entry i counts the operations of stream context i this one is ordered after.
using vclock = std::vector<std::uint64_t>;
inline void join(vclock& into, const vclock& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (std::size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}
inline std::uint64_t entry(const vclock& c, int i) {
  return static_cast<std::size_t>(i) < c.size() ? c[static_cast<std::size_t>(i)] : 0;
}

/// Bytes [lo, hi) of the device allocation at `base` an operation reads or writes.
struct range {
  std::uintptr_t base = 0, lo = 0, hi = 0;
  bool write = false;
};
/// One recorded access: its bytes, the stream context and that context's count at it.
struct access {
  std::uintptr_t lo, hi;
  int context;
  std::uint64_t epoch;
  bool write;
  std::string what;
};

enum class on_race { abort, record };
/// What a race does: abort the process with its report (default), or only record it.
inline std::atomic<on_race> policy{on_race::abort};

struct context {
  enum kind_t { legacy, blocking, non_blocking } kind;
  int device;
  vclock clock;
};

struct state {
  std::mutex m;
  std::vector<context> contexts;
  std::map<int, int> legacy_of;                          // device -> its legacy default stream's context
  std::map<std::uintptr_t, std::vector<access>> shadow;  // allocation base -> its recorded accesses
  std::vector<std::string> races;
  static state& get() {
    static state s;
    return s;
  }
};
/// What this host thread has waited for.
inline thread_local vclock host;

namespace detail {
inline int add_context(state& s, context::kind_t k, int device) {
  s.contexts.push_back({k, device, {}});
  return static_cast<int>(s.contexts.size()) - 1;
}
inline int legacy_locked(state& s, int device) {
  auto it = s.legacy_of.find(device);
  if (it != s.legacy_of.end()) return it->second;
  const int c = add_context(s, context::legacy, device);
  s.legacy_of[device] = c;
  return c;
}
inline std::string stream_name(const state& s, int c) {
  const context& x = s.contexts[static_cast<std::size_t>(c)];
  const std::string dev = " of device " + std::to_string(x.device);
  if (x.kind == context::legacy) return "the legacy default stream" + dev;
  return std::string(x.kind == context::blocking ? "blocking" : "non-blocking") + " stream #" + std::to_string(c) + dev;
}
inline std::string hex(std::uintptr_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
}  // namespace detail

/// A new stream's context (cudaStreamCreateWithFlags on `device`).
inline int new_stream(int device, bool blocking) {
  auto& s = state::get();
  std::lock_guard lock(s.m);
  return detail::add_context(s, blocking ? context::blocking : context::non_blocking, device);
}
/// The context of `device`'s legacy default stream (stream 0).
inline int legacy_stream(int device) {
  auto& s = state::get();
  std::lock_guard lock(s.m);
  return detail::legacy_locked(s, device);
}

/// An operation `what` on stream context `c`, issued by this host thread, touching `ranges`:
/// ordered after what the host has waited for, after the stream's earlier operations and, on
/// the legacy stream and the blocking ones, after each other's; checked against every
/// earlier access to the same bytes. `host_waits`: the call returns once the operation is
/// done (a copy to pageable host memory). Returns the stream's clock after the operation.
inline vclock issue(int c, const std::string& what, std::span<const range> ranges, bool host_waits = false) {
  auto& s = state::get();
  std::unique_lock lock(s.m);
  const auto kind = s.contexts[static_cast<std::size_t>(c)].kind;
  const int device = s.contexts[static_cast<std::size_t>(c)].device;
  const int legacy = kind == context::blocking ? detail::legacy_locked(s, device) : -1;  // may grow contexts
  context& me = s.contexts[static_cast<std::size_t>(c)];
  join(me.clock, host);
  if (kind == context::legacy) {
    for (const context& y : s.contexts)
      if (y.kind == context::blocking && y.device == device) join(me.clock, y.clock);
  } else if (legacy >= 0) {
    join(me.clock, s.contexts[static_cast<std::size_t>(legacy)].clock);
  }
  if (me.clock.size() <= static_cast<std::size_t>(c)) me.clock.resize(static_cast<std::size_t>(c) + 1, 0);
  const std::uint64_t epoch = ++me.clock[static_cast<std::size_t>(c)];
  std::vector<std::string> found;
  for (const range& r : ranges) {
    if (r.hi <= r.lo) continue;
    auto& list = s.shadow[r.base];
    for (const access& a : list) {
      if (a.hi <= r.lo || r.hi <= a.lo || !(a.write || r.write) || a.epoch <= entry(me.clock, a.context)) continue;
      const std::uintptr_t lo = std::max(a.lo, r.lo), hi = std::min(a.hi, r.hi);
      found.push_back("stream race on device memory: " + what + " on " + detail::stream_name(s, c) +
                      (r.write ? " writes" : " reads") + " bytes [" + std::to_string(lo - r.base) + ", " +
                      std::to_string(hi - r.base) + ") of the allocation at " + detail::hex(r.base) + ", which " +
                      a.what + " on " + detail::stream_name(s, a.context) + (a.write ? " wrote" : " read") +
                      " with nothing ordering the two: a GPU may run them in either order or at once. Make the "
                      "later wait for the earlier (cudaStreamWaitEvent on an event recorded after it, or a "
                      "stream or device synchronization before issuing it).");
    }
    // an access ordered before this one whose bytes this one covers adds nothing, unless it
    // wrote and this one only reads (a later read may race with that write, not with this read)
    std::erase_if(list, [&](const access& a) {
      return a.lo >= r.lo && a.hi <= r.hi && a.epoch <= entry(me.clock, a.context) && (r.write || !a.write);
    });
    list.push_back({r.lo, r.hi, c, epoch, r.write, what});
  }
  vclock after = me.clock;
  if (host_waits) join(host, after);
  if (!found.empty()) {
    s.races.insert(s.races.end(), found.begin(), found.end());
    if (policy.load() == on_race::abort) {
      for (const auto& f : found) std::fprintf(stderr, "tessera CUDA emulation: %s\n", f.c_str());
      std::fflush(stderr);
      std::abort();
    }
  }
  return after;
}

/// The host waits for everything issued to context `c` so far (cudaStreamSynchronize).
inline void host_waits_for(int c) {
  auto& s = state::get();
  std::lock_guard lock(s.m);
  join(host, s.contexts[static_cast<std::size_t>(c)].clock);
}
/// The host waits for every stream of `device` (cudaDeviceSynchronize, cudaFree).
inline void host_waits_for_device(int device) {
  auto& s = state::get();
  std::lock_guard lock(s.m);
  for (const context& x : s.contexts)
    if (x.device == device) join(host, x.clock);
}
/// Context `c`'s later operations wait for `clock` (cudaStreamWaitEvent on an event).
inline void stream_waits(int c, const vclock& clock) {
  auto& s = state::get();
  std::lock_guard lock(s.m);
  join(s.contexts[static_cast<std::size_t>(c)].clock, clock);
}
/// The host waits for `clock` (cudaEventSynchronize, a cudaEventQuery that reports done).
inline void host_waits_for(const vclock& clock) { join(host, clock); }
/// Drops the accesses recorded in the allocation at `base` (it is freed).
inline void forget(std::uintptr_t base) {
  auto& s = state::get();
  std::lock_guard lock(s.m);
  s.shadow.erase(base);
}
/// The races recorded so far (under on_race::record), and clears them.
inline std::vector<std::string> take_races() {
  auto& s = state::get();
  std::lock_guard lock(s.m);
  return std::exchange(s.races, {});
}

}  // namespace tessera::cuda::emulation::order
