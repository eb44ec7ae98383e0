// The NCCL calls tessera makes (comm/nccl.hpp), emulated between the host threads of one
// process beside the CUDA runtime's emulation (cuda_runtime_emulation.hpp), so that the nccl
// backend, dist_tensor in cuda_space and the recipes on GPUs run without a GPU: each rank a
// thread on its own emulated device (cudaSetDevice), as comm::run_threads starts them.
//
// A communicator is a clique of ranks met through ncclUniqueId. A collective runs when it is
// called and returns when this rank's part is done: every rank posts its buffers, waits for
// the others, computes its own output from all ranks' inputs (reductions in rank order: f32
// and f64 in their type, bf16 in f32 rounded once, integers in their type; f16, which tessera
// never reduces, refused), waits
// again -- so no rank overwrites an input another still reads -- and writes it. Sends copy
// into the receiver's mailbox and return; a receive waits for its message. Calls between
// ncclGroupStart and ncclGroupEnd run at ncclGroupEnd, sends first, so that grouped pairs
// cannot deadlock, as NCCL promises.
// What it refuses, as NCCL does or a GPU would fault: buffers outside device memory or on
// another device than the communicator's (ncclInvalidArgument), a rank or peer out of range,
// a receive whose message has another size, ranks that disagree on a collective's kind or
// count (ncclInvalidUsage), and a collective some rank never joins -- after 120 s, instead of
// hanging (ncclSystemError). Every call completes when it returns; its
// buffers are issued on its stream to the order checker (cuda_stream_order.hpp), so compute
// on another stream that NCCL's is not ordered with is a race. Not emulated: NCCL's reduction
// order, speed, more than one process.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <cuda_runtime_emulation.hpp>
#include <tessera/tensor/dtype.hpp>

enum ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};
enum ncclDataType_t {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
};
enum ncclRedOp_t { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };
struct ncclUniqueId {
  char internal[128];
};

namespace tessera::cuda::emulation::nccl {
inline std::size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    case ncclFloat32: return 4;
  }
  return 1;
}

/// One collective or p2p call as a rank posts it.
struct post {
  int kind = 0;  // 0 all_reduce, 1 all_gather, 2 reduce_scatter, 3 broadcast
  const void* in = nullptr;
  std::size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
};

/// The ranks of one communicator: their posts, a generation barrier, the p2p mailboxes.
struct clique {
  explicit clique(int n) : size(n), posts(static_cast<std::size_t>(n)) {}
  int size;
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  std::uint64_t generation = 0;
  std::vector<post> posts;
  std::map<std::pair<int, int>, std::deque<std::vector<unsigned char>>> mail;  // (from, to)

  /// Waits until every rank has arrived; false after 120 s.
  bool barrier() {
    std::unique_lock lock(m);
    const std::uint64_t g = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return true;
    }
    return cv.wait_for(lock, std::chrono::seconds(120), [&, this] { return generation != g; });
  }
};

struct comm {
  std::shared_ptr<clique> c;
  int rank = 0, device = 0;
};

/// The cliques by id, until all their ranks have joined.
struct registry {
  std::mutex m;
  std::map<std::uint64_t, std::pair<std::shared_ptr<clique>, int>> joining;  // id -> (clique, ranks joined)
  std::atomic<std::uint64_t> next{1};
  static registry& get() {
    static registry r;
    return r;
  }
};

/// Calls queued between ncclGroupStart and ncclGroupEnd on this thread (sends apart).
struct group {
  int depth = 0;
  std::vector<std::function<ncclResult_t()>> sends, others;
};
inline thread_local group pending;

/// out[i] = op over ranks of element i of ins[r] + offset (rank order), elements of type T
/// accumulated in Acc (T itself; f32 for bf16, rounded once at the end).
template <class T, class Acc = T>
void reduce_into(void* out, const std::vector<post>& posts, std::size_t offset, std::size_t n, ncclRedOp_t op) {
  std::vector<Acc> acc(n);
  for (std::size_t r = 0; r < posts.size(); ++r) {
    const T* in = static_cast<const T*>(posts[r].in) + offset;
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<Acc>(in[i]);
      if (r == 0) acc[i] = v;
      else if (op == ncclSum || op == ncclAvg) acc[i] = static_cast<Acc>(acc[i] + v);
      else if (op == ncclProd) acc[i] = static_cast<Acc>(acc[i] * v);
      else if (op == ncclMax) acc[i] = v > acc[i] ? v : acc[i];
      else acc[i] = v < acc[i] ? v : acc[i];
    }
  }
  T* o = static_cast<T*>(out);
  for (std::size_t i = 0; i < n; ++i)
    o[i] = static_cast<T>(op == ncclAvg ? static_cast<Acc>(acc[i] / static_cast<Acc>(posts.size())) : acc[i]);
}
/// False for f16, which tessera never reduces (comm/types.hpp) and this emulation does not.
inline bool reduce_any(void* out, const std::vector<post>& posts, std::size_t offset, std::size_t n, ncclDataType_t t,
                       ncclRedOp_t op) {
  switch (t) {
    case ncclInt8: reduce_into<std::int8_t>(out, posts, offset, n, op); break;
    case ncclUint8: reduce_into<std::uint8_t>(out, posts, offset, n, op); break;
    case ncclInt32: reduce_into<std::int32_t>(out, posts, offset, n, op); break;
    case ncclUint32: reduce_into<std::uint32_t>(out, posts, offset, n, op); break;
    case ncclInt64: reduce_into<std::int64_t>(out, posts, offset, n, op); break;
    case ncclUint64: reduce_into<std::uint64_t>(out, posts, offset, n, op); break;
    case ncclFloat32: reduce_into<float>(out, posts, offset, n, op); break;
    case ncclFloat64: reduce_into<double>(out, posts, offset, n, op); break;
    case ncclBfloat16: reduce_into<bf16, float>(out, posts, offset, n, op); break;
    case ncclFloat16: return false;
  }
  return true;
}

/// Whether [p, p + bytes) is device memory of the communicator's device.
inline bool on_comm_device(const comm& k, const void* p, std::size_t bytes) {
  return bytes == 0 || device_holding(p, bytes) == k.device;
}

inline const char* call_name(int kind) {
  static constexpr const char* names[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast"};
  return names[kind];
}

/// One collective: issued on `stream` to the order checker, post, meet, compute this rank's
/// output, meet, write it.
inline ncclResult_t collective(comm* k, post mine, void* out, std::size_t out_bytes, cudaStream_t stream) {
  if (!k) return ncclInvalidArgument;
  const std::size_t in_bytes = mine.kind == 2 ? mine.count * static_cast<std::size_t>(k->c->size) * type_size(mine.type)
                                              : mine.count * type_size(mine.type);
  const bool reads = mine.kind != 3 || k->rank == mine.root;
  if ((reads && !on_comm_device(*k, mine.in, in_bytes)) || !on_comm_device(*k, out, out_bytes))
    return ncclInvalidArgument;
  if (mine.kind == 3 && (mine.root < 0 || mine.root >= k->c->size)) return ncclInvalidArgument;
  if (!valid_stream(stream)) return ncclInvalidArgument;
  // this rank's buffers stay open until after the second meeting: the others read its input
  device_access open;
  issue(stream, call_name(mine.kind), {open.add(mine.in, reads ? in_bytes : 0, false), open.add(out, out_bytes, true)});
  clique& c = *k->c;
  c.posts[static_cast<std::size_t>(k->rank)] = mine;
  if (!c.barrier()) return ncclSystemError;
  for (const post& p : c.posts)
    if (p.kind != mine.kind || p.count != mine.count || p.type != mine.type || p.op != mine.op || p.root != mine.root) {
      c.barrier();
      return ncclInvalidUsage;
    }
  std::vector<unsigned char> result(out_bytes);
  const std::size_t n = mine.count, es = type_size(mine.type);
  bool ok = true;
  switch (mine.kind) {
    case 0: ok = reduce_any(result.data(), c.posts, 0, n, mine.type, mine.op); break;
    case 1:
      for (std::size_t r = 0; r < c.posts.size(); ++r) std::memcpy(result.data() + r * n * es, c.posts[r].in, n * es);
      break;
    case 2: ok = reduce_any(result.data(), c.posts, static_cast<std::size_t>(k->rank) * n, n, mine.type, mine.op); break;
    case 3: std::memcpy(result.data(), c.posts[static_cast<std::size_t>(mine.root)].in, n * es); break;
  }
  if (!c.barrier()) return ncclSystemError;
  if (!ok) return ncclInvalidArgument;
  if (out_bytes) std::memcpy(out, result.data(), out_bytes);
  return ncclSuccess;
}

/// Runs f now, or at ncclGroupEnd inside a group (sends apart, first).
template <class F>
ncclResult_t now_or_grouped(bool send, F f) {
  if (pending.depth == 0) return f();
  (send ? pending.sends : pending.others).emplace_back(std::move(f));
  return ncclSuccess;
}
}  // namespace tessera::cuda::emulation::nccl

using ncclComm_t = tessera::cuda::emulation::nccl::comm*;

inline const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error (emulation: a rank did not join the call within 120 s)";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument:
      return "invalid argument (emulation: a buffer outside the communicator's device memory, or a rank out of range)";
    case ncclInvalidUsage: return "invalid usage (emulation: the ranks called different collectives, or sizes differ)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}
inline ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  *id = {};
  const std::uint64_t v = tessera::cuda::emulation::nccl::registry::get().next.fetch_add(1);
  std::memcpy(id->internal, &v, sizeof v);
  return ncclSuccess;
}
inline ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  namespace nc = tessera::cuda::emulation::nccl;
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  std::uint64_t key = 0;
  std::memcpy(&key, id.internal, sizeof key);
  auto& reg = nc::registry::get();
  std::shared_ptr<nc::clique> c;
  {
    std::lock_guard lock(reg.m);
    auto& slot = reg.joining[key];
    if (!slot.first) slot.first = std::make_shared<nc::clique>(nranks);
    if (slot.first->size != nranks) return ncclInvalidUsage;
    c = slot.first;
    if (++slot.second == nranks) reg.joining.erase(key);
  }
  int device = 0;
  cudaGetDevice(&device);
  *out = new nc::comm{c, rank, device};
  return ncclSuccess;
}
inline ncclResult_t ncclCommDestroy(ncclComm_t k) {
  delete k;
  return ncclSuccess;
}
inline ncclResult_t ncclCommAbort(ncclComm_t k) { return ncclCommDestroy(k); }
inline ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* r) {
  *r = ncclSuccess;
  return ncclSuccess;
}
inline ncclResult_t ncclGroupStart() {
  ++tessera::cuda::emulation::nccl::pending.depth;
  return ncclSuccess;
}
inline ncclResult_t ncclGroupEnd() {
  auto& g = tessera::cuda::emulation::nccl::pending;
  if (g.depth == 0) return ncclInvalidUsage;
  if (--g.depth > 0) return ncclSuccess;
  auto sends = std::move(g.sends), others = std::move(g.others);
  g.sends.clear(), g.others.clear();
  ncclResult_t r = ncclSuccess;
  for (auto& f : sends)
    if (const ncclResult_t e = f(); r == ncclSuccess) r = e;
  for (auto& f : others)
    if (const ncclResult_t e = f(); r == ncclSuccess) r = e;
  return r;
}
inline ncclResult_t ncclAllReduce(const void* in, void* out, std::size_t n, ncclDataType_t t, ncclRedOp_t op,
                                  ncclComm_t k, cudaStream_t s) {
  namespace nc = tessera::cuda::emulation::nccl;
  return nc::now_or_grouped(false, [=] { return nc::collective(k, {0, in, n, t, op, 0}, out, n * nc::type_size(t), s); });
}
inline ncclResult_t ncclAllGather(const void* in, void* out, std::size_t n, ncclDataType_t t, ncclComm_t k,
                                  cudaStream_t s) {
  namespace nc = tessera::cuda::emulation::nccl;
  return nc::now_or_grouped(false, [=] {
    return nc::collective(k, {1, in, n, t, ncclSum, 0}, out,
                          k ? n * nc::type_size(t) * static_cast<std::size_t>(k->c->size) : 0, s);
  });
}
inline ncclResult_t ncclReduceScatter(const void* in, void* out, std::size_t n, ncclDataType_t t, ncclRedOp_t op,
                                      ncclComm_t k, cudaStream_t s) {
  namespace nc = tessera::cuda::emulation::nccl;
  return nc::now_or_grouped(false, [=] { return nc::collective(k, {2, in, n, t, op, 0}, out, n * nc::type_size(t), s); });
}
inline ncclResult_t ncclBroadcast(const void* in, void* out, std::size_t n, ncclDataType_t t, int root, ncclComm_t k,
                                  cudaStream_t s) {
  namespace nc = tessera::cuda::emulation::nccl;
  return nc::now_or_grouped(false,
                            [=] { return nc::collective(k, {3, in, n, t, ncclSum, root}, out, n * nc::type_size(t), s); });
}
inline ncclResult_t ncclSend(const void* buf, std::size_t n, ncclDataType_t t, int peer, ncclComm_t k, cudaStream_t s) {
  namespace nc = tessera::cuda::emulation::nccl;
  return nc::now_or_grouped(true, [=]() -> ncclResult_t {
    const std::size_t bytes = n * nc::type_size(t);
    if (!k || peer < 0 || peer >= k->c->size || !nc::on_comm_device(*k, buf, bytes) || !tessera::cuda::emulation::valid_stream(s))
      return ncclInvalidArgument;
    tessera::cuda::emulation::device_access open;
    tessera::cuda::emulation::issue(s, "ncclSend", {open.add(buf, bytes, false)});
    const auto* p = static_cast<const unsigned char*>(buf);
    std::lock_guard lock(k->c->m);
    k->c->mail[{k->rank, peer}].emplace_back(p, p + bytes);
    k->c->cv.notify_all();
    return ncclSuccess;
  });
}
inline ncclResult_t ncclRecv(void* buf, std::size_t n, ncclDataType_t t, int peer, ncclComm_t k, cudaStream_t s) {
  namespace nc = tessera::cuda::emulation::nccl;
  return nc::now_or_grouped(false, [=]() -> ncclResult_t {
    const std::size_t bytes = n * nc::type_size(t);
    if (!k || peer < 0 || peer >= k->c->size || !nc::on_comm_device(*k, buf, bytes) || !tessera::cuda::emulation::valid_stream(s))
      return ncclInvalidArgument;
    tessera::cuda::emulation::device_access open;
    tessera::cuda::emulation::issue(s, "ncclRecv", {open.add(buf, bytes, true)});
    std::unique_lock lock(k->c->m);
    auto& box = k->c->mail[{peer, k->rank}];
    if (!k->c->cv.wait_for(lock, std::chrono::seconds(120), [&] { return !box.empty(); })) return ncclSystemError;
    std::vector<unsigned char> msg = std::move(box.front());
    box.pop_front();
    if (msg.size() != bytes) return ncclInvalidUsage;
    std::memcpy(buf, msg.data(), bytes);
    return ncclSuccess;
  });
}
