// tessera/comm/detail/nccl_comm.hpp: nccl_communicator (included by tessera/comm/nccl.hpp).
// tessera-requires: nccl
#pragma once

#include <initializer_list>
#include <tessera/core/cuda_block_cache.hpp>

#include <tessera/comm/nccl.hpp>

namespace tessera::comm {

class nccl_communicator {
 public:
  using request_type = nccl_request;

  /// Rank `rank` of `ranks` over the NCCL id `id`, on CUDA device `device`.
  nccl_communicator(const ncclUniqueId& id, int rank, int ranks, int device, nccl_options opts = {})
      : opts_(opts) {
    init(id, rank, ranks, device);
    world_ranks_.resize(static_cast<std::size_t>(ranks));
    for (int i = 0; i < ranks; ++i) world_ranks_[static_cast<std::size_t>(i)] = i;
  }

  /// Bootstraps through any tessera communicator (mpi_communicator under mpirun, or a
  /// threads_communicator): its rank 0 makes the id and broadcasts it.
  template <communicator C>
  static nccl_communicator bootstrap(C& boot, int device = -1, nccl_options opts = {}) {
    ncclUniqueId id{};
    if (boot.rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    boot.broadcast(&id, sizeof id, dtype::u8, 0).wait();
    return nccl_communicator(id, boot.rank(), boot.size(), device < 0 ? boot.rank() : device, opts);
  }

  /// Bootstraps from torchrun's environment: RANK, WORLD_SIZE, LOCAL_RANK (device),
  /// MASTER_ADDR, MASTER_PORT (rank 0 serves the id on MASTER_PORT + 1).
  static nccl_communicator from_env(nccl_options opts = {}) {
    auto get = [](const char* k) -> std::string {
      const char* v = std::getenv(k);
      if (!v || !*v)
        throw error(std::string("tessera::comm(nccl): environment variable ") + k +
                    " is not set; launch with torchrun-style RANK, WORLD_SIZE, LOCAL_RANK, "
                    "MASTER_ADDR, MASTER_PORT or bootstrap through MPI");
      return v;
    };
    const int rank = std::stoi(get("RANK")), ranks = std::stoi(get("WORLD_SIZE"));
    const char* lr = std::getenv("LOCAL_RANK");
    const int device = lr && *lr ? std::stoi(lr) : rank;
    std::vector<char> blob;
    ncclUniqueId id{};
    if (rank == 0) {
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      blob.assign(reinterpret_cast<const char*>(&id), reinterpret_cast<const char*>(&id) + sizeof id);
    }
    blob = detail::tcp_rendezvous(rank, ranks, get("MASTER_ADDR"), std::stoi(get("MASTER_PORT")) + 1,
                                  blob, sizeof id, opts.timeout);
    std::memcpy(&id, blob.data(), sizeof id);
    return nccl_communicator(id, rank, ranks, device, opts);
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  std::span<const int> world_ranks() const noexcept { return world_ranks_; }
  std::string backend() const { return "nccl"; }
  ncclComm_t native() const noexcept { return state_->comm; }
  cudaStream_t stream() const noexcept { return state_->stream; }
  int device() const noexcept { return state_->device; }

  using loc_t = tessera::source_location;
  nccl_request all_gather(const void* in, void* out, std::size_t n, dtype t, loc_t l = loc_t::current()) {
    const call_desc d{call_kind::all_gather, n, t};
    return launch(d, l, {in, out}, [&, this] {
      return ncclAllGather(in, out, n, detail::nccl_type(t), state_->comm, state_->stream);
    });
  }
  nccl_request reduce_scatter(const void* in, void* out, std::size_t n, dtype t, reduce_op op,
                              loc_t l = loc_t::current()) {
    const call_desc d{call_kind::reduce_scatter, n, t, op};
    return launch(d, l, {in, out}, [&, this] {
      return ncclReduceScatter(in, out, n, detail::nccl_type(t), detail::nccl_op(op), state_->comm, state_->stream);
    });
  }
  nccl_request all_reduce(const void* in, void* out, std::size_t n, dtype t, reduce_op op,
                          loc_t l = loc_t::current()) {
    const call_desc d{call_kind::all_reduce, n, t, op};
    return launch(d, l, {in, out}, [&, this] {
      return ncclAllReduce(in, out, n, detail::nccl_type(t), detail::nccl_op(op), state_->comm, state_->stream);
    });
  }
  nccl_request all_to_all(const void* in, void* out, std::size_t n, dtype t, loc_t l = loc_t::current()) {
    const call_desc d{call_kind::all_to_all, n, t};
    if (in == out && n) throw error(who(d, l) + ": all_to_all cannot run in place; give a separate output buffer");
    return launch(d, l, {in, out}, [&, this]() -> ncclResult_t {  // grouped send/recv pairs
      const std::size_t bytes = n * size_of(t);
      ncclResult_t r = ncclGroupStart();
      for (int q = 0; q < size_ && r == ncclSuccess; ++q) {
        const auto off = static_cast<std::size_t>(q) * bytes;
        r = ncclSend(static_cast<const char*>(in) + off, n, detail::nccl_type(t), q, state_->comm, state_->stream);
        if (r == ncclSuccess)
          r = ncclRecv(static_cast<char*>(out) + off, n, detail::nccl_type(t), q, state_->comm, state_->stream);
      }
      const ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    });
  }
  nccl_request broadcast(void* buf, std::size_t n, dtype t, int root, loc_t l = loc_t::current()) {
    const call_desc d{call_kind::broadcast, n, t, reduce_op::sum, root};
    return launch(d, l, {buf}, [&, this] {
      return ncclBroadcast(buf, buf, n, detail::nccl_type(t), root, state_->comm, state_->stream);
    });
  }
  nccl_request barrier(loc_t l = loc_t::current()) {
    const call_desc d{call_kind::barrier};
    return launch(d, l, {}, [&, this] {
      return ncclAllReduce(state_->scratch, state_->scratch, 1, ncclInt64, ncclMax, state_->comm, state_->stream);
    });
  }
  nccl_request send(const void* buf, std::size_t n, dtype t, int peer, int tag = 0, loc_t l = loc_t::current()) {
    const call_desc d{call_kind::send, n, t, reduce_op::sum, peer, tag};
    return launch(d, l, {buf}, [&, this] {
      return ncclSend(buf, n, detail::nccl_type(t), peer, state_->comm, state_->stream);
    });
  }
  nccl_request recv(void* buf, std::size_t n, dtype t, int peer, int tag = 0, loc_t l = loc_t::current()) {
    const call_desc d{call_kind::recv, n, t, reduce_op::sum, peer, tag};
    return launch(d, l, {buf}, [&, this] {
      return ncclRecv(buf, n, detail::nccl_type(t), peer, state_->comm, state_->stream);
    });
  }

  /// ncclGroupStart/End: calls inside are launched together (p2p pairs cannot deadlock).
  void group_start() {
    check(ncclGroupStart(), "ncclGroupStart");
    ++depth_;
  }
  void group_end() {
    if (depth_ == 0) throw error(prefix() + ": group_end() without a matching group_start()");
    --depth_;
    check(ncclGroupEnd(), "ncclGroupEnd");
    if (depth_ == 0) {
      for (cudaEvent_t e : grouped_) cuda(cudaEventRecord(e, state_->stream), "cudaEventRecord");
      grouped_.clear();
    }
  }

  /// A new NCCL communicator over the listed ranks (called by those ranks only): the
  /// first listed rank makes an id and sends it to the others over this communicator.
  nccl_communicator split(std::span<const int> ranks, loc_t l = loc_t::current()) {
    const std::string call = prefix() + ": split(" + group_string(ranks) + ") at " + where(l);
    int me = -1;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] < 0 || ranks[i] >= size_)
        throw error(call + ": rank " + std::to_string(ranks[i]) + " is outside this group of " + std::to_string(size_) + " ranks");
      if (ranks[i] == rank_) me = static_cast<int>(i);
    }
    if (me < 0) throw error(call + ": this rank is not in the list; only the listed ranks call split");
    ncclUniqueId id{};
    if (me == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    void* dev = nullptr;
    cuda(cudaMalloc(&dev, sizeof id), "cudaMalloc");
    cuda(cudaMemcpy(dev, &id, sizeof id, cudaMemcpyHostToDevice), "cudaMemcpy");
    after_compute();
    check(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 1; i < ranks.size(); ++i) {
      if (me == 0) check(ncclSend(dev, sizeof id, ncclUint8, ranks[i], state_->comm, state_->stream), "ncclSend");
      else if (static_cast<int>(i) == me)
        check(ncclRecv(dev, sizeof id, ncclUint8, ranks[0], state_->comm, state_->stream), "ncclRecv");
    }
    check(ncclGroupEnd(), "ncclGroupEnd");
    cuda(cudaStreamSynchronize(state_->stream), "cudaStreamSynchronize");
    cuda(cudaMemcpy(&id, dev, sizeof id, cudaMemcpyDeviceToHost), "cudaMemcpy");
    cudaFree(dev);
    nccl_communicator c(opts_);
    c.init(id, me, static_cast<int>(ranks.size()), state_->device);
    for (int r : ranks) c.world_ranks_.push_back(world_ranks_[static_cast<std::size_t>(r)]);
    return c;
  }

 private:
  explicit nccl_communicator(const nccl_options& o) : opts_(o) {}

  static void check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess && r != ncclInProgress)
      throw error(std::string("tessera::comm(nccl): ") + what + " failed: " + ncclGetErrorString(r));
  }
  static void cuda(cudaError_t r, const char* what) {
    if (r != cudaSuccess)
      throw error(std::string("tessera::comm(nccl): ") + what + " failed: " + cudaGetErrorString(r));
  }

  void init(const ncclUniqueId& id, int rank, int ranks, int device) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      throw error("tessera::comm(nccl): no CUDA device is visible; the nccl backend needs one GPU per rank");
    state_ = std::make_shared<detail::nccl_state>();
    state_->device = device % devices;
    cuda(cudaSetDevice(state_->device), "cudaSetDevice");
    cuda(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda(cudaEventCreateWithFlags(&state_->ready, cudaEventDisableTiming), "cudaEventCreate");
    cuda(cudaMalloc(reinterpret_cast<void**>(&state_->scratch), 16 * sizeof(std::int64_t)), "cudaMalloc");
    check(ncclCommInitRank(&state_->comm, ranks, id, rank), "ncclCommInitRank");
    rank_ = rank;
    size_ = ranks;
  }

  /// The communicator's stream waits for the work queued on the compute stream so far.
  void after_compute() {
    cuda(cudaEventRecord(state_->ready, opts_.compute_stream), "cudaEventRecord (compute stream)");
    cuda(cudaStreamWaitEvent(state_->stream, state_->ready, 0), "cudaStreamWaitEvent");
  }

  std::string prefix() const {
    return "tessera::comm(nccl): rank " +
           std::to_string(world_ranks_.empty() ? rank_ : world_ranks_[static_cast<std::size_t>(rank_)]) +
           " of group " + group_string(world_ranks_);
  }
  std::string who(const call_desc& d, const loc_t& l) const { return prefix() + ": " + d.str() + " at " + where(l); }

  /// Queues call f on the communicator's stream after the compute stream's work so far; the
  /// blocks of `buffers` are recorded with the stream (core/cuda_block_cache.hpp: freed, a
  /// block is reused only after what the stream queued on it).
  template <class F>
  nccl_request launch(const call_desc& d, const loc_t& l, std::initializer_list<const void*> buffers, F&& f) {
    const std::string w = who(d, l);
    if ((d.kind == call_kind::reduce_scatter || d.kind == call_kind::all_reduce) && !reducible(d.type))
      throw error(w + ": " + std::string(short_name(d.type)) + " cannot be reduced; convert to f32 or bf16 first");
    if ((d.kind == call_kind::broadcast || is_p2p(d.kind)) && (d.peer < 0 || d.peer >= size_))
      throw error(w + ": rank " + std::to_string(d.peer) + " is outside this group of " + std::to_string(size_) + " ranks");
    nccl_request r;
    r.state_ = state_;
    r.who_ = w;
    r.timeout_ms_ = static_cast<long long>(opts_.timeout.count());
    r.deadline_ = std::chrono::steady_clock::now() + opts_.timeout;
    if (opts_.check_calls && !is_p2p(d.kind) && depth_ == 0) agree(d, r);
    after_compute();
    const ncclResult_t rc = f();
    if (rc != ncclSuccess && rc != ncclInProgress) throw error(w + ": " + ncclGetErrorString(rc));
    for (const void* b : buffers) tessera::detail::cuda_block_cache::get().record_stream(b, state_->stream);
    cuda(cudaEventCreateWithFlags(&r.ev_, cudaEventDisableTiming), "cudaEventCreate");
    // Inside a group NCCL enqueues the calls at ncclGroupEnd: the completion event is
    // recorded there, after them (recorded now it would precede them and report done).
    if (depth_ > 0)
      grouped_.push_back(r.ev_);
    else
      cuda(cudaEventRecord(r.ev_, state_->stream), "cudaEventRecord");
    return r;
  }

  void agree(const call_desc& d, nccl_request& r) {
    constexpr int k = 5;
    const std::int64_t mine[k] = {static_cast<std::int64_t>(d.kind), static_cast<std::int64_t>(d.count),
                                   static_cast<std::int64_t>(d.type), static_cast<std::int64_t>(d.op), d.peer};
    std::int64_t buf[2 * k];
    for (int i = 0; i < k; ++i) buf[i] = mine[i], buf[k + i] = -mine[i];
    cuda(cudaMemcpyAsync(state_->scratch, buf, sizeof buf, cudaMemcpyHostToDevice, state_->stream), "cudaMemcpyAsync");
    check(ncclAllReduce(state_->scratch, state_->scratch, 2 * k, ncclInt64, ncclMax, state_->comm, state_->stream),
          "ncclAllReduce (call check)");
    cuda(cudaMemcpyAsync(buf, state_->scratch, sizeof buf, cudaMemcpyDeviceToHost, state_->stream), "cudaMemcpyAsync");
    nccl_request q;
    q.state_ = state_;
    q.who_ = r.who_ + " (call check)";
    q.deadline_ = r.deadline_;
    q.timeout_ms_ = r.timeout_ms_;
    cuda(cudaEventCreateWithFlags(&q.ev_, cudaEventDisableTiming), "cudaEventCreate");
    cuda(cudaEventRecord(q.ev_, state_->stream), "cudaEventRecord");
    q.wait();
    static constexpr const char* field[k] = {"call", "count", "dtype", "reduce op", "root"};
    for (int i = 0; i < k; ++i)
      if (buf[i] != -buf[k + i])
        throw error("tessera::comm(nccl): mismatched collective of group " + group_string(world_ranks_) + ": " +
                    r.who_ + ", but the ranks disagree on the " + field[i] + " (from " +
                    std::to_string(-buf[k + i]) + " to " + std::to_string(buf[i]) + " across ranks)");
  }

  std::shared_ptr<detail::nccl_state> state_;
  nccl_options opts_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;
  int depth_ = 0;
  std::vector<cudaEvent_t> grouped_;  // events of the calls of the open group, recorded at its end
};

static_assert(communicator<nccl_communicator>);

}  // namespace tessera::comm
