// tessera/train/sgemm_peak.hpp: the peak FLOP/s of the hardware a job uses, the MFU
// denominator.
// tessera-requires: openblas
//
// MFU is defined as TorchTitan defines it on GPUs: the model FLOP/s the job achieves
// divided by the peak FLOP/s of the hardware the job uses (there: the datasheet peak of one
// GPU times the number of GPUs). A CPU has no datasheet peak, so tessera measures one per
// host: the best of a few square f32 GEMMs (n x n x n, 2 n^3 FLOPs each) through the same
// kernel (tessera::cpu::gemm over OpenBLAS) on every core this process may run on. A job's
// peak is the sum of its hosts' peaks; each host is measured once, by one rank, while the
// host's other ranks sleep (`job_peak_flops`), so that ranks sharing a machine neither
// measure it under each other's load nor count it twice.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <unistd.h>

#include <tessera/comm/communicator.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/parallel.hpp>

namespace tessera::train {

/// FLOP/s of the best of `reps` timed n x n x n sgemm calls (after one warm-up call), on the
/// calling process's current CPU thread pool.
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

/// The cores this process may run on (its CPU affinity: all of the machine's, or what
/// Slurm, taskset or a container grants it); at least 1.
inline int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

/// This host's peak: measure_sgemm_flops(1024) with one pool thread per usable core (the
/// pool's size is restored afterwards). Measured on the first call and remembered for the
/// life of the process; concurrent first callers wait for the one measurement. Call it
/// when nothing else runs on the host (job_peak_flops arranges that for a job's ranks).
inline double host_peak_flops() {
  static const double peak = [] {
    const int before = cpu::num_threads();
    const int cores = usable_cores();
    if (cores != before) cpu::set_num_threads(cores);
    const double p = measure_sgemm_flops(1024);
    if (cores != before) cpu::set_num_threads(before);
    return p;
  }();
  return peak;
}

namespace detail {
/// FNV-1a of this host's name: ranks with equal values share a machine.
inline std::int64_t host_id() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return 0;
  std::uint64_t h = 1469598103934665603ull;
  for (const char* p = name; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return static_cast<std::int64_t>(h >> 1);
}
}  // namespace detail

/// The peak FLOP/s of the hardware the job on communicator `world` uses: the sum over its
/// hosts of host_peak_flops(), each host measured by its lowest rank while the host's other
/// ranks sleep (they poll a barrier every millisecond instead of spinning in it). A
/// collective: every rank of `world` calls it, and every rank gets the same value.
template <class C>
double job_peak_flops(C& world) {
  const int n = world.size(), me = world.rank();
  const std::int64_t id = detail::host_id();
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  world.all_gather(&id, ids.data(), 1, comm::dtype::i64).wait();
  bool lead = true;  // the lowest rank on this host measures it
  for (int r = 0; r < me; ++r)
    if (ids[static_cast<std::size_t>(r)] == id) lead = false;
  world.barrier().wait();  // nobody computes any more: the host is idle
  double mine = 0;
  if (lead) mine = host_peak_flops();
  auto done = world.barrier();
  if (lead) {
    done.wait();
  } else {
    while (!done.test()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  double sum = 0;
  world.all_reduce(&mine, &sum, 1, comm::dtype::f64, comm::reduce_op::sum).wait();
  return sum;
}

}  // namespace tessera::train
