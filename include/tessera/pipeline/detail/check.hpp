// tessera/pipeline/detail/check.hpp: the pipeline layer's run-time error.
//
// A private stand-in for tessera/core/error.hpp's check(): that header uses
// std::source_location, which clang 14 with libstdc++ 12 lacks, so the pipeline headers
// do not include it (see the lead's note).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tessera::pipeline {

/// Thrown by generators and lowering on bad input at run time.
class schedule_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
/// Throws schedule_error when `ok` is false; in a constant evaluation that makes the
/// program ill-formed and the compiler shows this call with the message.
constexpr void check(bool ok, std::string_view what) {
  if (!ok) throw schedule_error(std::string(what));
}
}  // namespace detail
}  // namespace tessera::pipeline
