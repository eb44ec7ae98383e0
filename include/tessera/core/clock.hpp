// tessera/core/clock.hpp: the one clock of tessera's timestamps -- microseconds of
// std::chrono::steady_clock -- shared by the flight recorder (comm/flight_recorder.hpp) and
// the trace recorder (core/trace.hpp), so collectives and compute line up in a trace.
#pragma once

#include <chrono>
#include <cstdint>

namespace tessera {

/// Microseconds of std::chrono::steady_clock.
inline std::int64_t steady_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace tessera
