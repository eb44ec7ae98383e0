// tessera/comm/mpi.hpp: the `mpi` backend: ranks are MPI processes (under mpirun), as CPU
// clusters run. Collectives map to MPI's non-blocking collectives (MPI_Iallgather, ...).
// tessera-requires: mpi
//
//   int main(int argc, char** argv) {
//     tessera::comm::mpi_environment env(argc, argv);
//     tessera::comm::mpi_communicator world;            // MPI_COMM_WORLD
//     ...
//   }
//
// Checked calls (options.check_calls, default on): before each collective the ranks agree
// on (kind, count, dtype, op, root) with one small MPI_Iallreduce, so that a mismatch is
// an error naming rank, group and call instead of undefined behaviour; it makes a
// collective's issue wait until every rank has issued it. Turn it off for speed once a
// program is known to be right. Timeouts: every wait polls with the options' deadline.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <tessera/core/source_location.hpp>
#include <span>
#include <string>
#include <tessera/comm/communicator.hpp>
#include <tessera/comm/detail/reduce.hpp>
#include <tessera/comm/types.hpp>
#include <thread>
#include <vector>

namespace tessera::comm {

/// MPI_Init_thread / MPI_Finalize for the lifetime of main (no-op if already initialized).
class mpi_environment {
 public:
  mpi_environment(int& argc, char**& argv) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      int provided = 0;
      MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
      owner_ = true;
    }
  }
  mpi_environment(const mpi_environment&) = delete;
  mpi_environment& operator=(const mpi_environment&) = delete;
  ~mpi_environment() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (owner_ && !fin) MPI_Finalize();
  }

 private:
  bool owner_ = false;
};

struct mpi_options : options {
  bool check_calls = true;
};

namespace detail {
inline MPI_Datatype mpi_type(dtype t) {
  switch (t) {
    case dtype::u8: case dtype::f8e4m3: case dtype::f8e5m2: return MPI_UINT8_T;
    case dtype::i32: return MPI_INT32_T;
    case dtype::i64: return MPI_INT64_T;
    case dtype::f32: return MPI_FLOAT;
    case dtype::f64: return MPI_DOUBLE;
    case dtype::bf16: case dtype::f16: return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

template <reduce_op Op>
void mpi_bf16_op(void* in, void* inout, int* len, MPI_Datatype*) {
  const void* srcs[2] = {inout, in};
  reduce(inout, srcs, 2, static_cast<std::size_t>(*len), dtype::bf16, Op, 1);
}

inline MPI_Op mpi_op(reduce_op op, dtype t) {
  if (t == dtype::bf16) {  // MPI has no bf16: user ops over the 16-bit patterns
    static const std::array<MPI_Op, 3> ops = [] {
      std::array<MPI_Op, 3> o{};
      MPI_Op_create(&mpi_bf16_op<reduce_op::sum>, 1, &o[0]);
      MPI_Op_create(&mpi_bf16_op<reduce_op::max>, 1, &o[1]);
      MPI_Op_create(&mpi_bf16_op<reduce_op::min>, 1, &o[2]);
      return o;
    }();
    return op == reduce_op::max ? ops[1] : op == reduce_op::min ? ops[2] : ops[0];
  }
  return op == reduce_op::max ? MPI_MAX : op == reduce_op::min ? MPI_MIN : MPI_SUM;
}

inline std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  return std::string(buf, static_cast<std::size_t>(len));
}

/// Divides the count elements at p by n (the avg of an MPI sum).
inline void divide(void* p, std::size_t count, dtype t, int n) {
  const void* srcs[1] = {p};
  reduce(p, srcs, 1, count, t, reduce_op::avg, n);
}
}  // namespace detail

class mpi_request {
 public:
  mpi_request() = default;
  mpi_request(mpi_request&& o) noexcept { *this = std::move(o); }
  mpi_request& operator=(mpi_request&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      req_ = std::exchange(o.req_, MPI_REQUEST_NULL);
      who_ = std::move(o.who_);
      deadline_ = o.deadline_;
      timeout_ms_ = o.timeout_ms_;
      avg_buf_ = o.avg_buf_; avg_count_ = o.avg_count_; avg_type_ = o.avg_type_; avg_n_ = o.avg_n_;
      recv_count_ = o.recv_count_; recv_type_ = o.recv_type_;
      active_ = std::exchange(o.active_, false);
    }
    return *this;
  }
  ~mpi_request() { finish_quietly(); }

  void wait() {
    while (!test()) std::this_thread::yield();
  }
  bool test() {
    if (!active_) return true;
    int flag = 0;
    MPI_Status st{};
    const int rc = MPI_Test(&req_, &flag, &st);
    if (rc != MPI_SUCCESS) fail(detail::mpi_error_string(rc));
    if (!flag) {
      if (std::chrono::steady_clock::now() > deadline_)
        fail("timed out after " + std::to_string(timeout_ms_) +
             " ms (a rank did not join this call, or its peer posted no matching call)");
      return false;
    }
    active_ = false;
    if (recv_count_ >= 0) {
      int got = 0;
      MPI_Get_count(&st, detail::mpi_type(recv_type_), &got);
      if (got != recv_count_)
        throw error(who_ + ": received " + std::to_string(got) + " elements, expected " +
                    std::to_string(recv_count_) + "; the matching send has a different size");
    }
    if (avg_buf_) detail::divide(avg_buf_, avg_count_, avg_type_, avg_n_);
    return true;
  }

 private:
  friend class mpi_communicator;
  [[noreturn]] void fail(const std::string& why) {
    active_ = false;
    if (recv_count_ >= 0 && req_ != MPI_REQUEST_NULL) {  // a receive can be withdrawn
      MPI_Cancel(&req_);
      MPI_Wait(&req_, MPI_STATUS_IGNORE);
    }
    throw error(who_ + ": " + why);
  }
  void finish_quietly() noexcept {
    try {
      wait();
    } catch (...) {
    }
  }

  MPI_Request req_ = MPI_REQUEST_NULL;
  std::string who_;
  std::chrono::steady_clock::time_point deadline_{};
  long long timeout_ms_ = 0;
  void* avg_buf_ = nullptr;
  std::size_t avg_count_ = 0;
  dtype avg_type_ = dtype::f32;
  int avg_n_ = 1;
  int recv_count_ = -1;
  dtype recv_type_ = dtype::u8;
  bool active_ = false;
};

}  // namespace tessera::comm

#include <tessera/comm/detail/mpi_comm.hpp>
