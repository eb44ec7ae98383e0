// tessera/core/error.hpp: the run-time face of tessera's diagnostics.
//
// Every check that runs at compile time when its facts are static runs at run time,
// with the same words, when they are dynamic. Run-time failures throw tessera::error.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tessera {

/// Thrown when a check fails at run time (bad layout, bad size, failed collective...).
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws tessera::error with `what` when `ok` is false. Usable in constexpr code: when
/// it fails during constant evaluation the program is ill-formed and the compiler shows
/// this call, so prefer static_assert with a message at compile-time entry points.
constexpr void check(bool ok, std::string_view what) {
  if (!ok) throw error(std::string(what));
}

}  // namespace tessera
