// tessera/comm/detail/threads_group.hpp: shared state of one group of the threads backend.
//
// Data path, by size:
//  * eager (each rank's input up to eager_bytes): at issue, a rank copies its input into
//    its own staging buffer in the slot (kept across calls, grows only) and posts; once
//    all have posted, each rank computes its own output from the peers' staging buffers
//    and leaves at once. One synchronisation per call instead of two (nobody waits for
//    the peers to finish reading its buffers), for one extra copy of a small input.
//  * pull (each rank's output up to pull_bytes; pull_exchange_bytes for all_to_all and
//    reduce_scatter): every rank posts pointers to its own send and receive buffers; once
//    all have arrived, each computes its own output reading the peers' inputs directly
//    (single copy), then waits until all are done.
//  * chunked (larger): the collective is cut into chunk tasks (256 KiB) that any waiting
//    rank takes from a shared counter, reading peers' buffers directly and writing into
//    peers' buffers directly. No staging buffer; a chunk read once is written to every
//    destination while it is in cache (an all_reduce chunk is reduced once and stored to
//    every output). A rank that is still computing after issuing its call does not hold
//    the others up: the waiting ranks do its share.
//
// Slots: collective k of a group uses slot k % slots_per_group. Synchronisation uses no
// counter shared by every rank on the small paths: a rank posts by storing k in its own
// post (its own cache line), sees the others arrive by reading theirs, and leaves by
// storing k + 1 in its post's `left`. Before it posts k + slots_per_group in the slot, a
// rank must know that every rank has left k (it finishes k first if it never waited on
// it). Usually it knows without reading anything: each post also carries how far its
// rank had left when posting, and the posts of the last collective were read anyway;
// otherwise it reads (and waits for) the slot's `left` fields. The pull and chunked paths
// count tasks in counters tagged with the collective's number, so they need no reset
// between the collectives of a slot.
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
/// all_to_all and reduce_scatter are pulled up to this output size: a rank reads only
/// the peers' blocks meant for it, and its output and those blocks fit in a core's L2
/// (2 MiB here). Measured on 2 ranks at 1 MiB (docs/performance.md): pulling is faster
/// than chunking for these two; all_gather pulled at 1 MiB was bimodal (53 to 178 us
/// against 71 to 99 chunked), and an all_reduce pulled is reduced by every rank in full.
inline constexpr std::size_t pull_exchange_bytes = std::size_t{1} << 20;
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
  std::uint64_t left_upto = 0;  // when posting: this rank had left every collective below this
  const void* src = nullptr;
  void* dst = nullptr;
  call_desc desc{};
  tessera::source_location loc{};
  std::vector<stage_word> stage;  // eager copy of the input (owner writes, peers read)
  alignas(64) std::atomic<std::uint64_t> left{0};  // 1 + the last collective of the slot this rank left
};

/// A task counter of one collective that needs no reset between the collectives of a
/// slot: its value carries the collective's number, and a value left by an earlier
/// collective reads as 0. (A slot is reused only after every rank has left it, so nobody
/// still counts for the earlier collective.)
class call_counter {
 public:
  static constexpr std::uint64_t max_count = (std::uint64_t{1} << 24) - 1;

  std::uint64_t get(std::uint64_t seq) const noexcept { return count(v_.load(std::memory_order_seq_cst), seq); }
  /// Adds one if the count is below `limit`; returns the count before (`limit` if reached).
  std::uint64_t add(std::uint64_t seq, std::uint64_t limit) noexcept {
    std::uint64_t v = v_.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t c = count(v, seq);
      if (c >= limit) return limit;
      if (v_.compare_exchange_weak(v, (tag(seq) << count_bits) | (c + 1), std::memory_order_seq_cst,
                                   std::memory_order_relaxed))
        return c;
    }
  }

 private:
  static constexpr unsigned count_bits = 24;
  static std::uint64_t tag(std::uint64_t seq) noexcept {
    return (seq + 1) & ((std::uint64_t{1} << (64 - count_bits)) - 1);
  }
  static std::uint64_t count(std::uint64_t v, std::uint64_t seq) noexcept {
    return (v >> count_bits) == tag(seq) ? v & max_count : 0;
  }
  std::atomic<std::uint64_t> v_{0};
};

struct coll_slot {
  alignas(64) call_counter next;  // chunk tasks taken
  alignas(64) call_counter done;  // tasks finished
  alignas(64) std::atomic<bool> failed{false};
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

/// One rank's progress through the collective in a slot (rank-private, so a later issue
/// that must finish a collective this rank never waited on resumes where it stopped).
struct slot_progress {
  std::uint64_t seq = ~std::uint64_t{0};
  int seen = 0;  // posts [0, seen) have posted `seq`
  bool planned = false, pulled = false;
  coll_plan plan{};
};

/// The first rank from `from` on that has not posted `seq` (n if all have).
inline int posted_upto(const coll_slot& s, int n, std::uint64_t seq, int from = 0) noexcept {
  while (from < n && s.posts[static_cast<std::size_t>(from)].posted.load(std::memory_order_seq_cst) == seq) ++from;
  return from;
}

/// True once every rank of the slot has posted `seq` (posts seen are remembered in pr).
inline bool all_posted(const coll_slot& s, int n, std::uint64_t seq, slot_progress& pr) noexcept {
  pr.seen = posted_upto(s, n, seq, pr.seen);
  return pr.seen == n;
}

/// True once every rank has left collective `prev` of the slot (so it may be reused).
inline bool all_left(const coll_slot& s, int n, std::uint64_t prev) noexcept {
  for (int q = 0; q < n; ++q)
    if (s.posts[static_cast<std::size_t>(q)].left.load(std::memory_order_seq_cst) <= prev) return false;
  return true;
}

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
    for (auto& sl : slots) sl.posts = std::make_unique<rank_post[]>(ranks.size());
  }
  int size() const noexcept { return static_cast<int>(ranks.size()); }

  std::vector<int> ranks;  // world ranks, in group order
  std::array<coll_slot, slots_per_group> slots;
  std::mutex p2p_m;
  std::map<std::tuple<int, int, int>, p2p_channel> channels;  // (from, to, tag) group ranks
};

/// The world ranks of the group whose post in slot `s` satisfies `pred`, as "1,3" (for
/// error messages: who did not join, who did not leave).
template <class Pred>
std::string ranks_where(const group_state& g, const coll_slot& s, Pred&& pred) {
  std::string out;
  for (std::size_t q = 0; q < g.ranks.size(); ++q) {
    if (!pred(s.posts[q])) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(g.ranks[q]);
  }
  return out;
}

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
  const bool exchange = d.kind == call_kind::all_to_all || d.kind == call_kind::reduce_scatter;
  p.pull = out_bytes <= (exchange ? pull_exchange_bytes : pull_bytes) &&
           !(d.kind == call_kind::all_reduce && in_place);
  if (p.pull) {
    p.chunk = std::max<std::size_t>(1, p.count);
    p.per_block = 1;
    p.ntasks = (d.kind == call_kind::barrier) ? 0 : nn;
    return p;
  }
  p.chunk = std::max<std::size_t>(1, chunk_bytes / std::max<std::size_t>(1, p.elem));
  while ((d.count + p.chunk - 1) / p.chunk * nn > call_counter::max_count) p.chunk *= 2;
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
