// tessera/comm/cuda_staged.hpp: cuda_staged<C>, a communicator over CUDA device buffers that
// stages every call through host memory and runs it on a host communicator C (threads or mpi)
// -- what PyTorch's gloo process group does with CUDA tensors. NCCL refuses two ranks on one
// GPU; this backend does not, so a recipe of 4 ranks runs on one GPU (ranks as threads of one
// process, or processes under mpirun), its kernels and device memory the real ones and only
// the transfers through the host: for debugging a composition on a workstation, and for the
// GPU tests on a machine with fewer GPUs than ranks (tests/gpu/test_cuda_recipes.cu).
// tessera-requires: cuda
//
// Every call first waits for the whole device (cudaDeviceSynchronize: kernels on any stream
// have written the input), copies the input to host memory, runs C's call there, and copies
// the output back, the device synchronized again: a collective is complete when it returns,
// as its request says. A send is staged when posted; a receive lands in device memory when its
// request is waited on (or tested complete), so the receives of a group -- p2p pairs posted
// between group_start and group_end -- complete as C's do. Slow by design: two host copies a
// call, and nothing overlaps; on GPUs of their own the ranks use nccl_communicator.
// Each rank sets its thread's device at construction: `device`, or its rank modulo the visible
// devices (ranks 0-3 of 4 all on the one GPU of a machine with one).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <tessera/comm/communicator.hpp>
#include <tessera/comm/types.hpp>
#include <tessera/core/source_location.hpp>
#include <utility>
#include <vector>

namespace tessera::comm {

namespace detail {
inline void staged_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw error(std::string("tessera::comm(cuda-staged): ") + what + ": " + cudaGetErrorString(e));
}
/// Host copy of `bytes` of device memory at `d` (after the device's work so far).
inline void staged_to_host(void* h, const void* d, std::size_t bytes) {
  staged_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before staging to the host");
  if (bytes) staged_check(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
}
/// Device copy of `bytes` of host memory, complete on return.
inline void staged_to_device(void* d, const void* h, std::size_t bytes) {
  if (!bytes) return;
  staged_check(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  staged_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after staging to the device");
}
}  // namespace detail

/// A cuda_staged call's request: C's request on the host copy, and for a receive the copy to
/// device memory that completing it makes.
template <request Inner>
class cuda_staged_request {
 public:
  cuda_staged_request() = default;
  cuda_staged_request(Inner r, std::shared_ptr<std::vector<std::byte>> host, void* device)
      : host_(std::move(host)), inner_(std::move(r)), device_(device), active_(true) {}
  cuda_staged_request(cuda_staged_request&& o) noexcept { *this = std::move(o); }
  cuda_staged_request& operator=(cuda_staged_request&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      host_ = std::move(o.host_), inner_ = std::move(o.inner_), device_ = o.device_;
      active_ = std::exchange(o.active_, false);
    }
    return *this;
  }
  ~cuda_staged_request() { finish_quietly(); }

  void wait() {
    if (!active_) return;
    inner_.wait();
    finish();
  }
  bool test() {
    if (!active_) return true;
    if (!inner_.test()) return false;
    finish();
    return true;
  }

 private:
  std::shared_ptr<std::vector<std::byte>> host_;  // declared first: freed after inner_ completes
  Inner inner_{};
  void* device_ = nullptr;  // a receive's destination
  bool active_ = false;

  void finish() {
    active_ = false;
    if (device_ != nullptr) detail::staged_to_device(device_, host_->data(), host_->size());
    host_.reset();
  }
  void finish_quietly() noexcept {
    try {
      wait();
    } catch (...) {
      active_ = false;
    }
  }
};

/// One rank's communicator over device buffers, staged through host communicator C. Models
/// `communicator`; backend() is "cuda-staged(<C's backend>)".
template <communicator C>
class cuda_staged {
  using inner_request = decltype(std::declval<C&>().barrier());

 public:
  using request_type = cuda_staged_request<inner_request>;
  using loc_t = tessera::source_location;

  /// Rank c.rank() of c's group, on CUDA device `device` (-1: c.rank() modulo the visible devices).
  explicit cuda_staged(C c, int device = -1) : c_(std::move(c)), device_(device) {
    if (device_ < 0) {
      int n = 0;
      detail::staged_check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
      if (n <= 0)
        throw error("tessera::comm(cuda-staged): no CUDA device is visible; this backend stages device buffers");
      device_ = c_.rank() % n;
    }
    detail::staged_check(cudaSetDevice(device_), "cudaSetDevice");
  }

  int rank() const { return c_.rank(); }
  int size() const { return c_.size(); }
  std::span<const int> world_ranks() const { return c_.world_ranks(); }
  std::string backend() const {
    if constexpr (requires { c_.backend(); }) return "cuda-staged(" + c_.backend() + ")";
    else return "cuda-staged";
  }
  int device() const noexcept { return device_; }

  request_type all_gather(const void* in, void* out, std::size_t n, dtype t, loc_t l = loc_t::current()) {
    const std::size_t b = n * size_of(t);
    return collective(in, b, out, b * parts(),
                      [&, this](std::byte* i, std::byte* o) { return c_.all_gather(i, o, n, t, l); });
  }
  request_type reduce_scatter(const void* in, void* out, std::size_t n, dtype t, reduce_op op,
                              loc_t l = loc_t::current()) {
    const std::size_t b = n * size_of(t);
    return collective(in, b * parts(), out, b,
                      [&, this](std::byte* i, std::byte* o) { return c_.reduce_scatter(i, o, n, t, op, l); });
  }
  request_type all_reduce(const void* in, void* out, std::size_t n, dtype t, reduce_op op, loc_t l = loc_t::current()) {
    const std::size_t b = n * size_of(t);
    return collective(in, b, out, b,
                      [&, this](std::byte* i, std::byte* o) { return c_.all_reduce(i, o, n, t, op, l); });
  }
  request_type all_to_all(const void* in, void* out, std::size_t n, dtype t, loc_t l = loc_t::current()) {
    const std::size_t b = n * size_of(t) * parts();
    return collective(in, b, out, b, [&, this](std::byte* i, std::byte* o) { return c_.all_to_all(i, o, n, t, l); });
  }
  request_type broadcast(void* buf, std::size_t n, dtype t, int root, loc_t l = loc_t::current()) {
    const std::size_t b = n * size_of(t);
    std::vector<std::byte> h(b);
    detail::staged_to_host(h.data(), buf, b);
    c_.broadcast(h.data(), n, t, root, l).wait();
    detail::staged_to_device(buf, h.data(), b);
    return {};
  }
  request_type barrier(loc_t l = loc_t::current()) {
    detail::staged_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a barrier");
    c_.barrier(l).wait();
    return {};
  }
  request_type send(const void* buf, std::size_t n, dtype t, int peer, int tag = 0, loc_t l = loc_t::current()) {
    auto h = std::make_shared<std::vector<std::byte>>(n * size_of(t));
    detail::staged_to_host(h->data(), buf, h->size());
    auto r = c_.send(h->data(), n, t, peer, tag, l);
    return request_type(std::move(r), std::move(h), nullptr);
  }
  request_type recv(void* buf, std::size_t n, dtype t, int peer, int tag = 0, loc_t l = loc_t::current()) {
    auto h = std::make_shared<std::vector<std::byte>>(n * size_of(t));
    auto r = c_.recv(h->data(), n, t, peer, tag, l);
    return request_type(std::move(r), std::move(h), buf);
  }
  void group_start() { c_.group_start(); }
  void group_end() { c_.group_end(); }
  /// The sub-communicator of `ranks` (called by those ranks only), on this rank's device.
  cuda_staged split(std::span<const int> ranks, loc_t l = loc_t::current()) {
    return cuda_staged(c_.split(ranks, l), device_);
  }

 private:
  C c_;
  int device_;

  std::size_t parts() const { return static_cast<std::size_t>(c_.size()); }
  /// A collective: `in_bytes` at `in` to the host, `call` on the host copies, `out_bytes` back to `out`.
  template <class F>
  request_type collective(const void* in, std::size_t in_bytes, void* out, std::size_t out_bytes, F&& call) {
    std::vector<std::byte> h(in_bytes + out_bytes);
    detail::staged_to_host(h.data(), in, in_bytes);
    call(h.data(), h.data() + in_bytes).wait();
    detail::staged_to_device(out, h.data() + in_bytes, out_bytes);
    return {};
  }
};

}  // namespace tessera::comm
