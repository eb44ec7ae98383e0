// tessera/tensor/cuda_memory.hpp: the CUDA device memory space, streams and events.
// tessera-requires: cuda
//
// `cuda_space` is a memory space (tensor/memory.hpp) beside `host_space`: tensor<float,
// cuda_space> and arenas allocate device memory through it, and memory_tracker<cuda_space>
// counts every byte as the host tracker does (current, peak, hook) -- what the memory
// estimator is checked against on a GPU. Device memory is zeroed on allocation (host tensors
// are too), and the host may not dereference it (tensor::span and operator() are host-only).
// cuda_stream and cuda_event own a cudaStream_t / cudaEvent_t. Every CUDA call is checked:
// a failure throws tessera::error naming the call, the sizes and CUDA's own message.
// Plain C++ (the CUDA runtime API): compiles with the host compiler, no nvcc needed.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <tessera/core/cuda_block_cache.hpp>
#include <tessera/core/error.hpp>
#include <tessera/tensor/memory.hpp>

namespace tessera {

/// Throws tessera::error when `e` is not cudaSuccess: "<what>: <CUDA's name>: <its message>".
inline void cuda_check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear it, so that the next call does not report it again
  throw error(what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

/// The number of CUDA devices: 0 when there is no driver or no device (the GPU tests then
/// report themselves skipped).
inline int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/// Device memory of the current CUDA device, 256-byte aligned (cudaMalloc's guarantee),
/// zeroed, tracked by memory_tracker<cuda_space> (the bytes tessera holds; blocks it freed
/// are kept for reuse -- core/cuda_block_cache.hpp -- and not counted).
struct cuda_space {
  static constexpr std::string_view name = "cuda";
  static constexpr bool host_accessible = false;
  static constexpr std::size_t alignment = 256;

  static void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    int device = 0;
    cuda_check(cudaGetDevice(&device), "cuda_space: cudaGetDevice");
    auto& cache = detail::cuda_block_cache::get();
    void* p = cache.take(device, bytes);
    if (p) {
      cuda_check(cudaMemsetAsync(p, 0, bytes, nullptr), "cuda_space: cudaMemsetAsync of a reused block");
    } else {
      cudaError_t e = cudaMalloc(&p, bytes);
      if (e == cudaErrorMemoryAllocation && cache.release(device) > 0) {  // the cache's blocks back, then again
        (void)cudaGetLastError();
        e = cudaMalloc(&p, bytes);
      }
      cuda_check(e, "cuda_space: cudaMalloc of " + std::to_string(bytes) + " bytes (" +
                        std::to_string(memory_tracker<cuda_space>::current_bytes()) +
                        " bytes already held by tessera)");
      cache.track(p, bytes, device);
      cuda_check(cudaMemset(p, 0, bytes), "cuda_space: cudaMemset");
    }
    memory_tracker<cuda_space>::record(static_cast<std::int64_t>(bytes));
    return p;
  }
  static void deallocate(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    try {
      detail::cuda_block_cache::get().give(p, bytes);
    } catch (...) {  // the cache's bookkeeping could not grow: freed at once instead
      (void)cudaFree(p);
    }
    memory_tracker<cuda_space>::record(-static_cast<std::int64_t>(bytes));
  }
  /// Frees the blocks kept for reuse (cudaFree, which waits for the device) on the current
  /// device, e.g. before handing the GPU's memory to another library; the bytes freed.
  static std::size_t release_cached() {
    int device = 0;
    cuda_check(cudaGetDevice(&device), "cuda_space: cudaGetDevice");
    return detail::cuda_block_cache::get().release(device);
  }

  // data movement (data_space): copies are issued on the legacy default stream, which
  // orders them with every kernel launched there; fence() waits for the whole device
  // (kernels on other streams too) before a collective reads the data
  static constexpr bool device_buffers = true;
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes && dst != src)
      cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr),
                 "cuda_space::copy: cudaMemcpyAsync of " + std::to_string(bytes) + " bytes");
  }
  static void copy_2d(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                      std::size_t height) {
    if (width && height)
      cuda_check(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice, nullptr),
                 "cuda_space::copy_2d: cudaMemcpy2DAsync of " + std::to_string(height) + " rows of " +
                     std::to_string(width) + " bytes");
  }
  static void zero(void* dst, std::size_t bytes) {
    if (bytes) cuda_check(cudaMemsetAsync(dst, 0, bytes, nullptr), "cuda_space::zero: cudaMemsetAsync");
  }
  static void from_host(void* dst, const void* src, std::size_t bytes) {
    if (bytes)
      cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice),
                 "cuda_space::from_host: cudaMemcpy of " + std::to_string(bytes) + " bytes");
  }
  static void to_host(void* dst, const void* src, std::size_t bytes) {
    if (bytes)
      cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost),
                 "cuda_space::to_host: cudaMemcpy of " + std::to_string(bytes) + " bytes");
  }
  static void fence() { cuda_check(cudaDeviceSynchronize(), "cuda_space::fence: cudaDeviceSynchronize"); }
};
static_assert(data_space<cuda_space>);

/// An owned non-blocking CUDA stream.
class cuda_stream {
 public:
  cuda_stream() { cuda_check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cuda_stream: cudaStreamCreate"); }
  ~cuda_stream() {
    if (s_) (void)cudaStreamDestroy(s_);
  }
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;
  cudaStream_t get() const noexcept { return s_; }
  void synchronize() const { cuda_check(cudaStreamSynchronize(s_), "cuda_stream: cudaStreamSynchronize"); }

 private:
  cudaStream_t s_ = nullptr;
};

/// An owned CUDA event (with timing).
class cuda_event {
 public:
  cuda_event() { cuda_check(cudaEventCreate(&e_), "cuda_event: cudaEventCreate"); }
  ~cuda_event() {
    if (e_) (void)cudaEventDestroy(e_);
  }
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;
  cudaEvent_t get() const noexcept { return e_; }
  void record(cudaStream_t s = nullptr) { cuda_check(cudaEventRecord(e_, s), "cuda_event: cudaEventRecord"); }
  void synchronize() const { cuda_check(cudaEventSynchronize(e_), "cuda_event: cudaEventSynchronize"); }
  /// Milliseconds from `start` to this event (both recorded and complete).
  float since(const cuda_event& start) const {
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, start.e_, e_), "cuda_event: cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

/// Copies `bytes` host -> device, device -> host (synchronous on the default stream).
inline void copy_to_device(void* dst, const void* src, std::size_t bytes) { cuda_space::from_host(dst, src, bytes); }
inline void copy_to_host(void* dst, const void* src, std::size_t bytes) { cuda_space::to_host(dst, src, bytes); }

}  // namespace tessera
