// tessera/comm/detail/threads_group.hpp: shared state of one group of the threads backend.
//
// Data path, by size:
//  * eager (each rank's input up to eager_bytes): at issue, a rank copies its input into
//    its own staging buffer in the slot (kept across calls, grows only) and posts; once
//    all have posted, each rank computes its own output from the peers' staging buffers
//    and leaves at once. One synchronisation per call instead of two (nobody waits for
//    the peers to finish reading its buffers), for one extra copy of a small input.
//  * pull (each rank's output up to pull_bytes): every rank posts pointers to its own
//    send and receive buffers; once all have arrived, each computes its own output reading
//    the peers' inputs directly (single copy), then waits until all are done.
//  * chunked (larger): the collective is cut into chunk tasks (256 KiB) that any waiting
//    rank takes from an atomic counter, reading peers' buffers directly and writing into
//    peers' buffers directly. No staging buffer; a chunk read once is written to every
//    destination while it is in cache (an all_reduce chunk is reduced once and stored to
//    every output). A rank that is still computing after issuing its call does not hold
//    the others up: the waiting ranks do its share.
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
#include <tessera/core/source_location.hpp>
#include <string>
#include <tessera/comm/detail/reduce.hpp>
#include <tessera/comm/detail/sync.hpp>
#include <tessera/comm/types.hpp>
#include <tuple>
#include <vector>

namespace tessera::comm::detail {

inline constexpr int slots_per_group = 8;
inline constexpr std::size_t chunk_bytes = std::size_t{256} << 10;
/// Outputs up to this size per rank are computed by their owner ("pull"): fewer shared
/// counters, so less cache-line traffic for small messages.
inline constexpr std::size_t pull_bytes = std::size_t{256} << 10;
/// Inputs up to this size per rank are staged at issue ("eager").
inline constexpr std::size_t eager_bytes = std::size_t{16} << 10;

/// The unit of eager staging buffers (aligned for every element type a call moves; a
/// class of our own: nvcc 13's front end fails on std::vector<std::max_align_t> here).
struct alignas(16) stage_word {
  unsigned char bytes[16];
};

/// What one rank posts for one collective; each rank writes only its own (own cache line).
struct alignas(64) rank_post {
  std::atomic<std::uint64_t> posted{~std::uint64_t{0}};  // the collective posted here
  const void* src = nullptr;
  void* dst = nullptr;
  call_desc desc{};
  tessera::source_location loc{};
  std::vector<stage_word> stage;  // eager copy of the input (owner writes, peers read)
};

struct coll_slot {
  alignas(64) std::atomic<std::uint64_t> seq{0};  // the collective this slot serves now
  alignas(64) std::atomic<int> arrived{0};
  alignas(64) std::atomic<std::size_t> next{0};
  alignas(64) std::atomic<std::size_t> done{0};
  alignas(64) std::atomic<int> leaving{0};
  std::atomic<bool> failed{false};
  std::mutex m;
  std::string error;  // written under m before `failed` is set
  std::unique_ptr<rank_post[]> posts;
};

/// How a collective is cut into tasks; every rank computes the same plan from the posts.
struct coll_plan {
  std::size_t count = 0, elem = 0, chunk = 0, per_block = 0, ntasks = 0;
  bool pull = false;   // task q is rank q's own output, done by rank q
  bool eager = false;  // inputs were staged at issue; each rank computes its own output
};

/// The bytes a rank stages for an eager call (its input), or 0 if the call is not eager.
/// Depends only on the call and the group size, so every rank decides alike.
inline std::size_t eager_stage_bytes(const call_desc& d, int n) noexcept {
  const std::size_t b = d.count * size_of(d.type);
  std::size_t in = 0;
  switch (d.kind) {
    case call_kind::all_gather:
    case call_kind::all_reduce:
    case call_kind::broadcast: in = b; break;
    case call_kind::reduce_scatter:
    case call_kind::all_to_all: in = b * static_cast<std::size_t>(n); break;
    default: return 0;
  }
  return in > 0 && in <= eager_bytes ? in : 0;
}

/// Copies this rank's input into its staging buffer of the slot (eager calls only).
inline void stage_input(rank_post& p, const call_desc& d, const void* in, std::size_t bytes, int grank) {
  if (d.kind == call_kind::broadcast && grank != d.peer) return;  // only the root's is read
  const std::size_t words = (bytes + sizeof(stage_word) - 1) / sizeof(stage_word);
  if (p.stage.size() < words) p.stage.resize(words);
  std::memcpy(p.stage.data(), in, bytes);
}

struct p2p_op {
  const void* src = nullptr;
  void* dst = nullptr;
  call_desc desc{};
  tessera::source_location loc{};
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
      sl.posts = std::make_unique<rank_post[]>(ranks.size());
    }
  }
  int size() const noexcept { return static_cast<int>(ranks.size()); }

  std::vector<int> ranks;  // world ranks, in group order
  std::array<coll_slot, slots_per_group> slots;
  std::mutex p2p_m;
  std::map<std::tuple<int, int, int>, p2p_channel> channels;  // (from, to, tag) group ranks
};

/// Cuts a collective whose ranks have all posted into tasks.
inline coll_plan plan_tasks(const coll_slot& s, int n) {
  coll_plan p;
  const auto& d = s.posts[0].desc;
  const auto nn = static_cast<std::size_t>(n);
  p.count = d.count;
  p.elem = size_of(d.type);
  if (eager_stage_bytes(d, n) > 0) {
    p.eager = true;
    return p;
  }
  bool in_place = false;
  for (std::size_t q = 0; q < nn; ++q) in_place = in_place || s.posts[q].src == s.posts[q].dst;
  const std::size_t out_bytes =
      p.count * p.elem * (d.kind == call_kind::all_gather || d.kind == call_kind::all_to_all ? nn : 1);
  // pull: rank q computes its own output from the peers' inputs; not for an in-place
  // all_reduce, whose inputs are the outputs that the owners overwrite
  p.pull = out_bytes <= pull_bytes && !(d.kind == call_kind::all_reduce && in_place);
  if (p.pull) {
    p.chunk = std::max<std::size_t>(1, p.count);
    p.per_block = 1;
    p.ntasks = (d.kind == call_kind::barrier) ? 0 : nn;
    return p;
  }
  p.chunk = std::max<std::size_t>(1, chunk_bytes / std::max<std::size_t>(1, p.elem));
  p.per_block = (d.count + p.chunk - 1) / p.chunk;
  switch (d.kind) {
    case call_kind::all_gather:
    case call_kind::reduce_scatter:
    case call_kind::all_to_all: p.ntasks = nn * p.per_block; break;
    case call_kind::all_reduce: p.ntasks = p.per_block; break;
    case call_kind::broadcast: p.ntasks = n > 1 ? p.per_block : 0; break;
    default: p.ntasks = 0; break;
  }
  return p;
}

/// Computes rank q's whole output of the slot's call from the ranks' inputs, where
/// `in(r, elems)` points `elems` elements into rank r's input (its buffer, or its staged
/// copy). A block already in place (all_gather in place) is not copied.
template <class In>
void run_own_output(const coll_slot& s, const coll_plan& p, int n, std::size_t q, In&& in) {
  const auto nn = static_cast<std::size_t>(n);
  const auto& d = s.posts[0].desc;
  const std::size_t cnt = p.count, bytes = cnt * p.elem;
  if (bytes == 0) return;
  char* out = static_cast<char*>(s.posts[q].dst);
  switch (d.kind) {
    case call_kind::all_gather:
      for (std::size_t r = 0; r < nn; ++r)
        if (out + r * bytes != in(r, 0)) std::memcpy(out + r * bytes, in(r, 0), bytes);
      break;
    case call_kind::all_to_all:
      for (std::size_t r = 0; r < nn; ++r) std::memcpy(out + r * bytes, in(r, q * cnt), bytes);
      break;
    case call_kind::reduce_scatter:
    case call_kind::all_reduce: {
      thread_local std::vector<const void*> srcs;
      srcs.resize(nn);
      const std::size_t off = d.kind == call_kind::reduce_scatter ? q * cnt : 0;
      for (std::size_t r = 0; r < nn; ++r) srcs[r] = in(r, off);
      reduce(out, srcs.data(), n, cnt, d.type, d.op, n);
      break;
    }
    case call_kind::broadcast:  // the root's buffer is its input and its output
      if (q != static_cast<std::size_t>(d.peer)) std::memcpy(out, in(static_cast<std::size_t>(d.peer), 0), bytes);
      break;
    default: break;
  }
}

/// Pull task of rank q: computes q's whole output, reading the peers' inputs directly.
inline void run_pull(const coll_slot& s, const coll_plan& p, int n, std::size_t q) {
  run_own_output(s, p, n, q, [&](std::size_t r, std::size_t elems) {
    return static_cast<const char*>(s.posts[r].src) + elems * p.elem;
  });
}

/// Eager call: computes rank q's output from the staging buffers of the slot.
inline void run_eager(const coll_slot& s, const coll_plan& p, int n, std::size_t q) {
  run_own_output(s, p, n, q, [&](std::size_t r, std::size_t elems) {
    return reinterpret_cast<const char*>(s.posts[r].stage.data()) + elems * p.elem;
  });
}

/// Chunk task t: reads peers' buffers, writes peers' buffers.
inline void run_task(const coll_slot& s, const coll_plan& p, int n, std::size_t t) {
  const auto nn = static_cast<std::size_t>(n);
  const auto& d = s.posts[0].desc;
  const std::size_t es = p.elem, cnt = p.count;
  const std::size_t j = t % p.per_block;
  const std::size_t off = j * p.chunk;
  const std::size_t len = std::min(p.chunk, cnt - off);
  const std::size_t bytes = len * es;
  auto src = [&](std::size_t r, std::size_t elems) {
    return static_cast<const char*>(s.posts[r].src) + elems * es;
  };
  auto dst = [&](std::size_t r, std::size_t elems) { return static_cast<char*>(s.posts[r].dst) + elems * es; };
  switch (d.kind) {
    case call_kind::all_gather: {
      const std::size_t r = t / p.per_block;
      const char* from = src(r, off);
      for (std::size_t k = 0; k < nn; ++k) {
        const std::size_t q = (r + k) % nn;
        char* to = dst(q, r * cnt + off);
        if (to != from) std::memcpy(to, from, bytes);
      }
      break;
    }
    case call_kind::reduce_scatter: {
      const std::size_t q = t / p.per_block;
      thread_local std::vector<const void*> srcs;
      srcs.resize(nn);
      for (std::size_t r = 0; r < nn; ++r) srcs[r] = src(r, q * cnt + off);
      reduce(dst(q, off), srcs.data(), n, len, d.type, d.op, n);
      break;
    }
    case call_kind::all_reduce: {  // reduced once, block by block, stored to every output
      thread_local std::vector<const void*> srcs;
      thread_local std::vector<void*> dsts;
      srcs.resize(nn);
      dsts.resize(nn);
      for (std::size_t r = 0; r < nn; ++r) srcs[r] = src(r, off);
      for (std::size_t k = 0; k < nn; ++k) dsts[k] = dst((j + k) % nn, off);
      reduce(dsts.data(), n, srcs.data(), n, len, d.type, d.op, n);
      break;
    }
    case call_kind::all_to_all: {
      const std::size_t r = t / p.per_block;
      for (std::size_t k = 0; k < nn; ++k) {
        const std::size_t q = (r + k) % nn;
        std::memcpy(dst(q, r * cnt + off), src(r, q * cnt + off), bytes);
      }
      break;
    }
    case call_kind::broadcast: {
      const auto root = static_cast<std::size_t>(d.peer);
      const char* from = dst(root, off);
      for (std::size_t q = 0; q < nn; ++q)
        if (q != root) std::memcpy(dst(q, off), from, bytes);
      break;
    }
    default: break;
  }
}

}  // namespace tessera::comm::detail
