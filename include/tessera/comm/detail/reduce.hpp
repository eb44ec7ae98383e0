// tessera/comm/detail/reduce.hpp: element-wise reduction kernels shared by the backends
// that reduce on the CPU (threads; the mpi backend's user op for bf16).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tessera/comm/types.hpp>

namespace tessera::comm::detail {

/// bf16 bits <-> float (round to nearest even, NaN kept quiet).
inline float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}
inline std::uint16_t float_to_bf16(float f) noexcept {
  const auto u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

template <class T>
inline void combine(T* __restrict acc, const T* __restrict x, std::size_t n, reduce_op op) noexcept {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg:
      for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
      break;
    case reduce_op::max:
      for (std::size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], x[i]);
      break;
    case reduce_op::min:
      for (std::size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], x[i]);
      break;
  }
}

/// acc = a op b (the first step of a reduction: one pass instead of a copy and a combine).
template <class T>
inline void combine2(T* __restrict acc, const T* __restrict a, const T* __restrict b, std::size_t n,
                     reduce_op op) noexcept {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg:
      for (std::size_t i = 0; i < n; ++i) acc[i] = a[i] + b[i];
      break;
    case reduce_op::max:
      for (std::size_t i = 0; i < n; ++i) acc[i] = std::max(a[i], b[i]);
      break;
    case reduce_op::min:
      for (std::size_t i = 0; i < n; ++i) acc[i] = std::min(a[i], b[i]);
      break;
  }
}

template <class T>
inline void finish_avg(T* acc, std::size_t n, int ranks) noexcept {
  for (std::size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] / static_cast<T>(ranks));
}

/// dsts[k][i] = op over s of srcs[s][i], for i < count and every k < ndst; `ranks`
/// divides for avg. The result is formed block by block in a small buffer that stays in
/// L1 and is stored to every destination from there (an all_reduce chunk is then read
/// once from each source and written once to each output). A destination may alias any
/// source (each element is read from every source before it is written).
template <class T>
inline void reduce_typed(void* const* dsts, int ndst, const void* const* srcs, int nsrc, std::size_t count,
                         reduce_op op, int ranks) noexcept {
  constexpr std::size_t block = 2048;
  alignas(64) T acc[block];
  for (std::size_t b = 0; b < count; b += block) {
    const std::size_t n = std::min(block, count - b);
    const auto* s0 = static_cast<const T*>(srcs[0]) + b;
    if (nsrc >= 2) {
      combine2(acc, s0, static_cast<const T*>(srcs[1]) + b, n, op);
    } else {
      std::memcpy(acc, s0, n * sizeof(T));
    }
    for (int s = 2; s < nsrc; ++s) combine(acc, static_cast<const T*>(srcs[s]) + b, n, op);
    if (op == reduce_op::avg) finish_avg(acc, n, ranks);
    for (int k = 0; k < ndst; ++k) std::memcpy(static_cast<T*>(dsts[k]) + b, acc, n * sizeof(T));
  }
}

/// bf16: accumulate in f32 over all sources, round once.
inline void reduce_bf16(void* const* dsts, int ndst, const void* const* srcs, int nsrc, std::size_t count,
                        reduce_op op, int ranks) noexcept {
  constexpr std::size_t block = 1024;
  alignas(64) float acc[block];
  alignas(64) float x[block];
  alignas(64) std::uint16_t out[block];
  for (std::size_t b = 0; b < count; b += block) {
    const std::size_t n = std::min(block, count - b);
    const auto* s0 = static_cast<const std::uint16_t*>(srcs[0]) + b;
    for (std::size_t i = 0; i < n; ++i) acc[i] = bf16_to_float(s0[i]);
    for (int s = 1; s < nsrc; ++s) {
      const auto* si = static_cast<const std::uint16_t*>(srcs[s]) + b;
      for (std::size_t i = 0; i < n; ++i) x[i] = bf16_to_float(si[i]);
      combine(acc, x, n, op);
    }
    if (op == reduce_op::avg) finish_avg(acc, n, ranks);
    for (std::size_t i = 0; i < n; ++i) out[i] = float_to_bf16(acc[i]);
    for (int k = 0; k < ndst; ++k) std::memcpy(static_cast<std::uint16_t*>(dsts[k]) + b, out, n * 2);
  }
}

/// Reduces `nsrc` buffers of `count` elements of `t` into each of the `ndst` buffers
/// `dsts`. `t` must be reducible.
inline void reduce(void* const* dsts, int ndst, const void* const* srcs, int nsrc, std::size_t count, dtype t,
                   reduce_op op, int ranks) noexcept {
  switch (t) {
    case dtype::u8: reduce_typed<std::uint8_t>(dsts, ndst, srcs, nsrc, count, op, ranks); break;
    case dtype::i32: reduce_typed<std::int32_t>(dsts, ndst, srcs, nsrc, count, op, ranks); break;
    case dtype::i64: reduce_typed<std::int64_t>(dsts, ndst, srcs, nsrc, count, op, ranks); break;
    case dtype::f32: reduce_typed<float>(dsts, ndst, srcs, nsrc, count, op, ranks); break;
    case dtype::f64: reduce_typed<double>(dsts, ndst, srcs, nsrc, count, op, ranks); break;
    case dtype::bf16: reduce_bf16(dsts, ndst, srcs, nsrc, count, op, ranks); break;
    case dtype::f8e4m3: case dtype::f8e5m2: case dtype::f16: break;
  }
}

/// Reduces `nsrc` buffers of `count` elements of `t` into dst. `t` must be reducible.
inline void reduce(void* dst, const void* const* srcs, int nsrc, std::size_t count, dtype t, reduce_op op,
                   int ranks) noexcept {
  reduce(&dst, 1, srcs, nsrc, count, t, op, ranks);
}

}  // namespace tessera::comm::detail
