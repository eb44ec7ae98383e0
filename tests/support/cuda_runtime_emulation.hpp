// The CUDA runtime API tessera calls, emulated on the host beside the device code
// (cuda_emulation.hpp), so that the kernels' entry points (kernels/cuda/*.cuh), cuda_kernels
// and the GPU tests themselves run on a machine without a GPU. tests/support/emulated_cuda/
// has the CUDA headers' names (cuda_runtime.h, cublasLt.h, ...) and includes this; a target
// puts that folder first on its include path and defines TESSERA_CUDA_EMULATION.
//
// Four devices (emulation::device_count; TESSERA_EMULATED_GPUS for another count), "sm_90"
// unless emulation::compute_capability says otherwise; each host thread has its current one
// (cudaSetDevice). Device d's identity (cudaDeviceProp::uuid) is the node's GPU d's or, where
// CUDA_VISIBLE_DEVICES is set (as a launcher sets it for each process), that of the GPU its
// d-th entry names: processes share an emulated GPU where they would share a node's. Device
// memory is host memory the emulation maps and registers (cuda_device_memory_emulation.hpp),
// and what it checks is where a GPU would fail or, worse, silently read the wrong bytes:
//   - a copy or memset whose device side is not inside one live allocation, a copy whose
//     direction does not match where its pointers live, cudaFree of an unknown pointer:
//     the call returns CUDA's error (cuda_check then throws, naming the call);
//   - a kernel argument that is a pointer outside every allocation of the current device (a
//     host pointer handed to a kernel, a freed buffer, another GPU's): the launch fails with
//     cudaErrorInvalidDevicePointer, which the entry points' launch check reports;
//   - a kernel that writes into the guard bytes after an allocation's end: the launch fails
//     with cudaErrorIllegalAddress; an access past them, host code dereferencing device
//     memory, a kernel reaching an allocation none of its arguments points into: the process
//     aborts naming the allocation (its pages are the host's only during an operation on it);
//   - dynamic shared memory over 48 KiB without cudaFuncSetAttribute's opt-in for that kernel,
//     a block that is no multiple of a warp or over 1,024 threads: cudaErrorInvalidValue /
//     cudaErrorInvalidConfiguration, as on a GPU.
// Every call runs when it is issued, so the numbers are right whatever the streams' order;
// what a GPU would run in another order is checked instead (cuda_stream_order.hpp): each
// operation on device memory is stamped with its stream's vector clock, and two on different
// streams touching the same bytes, one writing, with no event, synchronization or legacy-
// stream rule ordering them, abort the process naming both. Events record host time.
// Not emulated: unified memory, graphs, peer access.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_device_memory_emulation.hpp>
#include <cuda_emulation.hpp>
#include <cuda_stream_order.hpp>

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalAddress = 700,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaDeviceAttr { cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14, CUDA_R_8F_E4M3 = 28, CUDA_R_8F_E5M2 = 29 };
using cudaDataType = cudaDataType_t;
inline constexpr unsigned cudaStreamDefault = 0, cudaStreamNonBlocking = 1;
inline constexpr unsigned cudaEventDefault = 0, cudaEventDisableTiming = 2;

struct cudaUUID_t {
  char bytes[16];
};
struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  int major, minor;
  std::size_t totalGlobalMem, sharedMemPerBlockOptin;
  int multiProcessorCount, warpSize, maxThreadsPerBlock;
};

namespace tessera::cuda::emulation {
struct stream_state {
  int context = -1;  // its order::context
};
struct event_state {
  bool timing = true, recorded = false;
  std::chrono::steady_clock::time_point at{};
  order::vclock clock;  // its stream's clock when it was recorded
};
}  // namespace tessera::cuda::emulation
using cudaStream_t = tessera::cuda::emulation::stream_state*;
using cudaEvent_t = tessera::cuda::emulation::event_state*;

namespace tessera::cuda::emulation {
/// The emulated devices' compute capability (major * 10 + minor): an H100's.
inline std::atomic<int> compute_capability{90};
/// How many devices there are: a node of 4, so that the multi-GPU tests run 4 ranks, or
/// TESSERA_EMULATED_GPUS (1 to 8; gpu_emulated.cuda_recipes_staged: 4 ranks sharing 1 over
/// comm::cuda_staged), and each host thread's current one (cudaSetDevice).
inline int devices_from_environment() {
  const char* s = std::getenv("TESSERA_EMULATED_GPUS");
  if (s == nullptr || *s == '\0') return 4;
  char* end = nullptr;
  const long n = std::strtol(s, &end, 10);
  if (*end != '\0' || n < 1 || n > 8) {
    std::fprintf(stderr, "TESSERA_EMULATED_GPUS=%s: give the number of emulated GPUs, 1 to 8 (default 4)\n", s);
    std::exit(2);
  }
  return static_cast<int>(n);
}
inline std::atomic<int> device_count{devices_from_environment()};
/// The node's GPU that device d is: CUDA_VISIBLE_DEVICES's d-th entry where that is a number
/// (a GPU's index), else d.
inline int node_gpu(int d) {
  const char* s = std::getenv("CUDA_VISIBLE_DEVICES");
  for (int i = 0; s != nullptr && *s != '\0'; ++i) {
    char* end = nullptr;
    const long g = std::strtol(s, &end, 10);
    if (end == s || g < 0 || (*end != ',' && *end != '\0')) break;
    if (i == d) return static_cast<int>(g);
    s = *end == ',' ? end + 1 : end;
  }
  return d;
}
inline thread_local int current_device = 0;
inline constexpr std::size_t default_shared_bytes = 49152;  // without the opt-in
inline constexpr std::size_t total_memory = std::size_t{80} << 30;  // as an H100's (nothing is reserved)

/// Each host thread's last error.
inline thread_local cudaError_t last_error = cudaSuccess;
inline cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

/// The device of the live allocation [p, p + bytes) lies inside, or -1 when none holds it.
inline int device_holding(const void* p, std::size_t bytes = 0) {
  auto& r = runtime::get();
  std::lock_guard lock(r.m);
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = holding(r, a);
  return it != r.allocations.end() && a + bytes <= it->first + it->second.bytes ? it->second.device : -1;
}
/// True when [p, p + bytes) lies inside one live device allocation.
inline bool on_device(const void* p, std::size_t bytes = 0) { return device_holding(p, bytes) >= 0; }
/// Whether `h` is live in `handles` (runtime::streams or runtime::events).
inline bool live(std::set<const void*> runtime::*handles, const void* h) {
  auto& r = runtime::get();
  std::lock_guard lock(r.m);
  return (r.*handles).count(h) != 0;
}
/// A live stream, or null: the legacy default stream.
inline bool valid_stream(cudaStream_t s) { return s == nullptr || live(&runtime::streams, s); }
/// The order::context of a stream (null: the current device's legacy default stream).
inline int context_of(cudaStream_t s) { return s ? s->context : order::legacy_stream(current_device); }
/// Issues `what` on stream `s` over `ranges` for the order checker.
inline void issue(cudaStream_t s, const std::string& what, std::initializer_list<order::range> ranges,
                  bool host_waits = false) {
  order::issue(context_of(s), what, std::span<const order::range>(ranges.begin(), ranges.size()), host_waits);
}
/// Whether a copy's pointers are where `kind` says (cudaMemcpyDefault: wherever they are).
inline bool copy_matches(void* dst, const void* src, std::size_t dst_bytes, std::size_t src_bytes, cudaMemcpyKind kind) {
  const bool d = on_device(dst, dst_bytes), s = on_device(src, src_bytes);
  switch (kind) {
    case cudaMemcpyHostToHost: return !on_device(dst) && !on_device(src);
    case cudaMemcpyHostToDevice: return d && !on_device(src);
    case cudaMemcpyDeviceToHost: return s && !on_device(dst);
    case cudaMemcpyDeviceToDevice: return d && s;
    case cudaMemcpyDefault: return (d || !on_device(dst)) && (s || !on_device(src));
  }
  return false;
}

/// A pointer argument of a kernel: null or inside an allocation of the current device (no
/// peer access is enabled: another GPU's memory faults).
template <class T>
bool device_argument(const T& a) {
  if constexpr (std::is_pointer_v<T>)
    return a == nullptr || device_holding(static_cast<const void*>(a)) == current_device;
  else
    return true;
}
/// The same for the pointers an argument reads through (a struct with device_pointers(), as
/// attention's span_mask).
template <class T>
bool device_argument_pointers(const T& a) {
  if constexpr (requires { a.device_pointers(); }) {
    for (const void* p : a.device_pointers())
      if (!device_argument(p)) return false;
  }
  return true;
}

/// How a kernel parameter of type P reaches device memory: -1 not at all, 0 reads (a pointer
/// to const), 1 writes (a pointer to non-const).
template <class P>
inline constexpr signed char reach_of =
    std::is_pointer_v<P> ? (std::is_const_v<std::remove_pointer_t<P>> ? 0 : 1) : -1;
template <class... P>
inline constexpr signed char reach[sizeof...(P) + 1] = {reach_of<P>..., -1};

/// TESSERA_LAUNCH's emulation: checks the launch as a GPU would, issues it on its stream to
/// the order checker (its pointer arguments' first bytes), then runs the kernel on every
/// thread of the grid (cuda_emulation_executor.hpp). Failures go to cudaGetLastError.
template <class Kernel>
struct launcher {
  dim3 grid, block;
  std::size_t shared;
  cudaStream_t stream;
  const void* key;  // the kernel's address: its shared-memory opt-in
  const char* name;
  const signed char* reaches;  // reach<P...> of its parameters
  std::size_t params;
  Kernel kernel;
  template <class... Args>
  void operator()(Args... args) const {
    const unsigned threads = block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || grid.y > 65535 ||
        grid.z > 65535) {
      fail(cudaErrorInvalidConfiguration);
      return;
    }
    std::size_t limit = default_shared_bytes;
    {
      auto& r = runtime::get();
      std::lock_guard lock(r.m);
      ++r.launches[name];
      if (auto it = r.shared_optin.find(key); it != r.shared_optin.end())
        limit = std::max(limit, static_cast<std::size_t>(it->second));
    }
    if (shared > limit || !valid_stream(stream)) {
      fail(shared > limit ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle);
      return;
    }
    if (!(device_argument(args) && ...) || !(device_argument_pointers(args) && ...)) {
      fail(cudaErrorInvalidDevicePointer);
      return;
    }
    std::vector<order::range> ranges;
    device_access reach;  // the allocations the kernel may touch: its arguments'
    std::size_t i = 0;
    (
        [&, this] {
          const signed char how = i < params ? reaches[i] : 1;
          ++i;
          if constexpr (std::is_pointer_v<Args>) {
            const order::range r = reach.add(static_cast<const void*>(args), 1, how == 1);
            if (how >= 0) ranges.push_back(r);
          } else if constexpr (requires { args.device_pointers(); }) {
            for (const void* p : args.device_pointers()) ranges.push_back(reach.add(p, 1, false));
          }
        }(),
        ...);
    order::issue(context_of(stream), std::string("kernel ") + name, ranges);
    launch(grid, block, shared, [&, this] { kernel(args...); });
    if (reach.overran()) fail(cudaErrorIllegalAddress);
  }
};
/// Launches so far of the kernels whose name (as TESSERA_LAUNCH spells it, e.g.
/// "detail::to_bf16_k<V>") contains `part`: what a test counts where a GPU's profiler would.
inline std::int64_t launches(std::string_view part) {
  auto& r = runtime::get();
  std::lock_guard lock(r.m);
  std::int64_t n = 0;
  for (const auto& [kernel, count] : r.launches)
    if (kernel.find(part) != std::string::npos) n += count;
  return n;
}
template <class R, class... P, class Kernel>
launcher<Kernel> make_launcher(dim3 grid, dim3 block, std::size_t shared, cudaStream_t s, R (*key)(P...),
                               const char* name, Kernel k) {
  return {grid, block, shared, s, reinterpret_cast<const void*>(key), name, reach<P...>, sizeof...(P), std::move(k)};
}
}  // namespace tessera::cuda::emulation

#define TESSERA_LAUNCH(grid, block, shared_bytes, stream, ...)                                              \
  ::tessera::cuda::emulation::make_launcher(grid, block, shared_bytes, stream, &__VA_ARGS__, #__VA_ARGS__, \
                                            [](auto&&... tessera_a) { __VA_ARGS__(tessera_a...); })

// ---- errors and the device ----
inline cudaError_t cudaGetLastError() { return std::exchange(tessera::cuda::emulation::last_error, cudaSuccess); }
inline cudaError_t cudaPeekAtLastError() { return tessera::cuda::emulation::last_error; }
inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer (emulation: not inside a live allocation)";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered (emulation: a kernel wrote past a device allocation's end)";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = tessera::cuda::emulation::device_count.load();
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) {
  *d = tessera::cuda::emulation::current_device;
  return cudaSuccess;
}
namespace tessera::cuda::emulation {
inline bool valid_device(int d) { return d >= 0 && d < device_count.load(); }
}  // namespace tessera::cuda::emulation
inline cudaError_t cudaSetDevice(int d) {
  namespace emu = tessera::cuda::emulation;
  if (!emu::valid_device(d)) return emu::fail(cudaErrorInvalidDevice);
  emu::current_device = d;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int d) {
  if (!tessera::cuda::emulation::valid_device(d)) return tessera::cuda::emulation::fail(cudaErrorInvalidDevice);
  const int cc = tessera::cuda::emulation::compute_capability.load();
  *v = a == cudaDevAttrComputeCapabilityMajor ? cc / 10 : cc % 10;
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (!tessera::cuda::emulation::valid_device(d)) return tessera::cuda::emulation::fail(cudaErrorInvalidDevice);
  *p = {};
  const int cc = tessera::cuda::emulation::compute_capability.load();
  std::snprintf(p->name, sizeof p->name, "CUDA emulation on the host (as sm_%d)", cc);
  const char tag[] = "emulated GPU";  // then the node's GPU's index, 4 bytes
  const auto g = static_cast<unsigned>(tessera::cuda::emulation::node_gpu(d));
  for (std::size_t i = 0; i < sizeof p->uuid.bytes; ++i)
    p->uuid.bytes[i] = i + 1 < sizeof tag ? tag[i] : static_cast<char>(g >> (8 * (i + 1 - sizeof tag)));
  p->major = cc / 10;
  p->minor = cc % 10;
  p->totalGlobalMem = tessera::cuda::emulation::total_memory;
  p->sharedMemPerBlockOptin = tessera::cuda::emulation::max_shared_bytes;
  p->multiProcessorCount = 132;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() {
  tessera::cuda::emulation::order::host_waits_for_device(tessera::cuda::emulation::current_device);
  return cudaSuccess;
}
/// An H100's 80 GiB, less what the emulated device holds.
inline cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  auto& r = tessera::cuda::emulation::runtime::get();
  std::lock_guard lock(r.m);
  std::size_t held = 0;
  for (const auto& [p, al] : r.allocations)
    if (al.device == tessera::cuda::emulation::current_device) held += al.bytes;
  *total_bytes = tessera::cuda::emulation::total_memory;
  *free_bytes = held < *total_bytes ? *total_bytes - held : 0;
  return cudaSuccess;
}
template <class T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute a, int value) {
  namespace emu = tessera::cuda::emulation;
  if (a != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<std::size_t>(value) > emu::max_shared_bytes)
    return emu::fail(cudaErrorInvalidValue);
  auto& r = emu::runtime::get();
  std::lock_guard lock(r.m);
  r.shared_optin[reinterpret_cast<const void*>(kernel)] = value;
  return cudaSuccess;
}

// ---- memory (cuda_device_memory_emulation.hpp) ----
inline cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  namespace emu = tessera::cuda::emulation;
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  *p = emu::map_allocation(bytes, emu::current_device);
  return *p ? cudaSuccess : emu::fail(cudaErrorMemoryAllocation);
}
template <class T>
cudaError_t cudaMalloc(T** p, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
inline cudaError_t cudaFree(void* p) {
  namespace emu = tessera::cuda::emulation;
  if (!p) return cudaSuccess;
  const int device = emu::device_holding(p);
  if (device < 0) return emu::fail(cudaErrorInvalidDevicePointer);
  emu::order::host_waits_for_device(device);  // cudaFree waits for the device
  // forgotten before the pages go: another thread's next allocation may get the address
  emu::order::forget(reinterpret_cast<std::uintptr_t>(p));
  if (!emu::unmap_allocation(p)) return emu::fail(cudaErrorInvalidDevicePointer);
  return cudaSuccess;
}
namespace tessera::cuda::emulation {
inline cudaError_t memset_on(void* p, int value, std::size_t bytes, cudaStream_t s, const char* what) {
  if (!valid_stream(s)) return fail(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (!on_device(p, bytes)) return fail(cudaErrorInvalidValue);
  device_access open;
  issue(s, what, {open.add(p, bytes, true)});
  std::memset(p, value, bytes);
  return cudaSuccess;
}
/// A copy of rows of `width` bytes; the order checker sees the whole pitched spans. A copy to
/// host memory returns once done (pageable memory; tessera pins none).
inline cudaError_t copy_on(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                           std::size_t height, cudaMemcpyKind kind, cudaStream_t s, const char* what) {
  if (!valid_stream(s)) return fail(cudaErrorInvalidResourceHandle);
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > dpitch || width > spitch) return fail(cudaErrorInvalidValue);
  const std::size_t dst_bytes = dpitch * (height - 1) + width, src_bytes = spitch * (height - 1) + width;
  if (!copy_matches(dst, src, dst_bytes, src_bytes, kind)) return fail(cudaErrorInvalidMemcpyDirection);
  device_access open;
  issue(s, what, {open.add(src, src_bytes, false), open.add(dst, dst_bytes, true)}, !on_device(dst));
  for (std::size_t r = 0; r < height; ++r)
    std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  return cudaSuccess;
}
}  // namespace tessera::cuda::emulation
inline cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t s = nullptr) {
  return tessera::cuda::emulation::memset_on(p, value, bytes, s, "cudaMemsetAsync");
}
inline cudaError_t cudaMemset(void* p, int value, std::size_t bytes) {
  return tessera::cuda::emulation::memset_on(p, value, bytes, nullptr, "cudaMemset");
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t s = nullptr) {
  return tessera::cuda::emulation::copy_on(dst, bytes, src, bytes, bytes, 1, kind, s, "cudaMemcpyAsync");
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  return tessera::cuda::emulation::copy_on(dst, bytes, src, bytes, bytes, 1, kind, nullptr, "cudaMemcpy");
}
inline cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dpitch, const void* src, std::size_t spitch,
                                     std::size_t width, std::size_t height, cudaMemcpyKind kind,
                                     cudaStream_t s = nullptr) {
  return tessera::cuda::emulation::copy_on(dst, dpitch, src, spitch, width, height, kind, s, "cudaMemcpy2DAsync");
}

// streams and events
#include <cuda_streams_emulation.hpp>
