// tessera/comm/detail/threads_group.hpp: shared state of one group of the threads backend.
//
// Data path (single copy): every rank posts pointers to its own send and receive buffers
// in a slot; once all have arrived, the collective is cut into chunk tasks (256 KiB) that
// any waiting rank takes from an atomic counter, reading peers' buffers directly and
// writing into peers' buffers directly. No staging buffer; a chunk read once is written to
// every destination while it is in cache. A rank that is still computing after issuing
// its call does not hold the others up: the waiting ranks do its share.
//
// Slots: collective k of a group uses slot k % slots_per_group. The slot is recycled for
// k + slots_per_group once every member has acknowledged k (in wait(), or implicitly when
// it issues k + slots_per_group, helping to finish k first).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <source_location>
#include <string>
#include <tessera/comm/detail/reduce.hpp>
#include <tessera/comm/detail/sync.hpp>
#include <tessera/comm/types.hpp>
#include <tuple>
#include <vector>

namespace tessera::comm::detail {

inline constexpr int slots_per_group = 8;
inline constexpr std::size_t chunk_bytes = std::size_t{256} << 10;

struct coll_slot {
  std::mutex m;
  std::atomic<std::uint64_t> seq{0};  // the collective this slot serves now
  // guarded by m until `ready`:
  int arrived = 0;
  call_desc desc{};
  std::source_location first_loc{};
  int first_rank = -1;
  std::vector<const void*> src;
  std::vector<void*> dst;
  std::vector<char> posted;
  std::size_t count = 0, elem = 0, chunk = 0, per_block = 0, ntasks = 0;
  std::atomic<bool> ready{false};
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::atomic<bool> complete{false};
  std::atomic<int> acks{0};
  std::atomic<bool> failed{false};
  std::string error;  // written under m before `failed` is set
};

struct p2p_op {
  const void* src = nullptr;
  void* dst = nullptr;
  call_desc desc{};
  std::source_location loc{};
  int rank = -1;  // world rank of the caller
  std::atomic<int> state{0};  // 0 pending, 1 done, 2 failed
  std::string error;          // written before state = 2
};

struct p2p_channel {
  std::deque<std::shared_ptr<p2p_op>> sends, recvs;
};

struct group_state {
  explicit group_state(std::vector<int> world_ranks) : ranks(std::move(world_ranks)) {
    for (int s = 0; s < slots_per_group; ++s) {
      auto& sl = slots[static_cast<std::size_t>(s)];
      sl.seq.store(static_cast<std::uint64_t>(s));
      sl.src.assign(ranks.size(), nullptr);
      sl.dst.assign(ranks.size(), nullptr);
      sl.posted.assign(ranks.size(), 0);
    }
  }
  int size() const noexcept { return static_cast<int>(ranks.size()); }

  std::vector<int> ranks;  // world ranks, in group order
  std::array<coll_slot, slots_per_group> slots;
  std::mutex p2p_m;
  std::map<std::tuple<int, int, int>, p2p_channel> channels;  // (from, to, tag) group ranks
};

/// Cuts a ready collective into tasks (called under the slot's mutex by the last arrival).
inline void plan_tasks(coll_slot& s, int n) {
  const auto& d = s.desc;
  s.count = d.count;
  s.elem = size_of(d.type);
  s.chunk = std::max<std::size_t>(1, chunk_bytes / std::max<std::size_t>(1, s.elem));
  s.per_block = (d.count + s.chunk - 1) / s.chunk;
  const auto nn = static_cast<std::size_t>(n);
  switch (d.kind) {
    case call_kind::all_gather:
    case call_kind::reduce_scatter:
    case call_kind::all_to_all: s.ntasks = nn * s.per_block; break;
    case call_kind::all_reduce: s.ntasks = s.per_block; break;
    case call_kind::broadcast: s.ntasks = n > 1 ? s.per_block : 0; break;
    default: s.ntasks = 0; break;
  }
}

/// Runs task t of a ready collective: reads peers' buffers, writes peers' buffers.
inline void run_task(coll_slot& s, int n, std::size_t t) {
  const auto nn = static_cast<std::size_t>(n);
  const std::size_t es = s.elem, cnt = s.count;
  const std::size_t j = t % s.per_block;
  const std::size_t off = j * s.chunk;
  const std::size_t len = std::min(s.chunk, cnt - off);
  const std::size_t bytes = len * es;
  auto at = [es](const void* p, std::size_t elems) {
    return static_cast<const char*>(p) + elems * es;
  };
  auto atm = [es](void* p, std::size_t elems) { return static_cast<char*>(p) + elems * es; };
  switch (s.desc.kind) {
    case call_kind::all_gather: {
      const std::size_t p = t / s.per_block;
      const char* from = at(s.src[p], off);
      for (std::size_t k = 0; k < nn; ++k) {
        const std::size_t q = (p + k) % nn;
        char* to = atm(s.dst[q], p * cnt + off);
        if (to != from) std::memcpy(to, from, bytes);
      }
      break;
    }
    case call_kind::reduce_scatter: {
      const std::size_t q = t / s.per_block;
      thread_local std::vector<const void*> srcs;
      srcs.resize(nn);
      for (std::size_t p = 0; p < nn; ++p) srcs[p] = at(s.src[p], q * cnt + off);
      reduce(atm(s.dst[q], off), srcs.data(), n, len, s.desc.type, s.desc.op, n);
      break;
    }
    case call_kind::all_reduce: {
      const std::size_t o = j % nn;
      thread_local std::vector<const void*> srcs;
      srcs.resize(nn);
      for (std::size_t p = 0; p < nn; ++p) srcs[p] = at(s.src[p], off);
      char* home = atm(s.dst[o], off);
      reduce(home, srcs.data(), n, len, s.desc.type, s.desc.op, n);
      for (std::size_t q = 0; q < nn; ++q)
        if (q != o) std::memcpy(atm(s.dst[q], off), home, bytes);
      break;
    }
    case call_kind::all_to_all: {
      const std::size_t p = t / s.per_block;
      for (std::size_t k = 0; k < nn; ++k) {
        const std::size_t q = (p + k) % nn;
        char* to = atm(s.dst[q], p * cnt + off);
        const char* from = at(s.src[p], q * cnt + off);
        if (to != from) std::memcpy(to, from, bytes);
      }
      break;
    }
    case call_kind::broadcast: {
      const auto r = static_cast<std::size_t>(s.desc.peer);
      const char* from = at(s.dst[r], off);
      for (std::size_t q = 0; q < nn; ++q)
        if (q != r) std::memcpy(atm(s.dst[q], off), from, bytes);
      break;
    }
    default: break;
  }
}

}  // namespace tessera::comm::detail
