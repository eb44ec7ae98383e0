// tessera/pipeline/detail/check.hpp: the pipeline layer's run-time error, a
// tessera::error, so that callers can catch every tessera failure as one type.
#pragma once

#include <string>
#include <string_view>

#include <tessera/core/error.hpp>

namespace tessera::pipeline {

/// Thrown by generators and lowering on bad input at run time.
class schedule_error : public tessera::error {
 public:
  using tessera::error::error;
};

namespace detail {
/// Throws schedule_error when `ok` is false; in a constant evaluation that makes the
/// program ill-formed and the compiler shows this call with the message.
constexpr void check(bool ok, std::string_view what) {
  if (!ok) throw schedule_error(std::string(what));
}
}  // namespace detail
}  // namespace tessera::pipeline
