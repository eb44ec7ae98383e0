// tessera/comm/detail/threads_comm.hpp: threads_communicator and run_threads (included by
// tessera/comm/threads.hpp; include that header instead).
#pragma once

#include <numeric>
#include <tessera/comm/threads.hpp>

namespace tessera::comm {

/// One rank's communicator over a group of a threads_world. Models `communicator`.
class threads_communicator {
 public:
  using request_type = threads_request;

  /// The world communicator of `world_rank` (every rank of `world`, in order).
  threads_communicator(std::shared_ptr<threads_world> world, int world_rank)
      : world_(std::move(world)), local_(std::make_shared<detail::threads_local>()),
        world_rank_(world_rank), grank_(world_rank) {
    if (world_rank < 0 || world_rank >= world_->size())
      throw error("tessera::comm::threads_communicator: rank " + std::to_string(world_rank) +
                  " is outside the world of " + std::to_string(world_->size()) + " ranks");
    std::vector<int> all(static_cast<std::size_t>(world_->size()));
    std::iota(all.begin(), all.end(), 0);
    group_ = world_->group(world_rank, all);
    local_->world = world_;
    local_->group = group_;
    local_->grank = grank_;
  }

  int rank() const noexcept { return grank_; }
  int size() const noexcept { return group_->size(); }
  int world_rank() const noexcept { return world_rank_; }
  std::span<const int> world_ranks() const noexcept { return group_->ranks; }
  threads_world& world() const noexcept { return *world_; }
  std::string backend() const { return "threads"; }

  threads_request all_gather(const void* in, void* out, std::size_t count, dtype t,
                             tessera::source_location loc = tessera::source_location::current()) {
    return collective({call_kind::all_gather, count, t}, in, out, loc);
  }
  threads_request reduce_scatter(const void* in, void* out, std::size_t count, dtype t,
                                 reduce_op op,
                                 tessera::source_location loc = tessera::source_location::current()) {
    return collective({call_kind::reduce_scatter, count, t, op}, in, out, loc);
  }
  threads_request all_reduce(const void* in, void* out, std::size_t count, dtype t, reduce_op op,
                             tessera::source_location loc = tessera::source_location::current()) {
    return collective({call_kind::all_reduce, count, t, op}, in, out, loc);
  }
  threads_request all_to_all(const void* in, void* out, std::size_t count, dtype t,
                             tessera::source_location loc = tessera::source_location::current()) {
    return collective({call_kind::all_to_all, count, t}, in, out, loc);
  }
  threads_request broadcast(void* buf, std::size_t count, dtype t, int root,
                            tessera::source_location loc = tessera::source_location::current()) {
    return collective({call_kind::broadcast, count, t, reduce_op::sum, root}, buf, buf, loc);
  }
  threads_request barrier(tessera::source_location loc = tessera::source_location::current()) {
    return collective({call_kind::barrier}, nullptr, nullptr, loc);
  }
  threads_request send(const void* buf, std::size_t count, dtype t, int peer, int tag = 0,
                       tessera::source_location loc = tessera::source_location::current()) {
    return p2p({call_kind::send, count, t, reduce_op::sum, peer, tag}, buf, nullptr, loc);
  }
  threads_request recv(void* buf, std::size_t count, dtype t, int peer, int tag = 0,
                       tessera::source_location loc = tessera::source_location::current()) {
    return p2p({call_kind::recv, count, t, reduce_op::sum, peer, tag}, nullptr, buf, loc);
  }

  /// Calls never block at issue on this backend (p2p calls are matched in a mailbox and
  /// collectives only post pointers), so a group needs no deferral; nesting is checked.
  void group_start() { ++local_->group_depth; }
  void group_end() {
    if (local_->group_depth == 0)
      throw error(prefix() + ": group_end() without a matching group_start()");
    --local_->group_depth;
  }

  /// The sub-communicator of `ranks` (ranks of this communicator, in the order given).
  threads_communicator split(std::span<const int> ranks,
                             tessera::source_location loc = tessera::source_location::current()) const {
    std::vector<int> wr;
    int me = -1;
    const std::string call = prefix() + ": split(" + group_string(ranks) + ") at " + where(loc);
    if (ranks.empty()) throw error(call + ": the list of ranks is empty");
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const int r = ranks[i];
      if (r < 0 || r >= size())
        throw error(call + ": rank " + std::to_string(r) + " is outside this group of " +
                    std::to_string(size()) + " ranks");
      if (std::find(ranks.begin(), ranks.begin() + static_cast<std::ptrdiff_t>(i), r) !=
          ranks.begin() + static_cast<std::ptrdiff_t>(i))
        throw error(call + ": rank " + std::to_string(r) + " is listed twice");
      if (r == grank_) me = static_cast<int>(i);
      wr.push_back(group_->ranks[static_cast<std::size_t>(r)]);
    }
    if (me < 0)
      throw error(call + ": this rank is not in the list; only the listed ranks call split");
    threads_communicator c(*this);
    c.group_ = world_->group(world_rank_, wr);
    c.local_ = std::make_shared<detail::threads_local>();
    c.local_->world = world_;
    c.local_->group = c.group_;
    c.grank_ = me;
    c.local_->grank = me;
    return c;
  }

 private:
  std::string prefix() const {
    return "tessera::comm(threads): rank " + std::to_string(world_rank_) + " of group " +
           group_string(group_->ranks);
  }

  threads_request make_request(const call_desc& d, tessera::source_location loc) const {
    threads_request r;
    r.world_ = world_.get();
    r.group_ = group_.get();
    r.local_ = local_;
    r.rank_ = world_rank_;
    r.grank_ = grank_;
    r.desc_ = d;
    r.loc_ = loc;
    r.deadline_ = detail::clock::now() + world_->opts().timeout;
    r.active_ = true;
    return r;
  }

  void validate(const call_desc& d, const void* in, const void* out,
                const tessera::source_location& loc) const {
    auto bad = [&, this](const std::string& why) {
      throw error(prefix() + ": " + d.str() + " at " + where(loc) + ": " + why);
    };
    if ((d.kind == call_kind::reduce_scatter || d.kind == call_kind::all_reduce) &&
        !reducible(d.type))
      bad(std::string(short_name(d.type)) + " cannot be reduced; convert to f32 or bf16 first");
    if ((d.kind == call_kind::broadcast || is_p2p(d.kind)) && (d.peer < 0 || d.peer >= size()))
      bad("rank " + std::to_string(d.peer) + " is outside this group of " +
          std::to_string(size()) + " ranks");
    if (d.kind == call_kind::all_to_all && in == out && d.count > 0)
      bad("all_to_all cannot run in place; give a separate output buffer");
    if (world_->is_aborted()) throw aborted(prefix() + ": " + d.str() + ": aborted: " +
                                            world_->abort_reason());
  }

  threads_request collective(const call_desc& d, const void* in, void* out,
                             tessera::source_location loc) {
    validate(d, in, out, loc);
    auto& local = *local_;
    const std::uint64_t seq = local.next_seq++;
    const auto si = static_cast<std::size_t>(seq % detail::slots_per_group);
    auto& s = group_->slots[si];
    threads_request req = make_request(d, loc);
    req.seq_ = seq;
    req.active_ = false;  // until posted: an error before that leaves nothing to wait for
    if (seq >= detail::slots_per_group) {  // the slot served collective `prev` before
      const std::uint64_t prev = seq - detail::slots_per_group;
      if (local.acked[si] <= prev) {  // this rank never waited on it: finish it now
        threads_request p = make_request(d, loc);
        p.seq_ = prev;
        p.wait();
      }
      if (local.peers_left <= prev && !detail::all_left(s, size(), prev)) wait_for_slot(s, prev, req, d, loc);
    }
    // post this rank's buffers and call (its own cache line); the others see it arrive
    auto& post = s.posts[static_cast<std::size_t>(grank_)];
    post.src = in;
    post.dst = out;
    post.desc = d;
    post.loc = loc;
    post.left_upto = local.left_upto;
    if (const std::size_t staged = detail::eager_stage_bytes(d, size()))
      detail::stage_input(post, d, in, staged, grank_);
    post.posted.store(seq, std::memory_order_seq_cst);
    world_->waits().notify_if([&, this] { return detail::posted_upto(s, size(), seq) == size(); });
    req.active_ = true;
    return req;
  }

  /// Waits until every rank has left collective `prev` of slot `s` (for the call `d`).
  void wait_for_slot(detail::coll_slot& s, std::uint64_t prev, const threads_request& req, const call_desc& d,
                     const tessera::source_location& loc) {
    const bool ok = world_->waits().wait_until(
        [&, this] {
          return detail::all_left(s, size(), prev) || s.failed.load(std::memory_order_seq_cst) ||
                 world_->is_aborted();
        },
        req.deadline_);
    if (s.failed.load(std::memory_order_seq_cst)) req.throw_failed(s);
    if (world_->is_aborted()) req.throw_aborted();
    if (ok) return;
    const std::string late = detail::ranks_where(
        *group_, s, [&](const detail::rank_post& p) { return p.left.load(std::memory_order_seq_cst) <= prev; });
    throw error(prefix() + ": " + d.str() + " at " + where(loc) + " (collective #" +
                std::to_string(prev + detail::slots_per_group) + ") timed out waiting for collective #" +
                std::to_string(prev) + " of this group to be waited on by rank(s) " + late);
  }

  threads_request p2p(const call_desc& d, const void* in, void* out, tessera::source_location loc) {
    validate(d, in, out, loc);
    threads_request req = make_request(d, loc);
    auto op = std::make_shared<detail::p2p_op>();
    op->src = in;
    op->dst = out;
    op->desc = d;
    op->loc = loc;
    op->rank = world_rank_;
    req.p2p_ = op;
    const bool is_send = d.kind == call_kind::send;
    const auto key = is_send ? std::tuple{grank_, d.peer, d.tag} : std::tuple{d.peer, grank_, d.tag};
    std::shared_ptr<detail::p2p_op> other;
    {
      std::lock_guard<std::mutex> lock(group_->p2p_m);
      auto& ch = group_->channels[key];
      auto& mine = is_send ? ch.sends : ch.recvs;
      auto& theirs = is_send ? ch.recvs : ch.sends;
      if (theirs.empty()) {
        mine.push_back(op);
      } else {
        other = std::move(theirs.front());
        theirs.pop_front();
      }
    }
    if (other) match(is_send ? *op : *other, is_send ? *other : *op);
    return req;
  }

  void match(detail::p2p_op& s, detail::p2p_op& r) {
    if (s.desc.count != r.desc.count || s.desc.type != r.desc.type) {
      const std::string msg = "group " + group_string(group_->ranks) + ": rank " +
                              std::to_string(s.rank) + " " + s.desc.str() + " at " +
                              where(s.loc) + " does not match rank " + std::to_string(r.rank) +
                              " " + r.desc.str() + " at " + where(r.loc) +
                              " (count and dtype must agree)";
      s.error = msg;
      r.error = msg;
      s.state.store(2, std::memory_order_seq_cst);
      r.state.store(2, std::memory_order_seq_cst);
    } else {
      if (s.desc.count) std::memcpy(r.dst, s.src, s.desc.count * size_of(s.desc.type));
      s.state.store(1, std::memory_order_seq_cst);
      r.state.store(1, std::memory_order_seq_cst);
    }
    world_->waits().notify();
  }

  std::shared_ptr<threads_world> world_;
  std::shared_ptr<detail::group_state> group_;
  std::shared_ptr<detail::threads_local> local_;
  int world_rank_ = 0;
  int grank_ = 0;
};

static_assert(communicator<threads_communicator>);

/// Runs fn(threads_communicator&) on `ranks` threads (rank 0 on the calling thread) and
/// joins them. When a rank throws, the others' pending and later calls fail with
/// comm::aborted; run_threads then rethrows the first rank's own exception.
template <class F>
void run_threads(int ranks, F&& fn, options opts = {}) {
  auto world = std::make_shared<threads_world>(ranks, opts);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<int> order(static_cast<std::size_t>(ranks), -1);
  std::atomic<int> clock{0};
  auto body = [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    try {
      threads_communicator c(world, r);
      fn(c);
    } catch (const aborted&) {
      errors[i] = std::current_exception();
    } catch (const std::exception& e) {
      errors[i] = std::current_exception();
      order[i] = clock++;
      world->abort("rank " + std::to_string(r) + " failed: " + e.what());
    } catch (...) {
      errors[i] = std::current_exception();
      order[i] = clock++;
      world->abort("rank " + std::to_string(r) + " failed with a non-standard exception");
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(ranks));
  for (int r = 1; r < ranks; ++r) threads.emplace_back(body, r);
  body(0);
  for (auto& t : threads) t.join();
  std::size_t first = errors.size();
  for (std::size_t i = 0; i < errors.size(); ++i)
    if (order[i] >= 0 && (first == errors.size() || order[i] < order[first])) first = i;
  if (first < errors.size()) std::rethrow_exception(errors[first]);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tessera::comm
