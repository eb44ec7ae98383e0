// Shared by the communication benchmarks: sizes, iteration counts, nccl-tests' bandwidth
// factors, and the buffer sizes each collective needs for a message of S bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace bench {

enum class coll { all_gather, reduce_scatter, all_reduce, all_to_all };
inline const char* name(coll c) {
  switch (c) {
    case coll::all_gather: return "all_gather";
    case coll::reduce_scatter: return "reduce_scatter";
    case coll::all_reduce: return "all_reduce";
    case coll::all_to_all: return "all_to_all";
  }
  return "?";
}

/// nccl-tests' bus bandwidth factors (REFERENCE.md section 5).
inline double bus_factor(coll c, int n) {
  return c == coll::all_reduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
}

/// S, as nccl-tests counts it: the gathered buffer for all_gather / reduce_scatter, the
/// buffer for all_reduce, the send buffer of each rank for all_to_all. Per rank, in f32
/// elements: {send count, recv count, count argument of the call}.
struct shape {
  std::size_t send, recv, count;
};
inline shape shape_of(coll c, std::size_t bytes, int n) {
  const auto nn = static_cast<std::size_t>(n);
  const std::size_t total = bytes / 4 / nn * nn;  // a multiple of n elements
  switch (c) {
    case coll::all_gather: return {total / nn, total, total / nn};
    case coll::reduce_scatter: return {total, total / nn, total / nn};
    case coll::all_reduce: return {total, total, total};
    case coll::all_to_all: return {total, total, total / nn};
  }
  return {0, 0, 0};
}

/// Full sweep when TESSERA_BENCH_FULL=1: 4 KiB .. 256 MiB (x4 steps) on 2, 4, 8 ranks.
/// The default run is short: 4 KiB, 1 MiB, 16 MiB on 2 ranks.
inline bool full() {
  const char* v = std::getenv("TESSERA_BENCH_FULL");
  return v && std::strcmp(v, "1") == 0;
}
inline std::vector<std::size_t> sizes() {
  if (!full()) return {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{16} << 20};
  std::vector<std::size_t> s;
  for (std::size_t b = std::size_t{4} << 10; b <= (std::size_t{256} << 20); b *= 4) s.push_back(b);
  return s;
}
inline std::vector<int> rank_counts() {
  if (!full()) return {2};
  return {2, 4, 8};
}
/// Iterations per measurement: about 256 MiB moved, at least 3, at most 2000. Fixed (not
/// chosen by the library) so that every rank runs the same number of collectives.
inline long iterations(std::size_t bytes) {
  return static_cast<long>(std::clamp<std::size_t>((std::size_t{256} << 20) / bytes, 3, 2000));
}

}  // namespace bench
