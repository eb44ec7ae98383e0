// tessera/comm/threads.hpp: the `threads` backend: ranks are threads of one process and
// collectives go through shared memory with a single copy (peers read and write each
// other's buffers directly). The embedded default of tests, examples and the trainer.
//
//   tessera::comm::run_threads(8, [](tessera::comm::threads_communicator& c) {
//     std::vector<float> x(1024, 1.0f);
//     tessera::comm::all_reduce(c, std::span(x)).wait();   // x[i] == 8 on every rank
//   });
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tessera/core/source_location.hpp>
#include <span>
#include <string>
#include <tessera/comm/communicator.hpp>
#include <tessera/comm/detail/threads_group.hpp>
#include <tessera/comm/types.hpp>
#include <thread>
#include <utility>
#include <vector>

namespace tessera::comm {

/// The shared state of one threads job: its ranks, their groups, abort and timeout.
class threads_world {
 public:
  threads_world(int ranks, options opts = {})
      : n_(ranks), opts_(opts),
        ws_(static_cast<unsigned>(ranks) > std::max(1u, std::thread::hardware_concurrency())),
        instances_(static_cast<std::size_t>(std::max(ranks, 0))) {
    if (ranks < 1)
      throw error("tessera::comm::threads_world: ranks must be at least 1, got " +
                  std::to_string(ranks));
  }
  int size() const noexcept { return n_; }
  const options& opts() const noexcept { return opts_; }
  detail::waitset& waits() noexcept { return ws_; }

  /// Makes every waiting and future call fail with comm::aborted(`why`).
  void abort(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (aborted_.load()) return;
      why_ = why;
      aborted_.store(true, std::memory_order_seq_cst);
    }
    ws_.notify();
  }
  bool is_aborted() const noexcept { return aborted_.load(std::memory_order_seq_cst); }
  std::string abort_reason() {
    std::lock_guard<std::mutex> lock(m_);
    return why_;
  }

  /// The group state of the `i`-th split over `ranks` made by `world_rank`: every member's
  /// i-th split of the same list meets the same state.
  std::shared_ptr<detail::group_state> group(int world_rank, const std::vector<int>& ranks) {
    std::lock_guard<std::mutex> lock(m_);
    const int i = instances_[static_cast<std::size_t>(world_rank)][ranks]++;
    auto& g = groups_[{ranks, i}];
    if (!g) g = std::make_shared<detail::group_state>(ranks);
    return g;
  }

 private:
  int n_;
  options opts_;
  detail::waitset ws_;
  std::mutex m_;
  std::atomic<bool> aborted_{false};
  std::string why_;
  std::vector<std::map<std::vector<int>, int>> instances_;
  std::map<std::pair<std::vector<int>, int>, std::shared_ptr<detail::group_state>> groups_;
};

class threads_communicator;

namespace detail {
/// What one rank keeps about one group: its next collective number and what it acked.
/// Requests share this (rank-private, so copying the pointer touches no cache line that
/// other ranks write) and it keeps the world and the group alive.
struct threads_local {
  std::shared_ptr<threads_world> world;
  std::shared_ptr<group_state> group;
  std::uint64_t next_seq = 0;
  std::array<std::uint64_t, slots_per_group> acked{};  // acked[s] = last acked seq + 1
  std::array<slot_progress, slots_per_group> progress{};
  std::uint64_t left_upto = 0;   // this rank has left every collective below this
  std::uint64_t peers_left = 0;  // every rank is known to have left every collective below this
  int grank = 0;                 // this rank in the group
  int group_depth = 0;
};
}  // namespace detail

/// The waitable handle of a threads call. Waiting is also how a rank lends its thread to
/// the data movement of the collective. A request not waited on is waited by its
/// destructor (errors are then left to the other ranks to report).
class threads_request {
 public:
  threads_request() = default;
  threads_request(threads_request&& o) noexcept { *this = std::move(o); }
  threads_request& operator=(threads_request&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      world_ = o.world_; group_ = o.group_; local_ = std::move(o.local_);
      p2p_ = std::move(o.p2p_); seq_ = o.seq_; rank_ = o.rank_; grank_ = o.grank_;
      desc_ = o.desc_; loc_ = o.loc_; deadline_ = o.deadline_; active_ = std::exchange(o.active_, false);
    }
    return *this;
  }
  ~threads_request() { finish_quietly(); }

  /// Blocks until the call completed on this rank; throws comm::error on failure/timeout.
  void wait() {
    if (!active_) return;
    if (p2p_) wait_p2p(); else wait_coll(true);
    active_ = false;
  }
  /// True when complete (acknowledging it); never blocks; throws on failure.
  bool test() {
    if (!active_) return true;
    if (p2p_) {
      const int st = p2p_->state.load(std::memory_order_seq_cst);
      if (st == 2) fail_p2p();
      if (st == 1) active_ = false;
    } else if (wait_coll(false)) {
      active_ = false;
    }
    return !active_;
  }

 private:
  friend class threads_communicator;

  void finish_quietly() noexcept {
    try { wait(); } catch (...) { active_ = false; }
  }
  detail::coll_slot& slot() const {
    return group_->slots[static_cast<std::size_t>(seq_ % detail::slots_per_group)];
  }
  std::string who() const {
    return "tessera::comm(threads): rank " + std::to_string(rank_) + " of group " +
           group_string(group_->ranks) + ": " + desc_.str() + " at " + where(loc_);
  }
  [[noreturn]] void throw_aborted() const {
    throw aborted(who() + ": aborted: " + world_->abort_reason());
  }

  [[noreturn]] void throw_failed(detail::coll_slot& s) const {
    std::lock_guard<std::mutex> lock(s.m);
    throw error("tessera::comm(threads): rank " + std::to_string(rank_) + ": " + s.error);
  }

  /// Checks that the ranks seen to have posted (posts [0, seen), and this rank) called
  /// the same collective as rank 0; throws the first that did not.
  void verify(detail::coll_slot& s, int seen) const {
    if (seen == 0) return;
    auto check = [&, this](int r) {
      if (s.posts[static_cast<std::size_t>(r)].desc == s.posts[0].desc) return;
      try {
        fail_mismatch(*world_, *group_, s, seq_, r, 0);
      } catch (const error& e) {
        throw error("tessera::comm(threads): rank " + std::to_string(rank_) + ": " + e.what());
      }
    };
    for (int q = 1; q < seen; ++q) check(q);
    if (grank_ >= seen) check(grank_);
  }

 public:
  /// Records a mismatch between group ranks a and b of collective `seq` and throws it.
  [[noreturn]] static void fail_mismatch(threads_world& w, const detail::group_state& g, detail::coll_slot& s,
                                         std::uint64_t seq, int a, int b) {
    const auto& pa = s.posts[static_cast<std::size_t>(a)];
    const auto& pb = s.posts[static_cast<std::size_t>(b)];
    std::string msg = "mismatched collective #" + std::to_string(seq) + " of group " + group_string(g.ranks) +
                      ": rank " + std::to_string(g.ranks[static_cast<std::size_t>(a)]) + " called " +
                      pa.desc.str() + " at " + where(pa.loc) + ", but rank " +
                      std::to_string(g.ranks[static_cast<std::size_t>(b)]) + " called " + pb.desc.str() +
                      " at " + where(pb.loc);
    {
      std::lock_guard<std::mutex> lock(s.m);
      if (!s.failed.load(std::memory_order_relaxed)) {
        s.error = msg;
        s.failed.store(true, std::memory_order_seq_cst);
      }
    }
    w.waits().notify();
    throw error(std::move(msg));
  }

 private:
  // Collective: do this rank's share of the data movement until it is complete, then
  // leave. Returns false if !block and not complete yet.
  bool wait_coll(bool block) {
    auto& local = *local_;
    const auto si = static_cast<std::size_t>(seq_ % detail::slots_per_group);
    if (local.acked[si] > seq_) return true;  // finished at a later issue
    auto& s = slot();
    auto& pr = local.progress[si];
    if (pr.seq != seq_) pr = detail::slot_progress{seq_};
    const int n = group_->size();
    auto& ws = world_->waits();
    for (;;) {
      if (s.failed.load(std::memory_order_seq_cst)) throw_failed(s);
      if (detail::all_posted(s, n, seq_, pr)) {
        if (!pr.planned) {
          verify(s, n);
          std::uint64_t all = ~std::uint64_t{0};  // how far every rank had left when posting
          for (int q = 0; q < n; ++q) all = std::min(all, s.posts[static_cast<std::size_t>(q)].left_upto);
          local.peers_left = std::max(local.peers_left, all);
          pr.plan = detail::plan_tasks(s, n);
          pr.planned = true;
        }
        const auto& plan = pr.plan;
        if (plan.eager) {  // inputs staged at issue: nobody reads this rank's buffers
          if (!pr.pulled) {
            detail::run_eager(s, plan, n, static_cast<std::size_t>(grank_));
            pr.pulled = true;
          }
          break;
        }
        if (plan.pull) {
          if (!pr.pulled) {
            detail::run_pull(s, plan, n, static_cast<std::size_t>(grank_));
            pr.pulled = true;
            if (s.done.add(seq_, plan.ntasks) + 1 == plan.ntasks) ws.notify();
          }
        } else {
          std::size_t t;
          while ((t = s.next.add(seq_, plan.ntasks)) < plan.ntasks) {
            detail::run_task(s, plan, n, t);
            if (s.done.add(seq_, plan.ntasks) + 1 == plan.ntasks) ws.notify();
          }
        }
        if (s.done.get(seq_) >= plan.ntasks) break;
      } else {
        verify(s, pr.seen);  // an early mismatch with the ranks already here
      }
      if (!block) return false;
      if (world_->is_aborted()) throw_aborted();
      const bool ok = ws.wait_until(
          [&, this] {
            if (s.failed.load(std::memory_order_seq_cst) || world_->is_aborted()) return true;
            const int seen = pr.seen;
            if (!detail::all_posted(s, n, seq_, pr)) return pr.seen != seen;
            if (!pr.planned) return true;
            return s.done.get(seq_) >= pr.plan.ntasks || (!pr.plan.pull && s.next.get(seq_) < pr.plan.ntasks);
          },
          deadline_);
      if (!ok) throw_timeout(s);
    }
    leave(*world_, *group_, local, seq_);
    return true;
  }

  [[noreturn]] void throw_timeout(detail::coll_slot& s) const {
    const std::string missing = detail::ranks_where(
        *group_, s, [&, this](const detail::rank_post& p) { return p.posted.load(std::memory_order_seq_cst) != seq_; });
    throw error(who() + " (collective #" + std::to_string(seq_) + " of the group) timed out after " +
                std::to_string(world_->opts().timeout.count()) + " ms: " +
                (missing.empty() ? std::string("every rank arrived but the data movement did not finish")
                                 : "rank(s) " + missing + " did not join this call"));
  }

 public:
  /// Member `local` leaves the completed collective `seq`: the slot is free for the next
  /// collective once every member has left.
  static void leave(threads_world& w, detail::group_state& g, detail::threads_local& local, std::uint64_t seq) {
    const auto si = static_cast<std::size_t>(seq % detail::slots_per_group);
    local.acked[si] = seq + 1;
    while (local.acked[local.left_upto % detail::slots_per_group] > local.left_upto) ++local.left_upto;
    auto& s = g.slots[si];
    s.posts[static_cast<std::size_t>(local.grank)].left.store(seq + 1, std::memory_order_seq_cst);
    w.waits().notify_if([&] { return detail::all_left(s, g.size(), seq); });
  }

 private:
  void wait_p2p() {
    auto& ws = world_->waits();
    const bool ok = ws.wait_until(
        [&, this] { return p2p_->state.load(std::memory_order_seq_cst) != 0 || world_->is_aborted(); },
        deadline_);
    const int st = p2p_->state.load(std::memory_order_seq_cst);
    if (st == 2) fail_p2p();
    if (st == 1) return;
    if (world_->is_aborted()) throw_aborted();
    (void)ok;
    const bool is_send = desc_.kind == call_kind::send;
    throw error(who() + " timed out after " + std::to_string(world_->opts().timeout.count()) +
                " ms: rank " + std::to_string(group_->ranks[static_cast<std::size_t>(desc_.peer)]) +
                " posted no matching " + (is_send ? "recv" : "send"));
  }
  [[noreturn]] void fail_p2p() const { throw error("tessera::comm(threads): " + p2p_->error); }

  threads_world* world_ = nullptr;          // kept alive by local_
  detail::group_state* group_ = nullptr;    // kept alive by local_
  std::shared_ptr<detail::threads_local> local_;
  std::shared_ptr<detail::p2p_op> p2p_;
  std::uint64_t seq_ = 0;
  int rank_ = 0, grank_ = 0;
  call_desc desc_{};
  tessera::source_location loc_{};
  detail::clock::time_point deadline_{};
  bool active_ = false;
};

}  // namespace tessera::comm

#include <tessera/comm/detail/threads_comm.hpp>
