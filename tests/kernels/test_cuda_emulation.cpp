// The CUDA emulation's own promises (tests/support/cuda_runtime_emulation.hpp,
// cublaslt_emulation.hpp, cuda_emulation_executor.hpp): that it refuses what a GPU refuses or
// faults on -- a host pointer handed to a kernel, a copy in the wrong direction, shared memory
// over 48 KiB without the opt-in, a barrier some threads never reach, FP8 GEMMs outside
// cuBLASLt's rules -- and that it computes what cuBLASLt documents (the FP8 scales, beta 0).
// The GPU tests compiled against it (ctest gpu_emulated.*) rely on both. The emulated NCCL's
// refusals: test_nccl_emulation.cpp, in the same program.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <tessera/core/error.hpp>
#include <tessera/core/float8.hpp>
#include <tessera/kernels/cuda/gemm.hpp>
#include <tessera/kernels/cuda/launch.cuh>
#include <tessera/kernels/cuda/pointwise.cuh>
#include <tessera/tensor/cuda_memory.hpp>

using namespace tessera;
namespace emu = tessera::cuda::emulation;

namespace {
/// out[blockIdx.x] = the sum of the block's 64 inputs, through shared memory and barriers.
__global__ void block_sum_k(float* out, const float* in) {
  __shared__ float s[64];
  s[threadIdx.x] = in[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  for (unsigned half = 32; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
/// Only the first warp reaches the barrier.
__global__ void divergent_k(float* out) {
  if (threadIdx.x < 32) __syncthreads();
  out[threadIdx.x] = 1.0f;
}
/// Only the second block has a barrier.
__global__ void late_barrier_k(float* out) {
  if (blockIdx.x == 1) __syncthreads();
  out[blockIdx.x * 32 + threadIdx.x] = 1.0f;
}
/// Writes one float past n.
__global__ void overrun_k(float* out, int n) {
  if (threadIdx.x == 0) out[n] = 1.0f;
}
/// Uses `extern __shared__`-style dynamic shared memory of any size.
__global__ void dynamic_shared_k(float* out) {
  float* s = reinterpret_cast<float*>(emu::shared_memory());
  s[threadIdx.x] = 2.0f;
  __syncthreads();
  out[threadIdx.x] = s[31 - threadIdx.x];
}

struct device_floats {
  tensor<float, cuda_space> t;
  explicit device_floats(const std::vector<float>& h) : t({static_cast<std::int64_t>(h.size())}) {
    copy_to_device(t.data(), h.data(), h.size() * sizeof(float));
  }
  std::vector<float> host() const {
    std::vector<float> h(static_cast<std::size_t>(t.numel()));
    copy_to_host(h.data(), t.data(), h.size() * sizeof(float));
    return h;
  }
};
}  // namespace

TEST_CASE("emulated launches: barriers and shared memory under fibers equal the threads executor") {
  std::vector<float> in(4 * 64);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 7) - 3.0f;
  for (const auto e : {emu::executor::fibers, emu::executor::threads}) {
    emu::current_executor = e;
    device_floats x(in), out(std::vector<float>(4, -1.0f));
    TESSERA_LAUNCH(4, 64, 0, nullptr, block_sum_k)(out.t.data(), x.t.data());
    REQUIRE(cudaGetLastError() == cudaSuccess);
    const auto got = out.host();
    for (std::size_t b = 0; b < 4; ++b) {
      float want = 0;
      for (std::size_t i = 0; i < 64; ++i) want += in[b * 64 + i];
      CHECK(got[b] == want);
    }
  }
  emu::current_executor = emu::executor::fibers;
}

TEST_CASE("emulated launches: a barrier some threads never reach is an error under fibers, not a hang") {
  device_floats out(std::vector<float>(64, 0.0f));
  CHECK_THROWS_WITH_AS(TESSERA_LAUNCH(1, 64, 0, nullptr, divergent_k)(out.t.data()),
                       doctest::Contains("that others never reach"), std::logic_error);
}

TEST_CASE("emulated launches: under fibers, a block with a barrier after a first block without one is an error") {
  // (the first block decides whether the others run as plain calls; a silent wrong result is
  // what this refuses)
  device_floats out(std::vector<float>(64, 0.0f));
  CHECK_THROWS_WITH_AS(TESSERA_LAUNCH(2, 32, 0, nullptr, late_barrier_k)(out.t.data()),
                       doctest::Contains("where the launch's first block reached none"), std::logic_error);
  emu::current_executor = emu::executor::threads;  // which runs it
  TESSERA_LAUNCH(2, 32, 0, nullptr, late_barrier_k)(out.t.data());
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(out.host() == std::vector<float>(64, 1.0f));
  emu::current_executor = emu::executor::fibers;
}

TEST_CASE("emulated launches: a host pointer handed to a kernel fails the launch, as it faults on a GPU") {
  std::vector<float> host(64);
  device_floats dev(std::vector<float>(64, 1.0f));
  TESSERA_LAUNCH(1, 64, 0, nullptr, block_sum_k)(host.data(), dev.t.data());
  CHECK(cudaGetLastError() == cudaErrorInvalidDevicePointer);
  CHECK(cudaGetLastError() == cudaSuccess);  // read once, then cleared
  // through an entry point: the launch check names the operation
  CHECK_THROWS_WITH_AS(cuda::add(host.data(), dev.t.data(), dev.t.data(), 64),
                       doctest::Contains("cuda::add: kernel launch: cudaErrorInvalidDevicePointer"), tessera::error);
  // a freed buffer is no device memory either
  float* gone = nullptr;
  REQUIRE(cudaMalloc(&gone, 256) == cudaSuccess);
  REQUIRE(cudaFree(gone) == cudaSuccess);
  TESSERA_LAUNCH(1, 64, 0, nullptr, divergent_k)(gone);
  CHECK(cudaGetLastError() == cudaErrorInvalidDevicePointer);
  CHECK(cudaFree(gone) == cudaErrorInvalidDevicePointer);  // twice
  (void)cudaGetLastError();
}

TEST_CASE("emulated launches: a kernel that writes past its buffer's end fails the launch") {
  {
    device_floats out(std::vector<float>(10, 0.0f));
    TESSERA_LAUNCH(1, 32, 0, nullptr, overrun_k)(out.t.data(), 9);  // inside
    CHECK(cudaGetLastError() == cudaSuccess);
  }
  float* p = nullptr;
  REQUIRE(cudaMalloc(&p, 10 * sizeof(float)) == cudaSuccess);
  TESSERA_LAUNCH(1, 32, 0, nullptr, overrun_k)(p, 10);
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
  // the guard stays broken: every later launch reports it until the buffer is released
  TESSERA_LAUNCH(1, 32, 0, nullptr, overrun_k)(p, 0);
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
  REQUIRE(cudaFree(p) == cudaSuccess);
  device_floats fine(std::vector<float>(4, 0.0f));
  TESSERA_LAUNCH(1, 32, 0, nullptr, overrun_k)(fine.t.data(), 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

namespace {
/// What `f` printed to stderr as it died in a child process ("" when it did not die).
template <class F>
std::string death_message(F f) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::fflush(nullptr);  // what is buffered is the parent's to print, once
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // stdout and doctest's report of the abort are not the parent's
    dup2(fds[1], 2);
    close(fds[0]);
    if (FILE* null = std::freopen("/dev/null", "w", stdout)) (void)null;
    std::signal(SIGABRT, SIG_DFL);
    f();
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFSIGNALED(status) ? out : std::string();
}
/// Reads n floats from in and from a buffer it was not given (its address as an integer).
__global__ void hidden_read_k(float* out, const float* in, std::uintptr_t hidden, int n) {
  out[threadIdx.x] = in[threadIdx.x] + reinterpret_cast<const float*>(hidden)[threadIdx.x % static_cast<unsigned>(n)];
}
/// Reads in[at].
__global__ void read_at_k(float* out, const float* in, int at) {
  if (threadIdx.x == 0) out[0] = in[at];
}
}  // namespace

TEST_CASE("emulated device memory: the host dereferencing it, a kernel reaching a buffer it was not given, and reads past the end fault, named") {
  device_floats a(std::vector<float>(64, 1.0f)), b(std::vector<float>(64, 2.0f)), out(std::vector<float>(64, 0.0f));
  // through the runtime's calls it works
  TESSERA_LAUNCH(1, 64, 0, nullptr, read_at_k)(out.t.data(), a.t.data(), 63);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  CHECK(out.host()[0] == 1.0f);
  // cudaMalloc's memory is not zeroed: NaN until written, so that reading it shows
  float* fresh = nullptr;
  REQUIRE(cudaMalloc(&fresh, 16 * sizeof(float)) == cudaSuccess);
  TESSERA_LAUNCH(1, 64, 0, nullptr, read_at_k)(out.t.data(), fresh, 5);
  CHECK(std::isnan(out.host()[0]));
  REQUIRE(cudaFree(fresh) == cudaSuccess);
  const std::string host_read = death_message([&] { std::printf("%f\n", static_cast<double>(a.t.data()[3])); });
  CHECK(host_read.find("segmentation fault on device memory: byte 12 of the device allocation of 256 bytes") !=
        std::string::npos);
  CHECK(host_read.find("host code reading device memory") != std::string::npos);
  const std::string hidden = death_message([&] {
    TESSERA_LAUNCH(1, 32, 0, nullptr, hidden_read_k)(out.t.data(), a.t.data(), reinterpret_cast<std::uintptr_t>(b.t.data()), 64);
  });
  CHECK(hidden.find("a kernel reaching a buffer none of its pointer arguments points into") != std::string::npos);
  // 64 floats end at a multiple of 256 bytes: the next read is in the guard page
  const std::string past = death_message([&] { TESSERA_LAUNCH(1, 32, 0, nullptr, read_at_k)(out.t.data(), a.t.data(), 64 + 2); });
  CHECK(past.find("an access 8 bytes past the end of the device allocation of 256 bytes") != std::string::npos);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("emulated device memory: bytes an operation names but never touches (cuBLASLt's workspace) are ordered, not opened") {
  device_floats w(std::vector<float>(64, 0.0f));
  const auto base = reinterpret_cast<std::uintptr_t>(w.t.data());
  emu::device_access open;
  const emu::order::range named = open.named(w.t.data() + 2, 8 * sizeof(float), true);
  CHECK(named.base == base);
  CHECK(named.lo == base + 8);
  CHECK(named.hi == base + 40);
  CHECK(named.write);
  // the order checker has its bytes, but the operation's host code has no access to them
  const std::string closed = death_message([&] { std::printf("%f\n", static_cast<double>(w.t.data()[3])); });
  CHECK(closed.find("byte 12 of the device allocation of 256 bytes") != std::string::npos);
  const emu::order::range opened = open.add(w.t.data(), 4 * sizeof(float), false);
  CHECK(opened.lo == base);
  CHECK(opened.hi == base + 16);
  CHECK(w.t.data()[3] == 0.0f);  // added: the operation may touch it
}

TEST_CASE("emulated launches: shared memory over 48 KiB needs the kernel's opt-in; block sizes as a GPU's") {
  device_floats out(std::vector<float>(32, 0.0f));
  const std::size_t big = 64 << 10;
  TESSERA_LAUNCH(1, 32, big, nullptr, dynamic_shared_k)(out.t.data());
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  REQUIRE(cudaFuncSetAttribute(dynamic_shared_k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(big)) ==
          cudaSuccess);
  TESSERA_LAUNCH(1, 32, big, nullptr, dynamic_shared_k)(out.t.data());
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(out.host()[0] == 2.0f);
  CHECK(cudaFuncSetAttribute(dynamic_shared_k, cudaFuncAttributeMaxDynamicSharedMemorySize, 240 << 10) ==
        cudaErrorInvalidValue);
  (void)cudaGetLastError();
  TESSERA_LAUNCH(1, 2048, 0, nullptr, dynamic_shared_k)(out.t.data());
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
}

TEST_CASE("emulated runtime: copies and memsets are checked against where their pointers live") {
  std::vector<float> host(16, 1.0f);
  float* dev = nullptr;
  REQUIRE(cudaMalloc(&dev, 16 * sizeof(float)) == cudaSuccess);
  CHECK(cudaMemcpy(dev, host.data(), 64, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(host.data(), dev, 64, cudaMemcpyHostToDevice) == cudaErrorInvalidMemcpyDirection);
  CHECK(cudaMemcpy(dev + 1, host.data(), 64, cudaMemcpyHostToDevice) == cudaErrorInvalidMemcpyDirection);  // past its end
  CHECK(cudaMemcpy(dev + 8, dev, 32, cudaMemcpyDeviceToDevice) == cudaSuccess);
  CHECK(cudaMemset(host.data(), 0, 64) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy2DAsync(dev, 16, dev, 16, 16, 4, cudaMemcpyDeviceToDevice) == cudaSuccess);
  CHECK(cudaMemcpy2DAsync(dev, 16, dev, 16, 16, 5, cudaMemcpyDeviceToDevice) == cudaErrorInvalidMemcpyDirection);
  CHECK(cudaFree(host.data()) == cudaErrorInvalidDevicePointer);
  CHECK(cudaFree(dev) == cudaSuccess);
  (void)cudaGetLastError();
  // tessera's own checks name the call
  CHECK_THROWS_WITH_AS(copy_to_device(host.data(), host.data(), 64),
                       doctest::Contains("cudaErrorInvalidMemcpyDirection"), tessera::error);
}

TEST_CASE("emulated runtime: streams and events") {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  cudaEvent_t a = nullptr, b = nullptr, quiet = nullptr;
  REQUIRE(cudaEventCreate(&a) == cudaSuccess);
  REQUIRE(cudaEventCreate(&b) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&quiet, cudaEventDisableTiming) == cudaSuccess);
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, a, b) == cudaErrorInvalidResourceHandle);  // not recorded
  CHECK(cudaEventRecord(a, s) == cudaSuccess);
  CHECK(cudaEventRecord(b, s) == cudaSuccess);
  CHECK(cudaEventElapsedTime(&ms, a, b) == cudaSuccess);
  CHECK(ms >= 0.0f);
  CHECK(cudaEventRecord(quiet, s) == cudaSuccess);
  CHECK(cudaEventElapsedTime(&ms, a, quiet) == cudaErrorInvalidResourceHandle);  // no timing
  CHECK(cudaEventDestroy(quiet) == cudaSuccess);
  CHECK(cudaEventDestroy(quiet) == cudaErrorInvalidResourceHandle);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  device_floats out(std::vector<float>(64, 0.0f));
  TESSERA_LAUNCH(1, 64, 0, s, divergent_k)(out.t.data());  // a destroyed stream
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK(cudaEventDestroy(a) == cudaSuccess);
  CHECK(cudaEventDestroy(b) == cudaSuccess);
  (void)cudaGetLastError();
}

namespace {
/// Records the stream races of its scope instead of aborting on the first.
struct recording_races {
  recording_races() {
    emu::order::policy = emu::order::on_race::record;
    (void)emu::order::take_races();
  }
  ~recording_races() { emu::order::policy = emu::order::on_race::abort; }
  /// The races since the last call, as one string ("" when none).
  static std::string take() {
    std::string all;
    for (const auto& r : emu::order::take_races()) all += r + "\n";
    return all;
  }
};
}  // namespace

TEST_CASE("emulated runtime: two streams touching the same bytes unordered is a race; events, synchronization and the legacy stream order them") {
  recording_races guard;
  cudaStream_t s = nullptr, blocking = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
  device_floats x(std::vector<float>(64, 1.0f)), y(std::vector<float>(64, 1.0f)), z(std::vector<float>(64, 0.0f));
  // the tensors were zeroed and filled on the legacy stream: s is not ordered after that
  CHECK(cudaMemcpyAsync(z.t.data(), x.t.data(), 256, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
  const std::string setup = recording_races::take();
  CHECK(setup.find("cudaMemcpyAsync on non-blocking stream") != std::string::npos);
  CHECK(setup.find("cudaMemcpy on the legacy default stream of device 0 wrote") != std::string::npos);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);

  SUBCASE("a kernel's write, then a copy on another stream reading it") {
    TESSERA_LAUNCH(1, 64, 0, nullptr, block_sum_k)(x.t.data(), y.t.data());
    CHECK(cudaMemcpyAsync(z.t.data(), x.t.data(), 256, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
    const std::string race = recording_races::take();
    CHECK(race.find("cudaMemcpyAsync on non-blocking stream") != std::string::npos);
    CHECK(race.find("reads bytes [0, 1)") != std::string::npos);  // a kernel's reach: its arguments' first bytes
    CHECK(race.find("kernel block_sum_k on the legacy default stream of device 0 wrote") != std::string::npos);
    // an event recorded after the kernel, waited for by s, orders them (once the racing copy,
    // which still reads x, is done)
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    TESSERA_LAUNCH(1, 64, 0, nullptr, block_sum_k)(x.t.data(), y.t.data());
    CHECK(cudaEventRecord(e, nullptr) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(s, e, 0) == cudaSuccess);
    CHECK(cudaMemcpyAsync(z.t.data(), x.t.data(), 256, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
    CHECK(recording_races::take() == "");
  }
  SUBCASE("a copy's write on a stream, then a kernel reading it; the stream's synchronization orders them") {
    CHECK(cudaMemcpyAsync(x.t.data(), z.t.data(), 256, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
    TESSERA_LAUNCH(1, 64, 0, nullptr, block_sum_k)(y.t.data(), x.t.data());
    CHECK(recording_races::take().find("kernel block_sum_k on the legacy default stream of device 0 reads") !=
          std::string::npos);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);  // the kernel that raced still reads x
    CHECK(cudaMemcpyAsync(x.t.data(), z.t.data(), 256, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    TESSERA_LAUNCH(1, 64, 0, nullptr, block_sum_k)(y.t.data(), x.t.data());
    CHECK(recording_races::take() == "");
  }
  SUBCASE("a kernel overwriting what a copy on another stream still reads") {
    CHECK(cudaMemcpyAsync(z.t.data(), x.t.data(), 256, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
    TESSERA_LAUNCH(1, 64, 0, nullptr, block_sum_k)(x.t.data(), y.t.data());
    CHECK(recording_races::take().find("which cudaMemcpyAsync on non-blocking stream") != std::string::npos);
  }
  SUBCASE("reads on two streams do not race; a blocking stream is ordered with the legacy one") {
    CHECK(cudaMemcpyAsync(z.t.data(), y.t.data(), 256, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
    TESSERA_LAUNCH(1, 64, 0, nullptr, block_sum_k)(x.t.data(), y.t.data());
    CHECK(cudaMemsetAsync(z.t.data(), 0, 256, blocking) == cudaSuccess);  // s wrote z: unordered
    CHECK(recording_races::take().find("cudaMemsetAsync on blocking stream") != std::string::npos);
    CHECK(cudaMemsetAsync(x.t.data(), 0, 256, blocking) == cudaSuccess);  // after the legacy kernel
    device_floats w(std::vector<float>(1, 0.0f));
    TESSERA_LAUNCH(1, 64, 0, nullptr, block_sum_k)(w.t.data(), x.t.data());  // after the memset
    CHECK(recording_races::take() == "");
  }
  SUBCASE("a kernel's argument inside an allocation (an arena's part) reaches its first byte") {
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    TESSERA_LAUNCH(1, 64, 0, nullptr, block_sum_k)(x.t.data() + 8, y.t.data());
    CHECK(cudaMemcpyAsync(z.t.data(), x.t.data(), 32, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
    CHECK(recording_races::take() == "");
    CHECK(cudaMemcpyAsync(z.t.data(), x.t.data() + 8, 32, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
    CHECK(recording_races::take().find("reads bytes [32, 33)") != std::string::npos);
  }
  SUBCASE("disjoint bytes of one allocation do not race") {
    CHECK(cudaMemsetAsync(x.t.data(), 0, 128, s) == cudaSuccess);
    CHECK(cudaMemsetAsync(x.t.data() + 32, 0, 128, nullptr) == cudaSuccess);
    CHECK(recording_races::take() == "");
    CHECK(cudaMemsetAsync(x.t.data() + 31, 0, 8, nullptr) == cudaSuccess);
    CHECK(recording_races::take().find("writes bytes [124, 128)") != std::string::npos);
  }
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(cudaEventDestroy(e) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaStreamDestroy(blocking) == cudaSuccess);
}

namespace {
/// n x k e4m3 codes of values in [-2, 2), row-major, and their floats.
std::vector<std::uint8_t> codes(std::size_t n, unsigned seed, std::vector<float>& values) {
  std::vector<std::uint8_t> c(n);
  values.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = f8_e4m3fn(static_cast<float>((i * 37 + seed * 11) % 64) / 16.0f - 2.0f);
    c[i] = v.bits;
    values[i] = static_cast<float>(v);
  }
  return c;
}
struct device_bytes {
  tensor<float, cuda_space> t;
  explicit device_bytes(const std::vector<std::uint8_t>& h) : t({static_cast<std::int64_t>((h.size() + 3) / 4)}) {
    copy_to_device(t.data(), h.data(), h.size());
  }
  const std::uint8_t* get() const { return reinterpret_cast<const std::uint8_t*>(t.data()); }
};
}  // namespace

TEST_CASE("emulated cuBLASLt: FP8 GEMMs with tensorwise and outer-vector scales as documented; its refusals") {
  const std::int64_t m = 32, n = 16, k = 48;
  std::vector<float> av, bv;
  const device_bytes A(codes(static_cast<std::size_t>(m * k), 1, av));  // stored k x m (TN: A transposed)
  const device_bytes B(codes(static_cast<std::size_t>(n * k), 2, bv));  // stored k x n
  std::vector<float> sa(static_cast<std::size_t>(m)), sb(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < sa.size(); ++i) sa[i] = 0.5f + static_cast<float>(i) / 8.0f;
  for (std::size_t j = 0; j < sb.size(); ++j) sb[j] = 2.0f - static_cast<float>(j) / 16.0f;
  const device_floats dsa(sa), dsb(sb);
  cuda::blas blas;
  for (const bool rowwise : {false, true}) {
    device_floats C(std::vector<float>(static_cast<std::size_t>(m * n), NAN));  // beta 0: never read
    blas.gemm_f8(m, n, k, A.get(), CUDA_R_8F_E4M3, dsa.t.data(), B.get(), CUDA_R_8F_E4M3, dsb.t.data(), rowwise,
                 C.t.data());
    const auto got = C.host();
    double worst = 0;
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < m; ++i) {
        double s = 0;
        for (std::int64_t p = 0; p < k; ++p)
          s += static_cast<double>(av[static_cast<std::size_t>(i * k + p)]) * bv[static_cast<std::size_t>(j * k + p)];
        s *= rowwise ? static_cast<double>(sa[static_cast<std::size_t>(i)]) * sb[static_cast<std::size_t>(j)]
                     : static_cast<double>(sa[0]) * sb[0];
        worst = std::max(worst, std::abs(s - got[static_cast<std::size_t>(j * m + i)]) / std::max(1.0, std::abs(s)));
      }
    CHECK(worst < 1e-5);
  }
  device_floats C(std::vector<float>(static_cast<std::size_t>(m * n), 0.0f));
  // e5m2 x e5m2 has no FP8 GEMM in cuBLASLt; outer-vector scales need sm_90
  CHECK_THROWS_WITH_AS(blas.gemm_f8(m, n, k, A.get(), CUDA_R_8F_E5M2, dsa.t.data(), B.get(), CUDA_R_8F_E5M2,
                                    dsb.t.data(), false, C.t.data()),
                       doctest::Contains("CUBLAS_STATUS_NOT_SUPPORTED"), tessera::error);
  emu::compute_capability = 89;
  CHECK_THROWS_WITH_AS(blas.gemm_f8(m, n, k, A.get(), CUDA_R_8F_E4M3, dsa.t.data(), B.get(), CUDA_R_8F_E4M3,
                                    dsb.t.data(), true, C.t.data()),
                       doctest::Contains("CUBLAS_STATUS_NOT_SUPPORTED"), tessera::error);
  CHECK_NOTHROW(blas.gemm_f8(m, n, k, A.get(), CUDA_R_8F_E4M3, dsa.t.data(), B.get(), CUDA_R_8F_E4M3, dsb.t.data(),
                             false, C.t.data()));
  emu::compute_capability = 90;
  // scales on the host: what a GPU would fault on
  CHECK_THROWS_WITH_AS(blas.gemm_f8(m, n, k, A.get(), CUDA_R_8F_E4M3, sa.data(), B.get(), CUDA_R_8F_E4M3,
                                    dsb.t.data(), true, C.t.data()),
                       doctest::Contains("CUBLAS_STATUS_INVALID_VALUE"), tessera::error);
}

TEST_CASE("emulated cuBLASLt: f32 and bf16 GEMMs, transposes and beta against a direct product") {
  const std::int64_t m = 5, n = 3, k = 4;
  std::vector<float> a(static_cast<std::size_t>(k * m)), b(static_cast<std::size_t>(k * n)),
      c(static_cast<std::size_t>(m * n), 1.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) - 7.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.5f;
  const device_floats A(a), B(b);
  device_floats C(c);
  cuda::blas blas;
  // A stored k x m, transposed; B stored n x k, transposed: C = 2 A^T B^T + 1 C
  blas.gemm(true, true, m, n, k, 2.0f, A.t.data(), k, B.t.data(), n, 1.0f, C.t.data(), m);
  const auto got = C.host();
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) {
      float s = 0;
      for (std::int64_t p = 0; p < k; ++p)
        s += a[static_cast<std::size_t>(i * k + p)] * b[static_cast<std::size_t>(p * n + j)];
      CHECK(got[static_cast<std::size_t>(j * m + i)] == doctest::Approx(2.0f * s + 1.0f));
    }
}
