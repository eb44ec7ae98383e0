// tessera/train/sgemm_peak.hpp: the peak FLOP/s of the hardware a job uses, the MFU
// denominator.
// tessera-requires: openblas
//
// MFU is defined as TorchTitan defines it on GPUs: the model FLOP/s the job achieves
// divided by the peak FLOP/s of the hardware the job uses (there: the datasheet peak of one
// GPU times the number of GPUs). A CPU has no datasheet peak, so tessera measures one per
// host: the best of square f32 GEMMs (n x n x n, 2 n^3 FLOPs each) through the same
// kernel (tessera::cpu::gemm over OpenBLAS) on every core this process may run on. A job's
// peak is the sum of its hosts' peaks on the cores its ranks there may use; each host is
// measured once, by one rank, while the host's other ranks sleep (`job_peak_flops`), so
// that ranks sharing a machine neither measure it under each other's load nor count it
// twice.
#pragma once

#include <algorithm>
#include <bit>
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

/// This host's peak: the best of 40 sgemm calls of n = 512 (operands that fit the caches)
/// and 5 of n = 1024, with one pool thread per usable core (the pool's size is restored
/// afterwards). Many short calls make the best one likely to run while the host's other
/// work is idle: on the shared 2-core machine under load 9-12, n = 512 measured 96-104
/// GFLOP/s in every try, n = 1024 alone 46-59 (about 0.3 s in all). Measured on the first
/// call and remembered for the life of the process; concurrent first callers wait for the
/// one measurement. Call it when nothing else of the job runs on the host
/// (job_peak_flops arranges that for a job's ranks).
inline double host_peak_flops() {
  static const double peak = [] {
    const int before = cpu::num_threads();
    const int cores = usable_cores();
    if (cores != before) cpu::set_num_threads(cores);
    const double p = std::max(measure_sgemm_flops(512, 40), measure_sgemm_flops(1024, 5));
    if (cores != before) cpu::set_num_threads(before);
    return p;
  }();
  return peak;
}

namespace detail {
/// This process's CPU affinity as 16 words of 64 bits (CPUs 0..1023; all set when unknown).
inline std::vector<std::uint64_t> affinity_words() {
  std::vector<std::uint64_t> w(16, 0);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return std::vector<std::uint64_t>(16, ~std::uint64_t{0});
  for (int c = 0; c < 1024 && c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) w[static_cast<std::size_t>(c / 64)] |= std::uint64_t{1} << (c % 64);
  return w;
}

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
/// hosts of each host's peak on the cores the job's ranks there may run on (the union of
/// their CPU affinities: `mpirun -np 2` binds each rank to a core of its own, and both
/// cores count). Each host is measured by its lowest rank (host_peak_flops, on its own
/// cores, scaled by the union's core count over its own: cores of one host are taken as
/// equal) while the host's other ranks sleep (they poll a barrier every millisecond
/// instead of spinning in it). A collective: every rank of `world` calls it, and every
/// rank gets the same value.
template <class C>
double job_peak_flops(C& world) {
  const int n = world.size(), me = world.rank();
  const std::int64_t id = detail::host_id();
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  world.all_gather(&id, ids.data(), 1, comm::dtype::i64).wait();
  const std::vector<std::uint64_t> mine_mask = detail::affinity_words();
  std::vector<std::uint64_t> masks(16 * static_cast<std::size_t>(n));
  world.all_gather(mine_mask.data(), masks.data(), 16, comm::dtype::i64).wait();
  bool lead = true;  // the lowest rank on this host measures it
  std::vector<std::uint64_t> host_mask(16, 0);
  for (int r = 0; r < n; ++r) {
    if (ids[static_cast<std::size_t>(r)] != id) continue;
    if (r < me) lead = false;
    for (std::size_t w = 0; w < 16; ++w) host_mask[w] |= masks[16 * static_cast<std::size_t>(r) + w];
  }
  int host_cores = 0;
  for (const std::uint64_t w : host_mask) host_cores += std::popcount(w);
  world.barrier().wait();  // nobody computes any more: the host is idle
  double mine = 0;
  if (lead) mine = host_peak_flops() * std::max(host_cores, 1) / usable_cores();
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
