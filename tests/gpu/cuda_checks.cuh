// Helpers of the GPU kernel tests (tests/gpu/test_cuda_*.cu): random host data, device
// copies of host vectors and ids, and the comparison that prints one PASS / FAIL line and
// counts the failures (`failures`, the test's exit status).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera::testing {
inline int failures = 0;

inline std::vector<float> randn(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// A device copy of a host vector.
struct dvec {
  tensor<float, cuda_space> t;
  explicit dvec(const std::vector<float>& h) : t({static_cast<std::int64_t>(h.size())}) {
    copy_to_device(t.data(), h.data(), h.size() * sizeof(float));
  }
  float* get() { return t.data(); }
  std::vector<float> host() const {
    std::vector<float> h(static_cast<std::size_t>(t.numel()));
    copy_to_host(h.data(), t.data(), h.size() * sizeof(float));
    return h;
  }
};

/// Token ids on the device (tensor<> holds floating-point elements: the space directly).
struct device_ids {
  std::size_t bytes;
  void* p;
  explicit device_ids(const std::vector<std::int32_t>& h)
      : bytes(h.size() * sizeof(std::int32_t)), p(cuda_space::allocate(bytes)) {
    copy_to_device(p, h.data(), bytes);
  }
  ~device_ids() { cuda_space::deallocate(p, bytes); }
  device_ids(const device_ids&) = delete;
  device_ids& operator=(const device_ids&) = delete;
  const std::int32_t* get() const { return static_cast<const std::int32_t*>(p); }
};

inline void expect_close(const char* what, const std::vector<float>& gpu, const std::vector<float>& cpu, double tol) {
  double worst = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(gpu[i]) - cpu[i]) / std::max(1.0, std::abs(static_cast<double>(cpu[i]))));
  const bool ok = gpu.size() == cpu.size() && worst <= tol;
  std::printf("%-40s %s  max relative difference %.2e (tolerance %.0e)\n", what, ok ? "PASS" : "FAIL", worst, tol);
  failures += ok ? 0 : 1;
}


/// Device bytes.
struct dbytes {
  tensor<float, cuda_space> t;
  explicit dbytes(std::size_t n) : t({static_cast<std::int64_t>((n + 3) / 4)}) {}
  explicit dbytes(const std::vector<std::uint8_t>& h) : dbytes(h.size()) { copy_to_device(get(), h.data(), h.size()); }
  std::uint8_t* get() { return reinterpret_cast<std::uint8_t*>(t.data()); }
};

/// Prints why there is no device and returns true (the test then exits 77: skipped).
inline bool no_cuda_device() {
  if (cuda_device_count() > 0) return false;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  std::printf("skipped: no CUDA device (cudaGetDeviceCount: %s)\n", e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
  return true;
}
}  // namespace tessera::testing
