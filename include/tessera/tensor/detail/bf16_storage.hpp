// tessera/tensor/detail/bf16_storage.hpp: a minimal bfloat16 storage type for dist_tensor
// and its tests until tessera's tensor dtypes land on main (then this maps onto them):
// 16 bits, converted through float with round-to-nearest-even, moved and reduced by the
// communicators as comm::dtype::bf16.
#pragma once

#include <cstdint>
#include <tessera/comm/detail/reduce.hpp>
#include <tessera/comm/types.hpp>

namespace tessera::detail {

struct bf16_storage {
  std::uint16_t bits = 0;

  bf16_storage() = default;
  explicit bf16_storage(float f) noexcept : bits(comm::detail::float_to_bf16(f)) {}
  explicit operator float() const noexcept { return comm::detail::bf16_to_float(bits); }
  friend bool operator==(bf16_storage a, bf16_storage b) noexcept { return float(a) == float(b); }
};

}  // namespace tessera::detail

template <>
struct tessera::comm::dtype_traits<tessera::detail::bf16_storage> {
  static constexpr dtype value = dtype::bf16;
};
