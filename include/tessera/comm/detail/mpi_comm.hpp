// tessera/comm/detail/mpi_comm.hpp: mpi_communicator (included by tessera/comm/mpi.hpp).
// tessera-requires: mpi
#pragma once

#include <climits>
#include <tessera/comm/mpi.hpp>

namespace tessera::comm {

class mpi_communicator {
 public:
  using request_type = mpi_request;

  /// Wraps `comm` (not owned; MPI_COMM_WORLD by default).
  explicit mpi_communicator(MPI_Comm comm = MPI_COMM_WORLD, mpi_options opts = {})
      : comm_(std::make_shared<MPI_Comm>(comm)), opts_(opts) {
    init();
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  std::span<const int> world_ranks() const noexcept { return world_ranks_; }
  MPI_Comm native() const noexcept { return *comm_; }
  std::string backend() const { return "mpi"; }
  const mpi_options& opts() const noexcept { return opts_; }

  using loc_t = tessera::source_location;
  mpi_request all_gather(const void* in, void* out, std::size_t n, dtype t, loc_t l = loc_t::current()) {
    const call_desc d{call_kind::all_gather, n, t};
    auto r = start(d, l);
    const bool in_place = in == static_cast<const char*>(out) + n * size_of(t) * static_cast<std::size_t>(rank_);
    ok(MPI_Iallgather(in_place ? MPI_IN_PLACE : in, count(d, l), detail::mpi_type(t), out, count(d, l),
                      detail::mpi_type(t), *comm_, &r.req_), d, l);
    return r;
  }
  mpi_request reduce_scatter(const void* in, void* out, std::size_t n, dtype t, reduce_op op,
                             loc_t l = loc_t::current()) {
    const call_desc d{call_kind::reduce_scatter, n, t, op};
    auto r = start(d, l);
    ok(MPI_Ireduce_scatter_block(in, out, count(d, l), detail::mpi_type(t), detail::mpi_op(op, t),
                                 *comm_, &r.req_), d, l);
    if (op == reduce_op::avg) r.avg_buf_ = out, r.avg_count_ = n, r.avg_type_ = t, r.avg_n_ = size_;
    return r;
  }
  mpi_request all_reduce(const void* in, void* out, std::size_t n, dtype t, reduce_op op,
                         loc_t l = loc_t::current()) {
    const call_desc d{call_kind::all_reduce, n, t, op};
    auto r = start(d, l);
    ok(MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, count(d, l), detail::mpi_type(t),
                      detail::mpi_op(op, t), *comm_, &r.req_), d, l);
    if (op == reduce_op::avg) r.avg_buf_ = out, r.avg_count_ = n, r.avg_type_ = t, r.avg_n_ = size_;
    return r;
  }
  mpi_request all_to_all(const void* in, void* out, std::size_t n, dtype t, loc_t l = loc_t::current()) {
    const call_desc d{call_kind::all_to_all, n, t};
    auto r = start(d, l, in == out && n > 0 ? "all_to_all cannot run in place; give a separate output buffer" : "");
    ok(MPI_Ialltoall(in, count(d, l), detail::mpi_type(t), out, count(d, l), detail::mpi_type(t), *comm_,
                     &r.req_), d, l);
    return r;
  }
  mpi_request broadcast(void* buf, std::size_t n, dtype t, int root, loc_t l = loc_t::current()) {
    const call_desc d{call_kind::broadcast, n, t, reduce_op::sum, root};
    auto r = start(d, l);
    ok(MPI_Ibcast(buf, count(d, l), detail::mpi_type(t), root, *comm_, &r.req_), d, l);
    return r;
  }
  mpi_request barrier(loc_t l = loc_t::current()) {
    const call_desc d{call_kind::barrier};
    auto r = start(d, l);
    ok(MPI_Ibarrier(*comm_, &r.req_), d, l);
    return r;
  }
  mpi_request send(const void* buf, std::size_t n, dtype t, int peer, int tag = 0, loc_t l = loc_t::current()) {
    const call_desc d{call_kind::send, n, t, reduce_op::sum, peer, tag};
    auto r = start(d, l);
    ok(MPI_Isend(buf, count(d, l), detail::mpi_type(t), peer, tag, *comm_, &r.req_), d, l);
    return r;
  }
  mpi_request recv(void* buf, std::size_t n, dtype t, int peer, int tag = 0, loc_t l = loc_t::current()) {
    const call_desc d{call_kind::recv, n, t, reduce_op::sum, peer, tag};
    auto r = start(d, l);
    ok(MPI_Irecv(buf, count(d, l), detail::mpi_type(t), peer, tag, *comm_, &r.req_), d, l);
    r.recv_count_ = count(d, l);
    r.recv_type_ = t;
    return r;
  }

  /// Non-blocking calls need no deferral; nesting is checked.
  void group_start() { ++depth_; }
  void group_end() {
    if (depth_ == 0) throw error(prefix() + ": group_end() without a matching group_start()");
    --depth_;
  }

  /// MPI_Comm_create_group over the listed ranks (collective over those ranks only).
  mpi_communicator split(std::span<const int> ranks, loc_t l = loc_t::current()) const {
    const std::string call = prefix() + ": split(" + group_string(ranks) + ") at " + where(l);
    if (ranks.empty()) throw error(call + ": the list of ranks is empty");
    bool me = false;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] < 0 || ranks[i] >= size_)
        throw error(call + ": rank " + std::to_string(ranks[i]) + " is outside this group of " +
                    std::to_string(size_) + " ranks");
      if (std::count(ranks.begin(), ranks.end(), ranks[i]) > 1)
        throw error(call + ": rank " + std::to_string(ranks[i]) + " is listed twice");
      me = me || ranks[i] == rank_;
    }
    if (!me) throw error(call + ": this rank is not in the list; only the listed ranks call split");
    MPI_Group g, ng;
    MPI_Comm_group(*comm_, &g);
    MPI_Group_incl(g, static_cast<int>(ranks.size()), ranks.data(), &ng);
    MPI_Comm nc = MPI_COMM_NULL;
    const int rc = MPI_Comm_create_group(*comm_, ng, 0x7e55, &nc);
    MPI_Group_free(&ng);
    MPI_Group_free(&g);
    if (rc != MPI_SUCCESS) throw error(call + ": " + detail::mpi_error_string(rc));
    mpi_communicator c(opts_);
    c.comm_ = std::shared_ptr<MPI_Comm>(new MPI_Comm(nc), [](MPI_Comm* p) {
      int fin = 0;
      MPI_Finalized(&fin);
      if (!fin && *p != MPI_COMM_NULL) MPI_Comm_free(p);
      delete p;
    });
    c.init();
    return c;
  }

 private:
  explicit mpi_communicator(const mpi_options& o) : opts_(o) {}

  void init() {
    MPI_Comm_set_errhandler(*comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(*comm_, &rank_);
    MPI_Comm_size(*comm_, &size_);
    MPI_Group g, wg;
    MPI_Comm_group(*comm_, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    std::vector<int> mine(static_cast<std::size_t>(size_));
    for (int i = 0; i < size_; ++i) mine[static_cast<std::size_t>(i)] = i;
    world_ranks_.assign(static_cast<std::size_t>(size_), 0);
    MPI_Group_translate_ranks(g, size_, mine.data(), wg, world_ranks_.data());
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    seq_ = std::make_shared<std::uint64_t>(0);
  }

  std::string prefix() const {
    return "tessera::comm(mpi): rank " + std::to_string(world_ranks_.empty() ? -1 : world_ranks_[static_cast<std::size_t>(rank_)]) +
           " of group " + group_string(world_ranks_);
  }
  std::string who(const call_desc& d, const loc_t& l) const {
    return prefix() + ": " + d.str() + " at " + where(l);
  }
  int count(const call_desc& d, const loc_t& l) const {
    const std::size_t per = d.kind == call_kind::all_to_all ? d.count * static_cast<std::size_t>(size_) : d.count;
    if (per > static_cast<std::size_t>(INT_MAX))
      throw error(who(d, l) + ": more than INT_MAX elements in one MPI call; split the buffer");
    return static_cast<int>(d.count);
  }
  void ok(int rc, const call_desc& d, const loc_t& l) const {
    if (rc != MPI_SUCCESS) throw error(who(d, l) + ": " + detail::mpi_error_string(rc));
  }

  /// Validates, agrees on the call across ranks (check_calls), and prepares the request.
  mpi_request start(const call_desc& d, const loc_t& l, const std::string& local_error = "") {
    const std::string w = who(d, l);
    if (!local_error.empty()) throw error(w + ": " + local_error);
    if ((d.kind == call_kind::reduce_scatter || d.kind == call_kind::all_reduce) && !reducible(d.type))
      throw error(w + ": " + std::string(short_name(d.type)) + " cannot be reduced; convert to f32 or bf16 first");
    if ((d.kind == call_kind::broadcast || is_p2p(d.kind)) && (d.peer < 0 || d.peer >= size_))
      throw error(w + ": rank " + std::to_string(d.peer) + " is outside this group of " + std::to_string(size_) + " ranks");
    if (is_p2p(d.kind) && d.tag < 0) throw error(w + ": tags must be >= 0");
    const std::uint64_t seq = is_p2p(d.kind) ? 0 : (*seq_)++;
    mpi_request r;
    r.who_ = w;
    r.timeout_ms_ = static_cast<long long>(opts_.timeout.count());
    r.deadline_ = std::chrono::steady_clock::now() + opts_.timeout;
    r.active_ = true;
    if (opts_.check_calls && !is_p2p(d.kind)) agree(d, seq, r);
    return r;
  }

  void agree(const call_desc& d, std::uint64_t seq, mpi_request& r) {
    constexpr int k = 5;
    const std::int64_t mine[k] = {static_cast<std::int64_t>(d.kind), static_cast<std::int64_t>(d.count),
                                   static_cast<std::int64_t>(d.type), static_cast<std::int64_t>(d.op), d.peer};
    std::int64_t buf[2 * k];
    for (int i = 0; i < k; ++i) buf[i] = mine[i], buf[k + i] = -mine[i];
    MPI_Request q = MPI_REQUEST_NULL;
    const int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, 2 * k, MPI_INT64_T, MPI_MAX, *comm_, &q);
    if (rc != MPI_SUCCESS) throw error(r.who_ + ": " + detail::mpi_error_string(rc));
    for (int flag = 0; !flag;) {
      MPI_Test(&q, &flag, MPI_STATUS_IGNORE);
      if (!flag && std::chrono::steady_clock::now() > r.deadline_)
        throw error(r.who_ + " (collective #" + std::to_string(seq) + " of the group) timed out after " +
                    std::to_string(r.timeout_ms_) + " ms: not every rank of the group joined this call");
      if (!flag) std::this_thread::yield();
    }
    static constexpr const char* field[k] = {"call", "count", "dtype", "reduce op", "root"};
    for (int i = 0; i < k; ++i)
      if (buf[i] != -buf[k + i]) {
        r.active_ = false;
        throw error("tessera::comm(mpi): mismatched collective #" + std::to_string(seq) + " of group " +
                    group_string(world_ranks_) + ": rank " + std::to_string(world_ranks_[static_cast<std::size_t>(rank_)]) +
                    " called " + d.str() + " at " + r.who_.substr(r.who_.rfind(" at ") + 4) +
                    ", but the ranks disagree on the " + field[i] + " (from " + std::to_string(-buf[k + i]) +
                    " to " + std::to_string(buf[i]) + " across ranks)");
      }
  }

  std::shared_ptr<MPI_Comm> comm_;
  mpi_options opts_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;
  std::shared_ptr<std::uint64_t> seq_;
  int depth_ = 0;
};

static_assert(communicator<mpi_communicator>);

}  // namespace tessera::comm
