// tessera/core/reduce.hpp: the one list of reduce operations, shared by every layer: the op
// of a partial layout (`partial<reduce::sum>`) and of a collective (`reduce_op::sum`) are
// the same value, so a plan's reduce-scatter passes it on unchanged.
#pragma once

#include <cstdint>
#include <string_view>

namespace tessera {

/// The global value of a partial tensor is op over the ranks' values; a reduce-scatter or
/// all-reduce combines with op (avg: the sum divided by the number of ranks).
enum class reduce_op : std::uint8_t { sum, avg, max, min };

/// The layout layer's spelling: `partial<reduce::max>`, `partial_on<reduce::sum, "dp">`.
using reduce = reduce_op;

/// "sum", "avg", "max" or "min".
constexpr std::string_view name_of(reduce_op op) noexcept {
  switch (op) {
    case reduce_op::sum: return "sum";
    case reduce_op::avg: return "avg";
    case reduce_op::max: return "max";
    case reduce_op::min: return "min";
  }
  return "?";
}

/// The same as name_of (the layout layer's name for it).
constexpr std::string_view to_string(reduce_op op) noexcept { return name_of(op); }

}  // namespace tessera
