// tessera/train/sgemm_peak.hpp: the machine's measured f32 GEMM rate, the MFU denominator.
// tessera-requires: openblas
//
// MFU on a CPU has no datasheet peak to divide by, so tessera measures one: the best of a
// few square f32 GEMMs (n x n x n, 2 n^3 FLOPs each) through the same kernel and thread
// pool the model uses (tessera::cpu::gemm over OpenBLAS).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include <tessera/kernels/cpu/matmul.hpp>

namespace tessera::train {

/// FLOP/s of the best of `reps` timed n x n x n sgemm calls (after one warm-up call).
inline double measure_sgemm_flops(std::int64_t n = 1024, int reps = 5) {
  std::vector<float> a(static_cast<std::size_t>(n * n)), b(a.size()), c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>((i * 7) % 13) * 0.01f;
    b[i] = static_cast<float>((i * 5) % 11) * 0.01f;
  }
  cpu::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    cpu::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / best;
}

}  // namespace tessera::train
