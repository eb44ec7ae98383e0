// tessera/comm/nccl.hpp: the `nccl` backend: buffers are CUDA device pointers, calls are
// enqueued on the communicator's CUDA stream, a request is a CUDA event.
// tessera-requires: nccl
//
// Ordering: each call's stream first waits for the work queued so far on the compute stream
// (nccl_options::compute_stream; the legacy default stream by default), so a collective reads
// what the kernels before it wrote without a host synchronization; request::wait() blocks the
// host until the call is done, after which the compute stream may read its output and reuse
// its buffers.
//
// Bootstrap, either
//   * through any tessera communicator (MPI under mpirun, or threads in one process),
//     which broadcasts rank 0's ncclUniqueId:  nccl_communicator::bootstrap(mpi_world);
//   * or through torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
//     MASTER_PORT): nccl_communicator::from_env();
// Each rank uses device LOCAL_RANK (or the bootstrap rank) modulo the visible devices.
// Checked calls (default on): ranks agree on each collective's (kind, count, dtype, op,
// root) with a small all-reduce first, so a mismatch is an error naming rank, group and
// call. Timeouts poll the event and ncclCommGetAsyncError; a timed-out communicator is
// aborted (ncclCommAbort), as NCCL's watchdog does.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <tessera/core/source_location.hpp>
#include <span>
#include <string>
#include <tessera/comm/communicator.hpp>
#include <tessera/comm/detail/tcp_rendezvous.hpp>
#include <tessera/comm/types.hpp>
#include <thread>
#include <vector>

namespace tessera::comm {

struct nccl_options : options {
  bool check_calls = true;
  /// The stream the buffers are computed on (null: the legacy default stream, where
  /// cuda_kernels queues everything). Each call's stream waits for the work queued there so
  /// far, as PyTorch's ProcessGroupNCCL makes its NCCL stream wait for the current stream.
  cudaStream_t compute_stream = nullptr;
};

namespace detail {
inline ncclDataType_t nccl_type(dtype t) {
  switch (t) {
    case dtype::u8: return ncclUint8;
    case dtype::i32: return ncclInt32;
    case dtype::i64: return ncclInt64;
    case dtype::f32: return ncclFloat32;
    case dtype::f64: return ncclFloat64;
    case dtype::bf16: return ncclBfloat16;
    case dtype::f16: return ncclFloat16;
    case dtype::f8e4m3: case dtype::f8e5m2: return ncclUint8;  // moved, never reduced
  }
  return ncclUint8;
}
inline ncclRedOp_t nccl_op(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return ncclSum;
    case reduce_op::avg: return ncclAvg;
    case reduce_op::max: return ncclMax;
    case reduce_op::min: return ncclMin;
  }
  return ncclSum;
}

/// What the communicators split from one another share: the NCCL comm and the stream.
struct nccl_state {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;  // recorded on the compute stream before each call
  int device = 0;
  std::int64_t* scratch = nullptr;  // device buffer of the call checks
  bool aborted = false;
  ~nccl_state() {
    if (scratch) cudaFree(scratch);
    if (comm) {
      if (aborted) ncclCommAbort(comm); else ncclCommDestroy(comm);
    }
    if (ready) cudaEventDestroy(ready);
    if (stream) cudaStreamDestroy(stream);
  }
};
}  // namespace detail

class nccl_request {
 public:
  nccl_request() = default;
  nccl_request(nccl_request&& o) noexcept { *this = std::move(o); }
  nccl_request& operator=(nccl_request&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      state_ = std::move(o.state_);
      ev_ = std::exchange(o.ev_, nullptr);
      who_ = std::move(o.who_);
      deadline_ = o.deadline_;
      timeout_ms_ = o.timeout_ms_;
    }
    return *this;
  }
  ~nccl_request() { finish_quietly(); }

  void wait() {
    while (!test()) std::this_thread::yield();
  }
  bool test() {
    if (!ev_) return true;
    const cudaError_t q = cudaEventQuery(ev_);
    if (q == cudaSuccess) {
      release();
      return true;
    }
    if (q != cudaErrorNotReady) fail(std::string("CUDA error: ") + cudaGetErrorString(q));
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(state_->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress)
      fail(std::string("NCCL error: ") + ncclGetErrorString(async));
    if (std::chrono::steady_clock::now() > deadline_) {
      state_->aborted = true;
      fail("timed out after " + std::to_string(timeout_ms_) +
           " ms (a rank did not join this call); the NCCL communicator is aborted");
    }
    return false;
  }

 private:
  friend class nccl_communicator;
  void release() {
    if (ev_) cudaEventDestroy(ev_);
    ev_ = nullptr;
  }
  [[noreturn]] void fail(const std::string& why) {
    release();
    throw error(who_ + ": " + why);
  }
  void finish_quietly() noexcept {
    try {
      wait();
    } catch (...) {
    }
  }

  std::shared_ptr<detail::nccl_state> state_;
  cudaEvent_t ev_ = nullptr;
  std::string who_;
  std::chrono::steady_clock::time_point deadline_{};
  long long timeout_ms_ = 0;
};

}  // namespace tessera::comm

#include <tessera/comm/detail/nccl_comm.hpp>
