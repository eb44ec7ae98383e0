// tessera/core/source_location.hpp: the caller's file and line, on every compiler we
// support. clang 14 with libstdc++ 12 has no std::source_location, so tessera uses its
// own type built on the compiler builtins all three toolchains (g++, clang, nvcc) share.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

struct source_location {
  const char* file = "";
  const char* function = "";
  std::uint_least32_t line_ = 0;

  /// The location of the call site when used as a default argument.
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           std::uint_least32_t line = __builtin_LINE()) noexcept {
    return source_location{file, function, line};
  }
  constexpr const char* file_name() const noexcept { return file; }
  constexpr const char* function_name() const noexcept { return function; }
  constexpr std::uint_least32_t line() const noexcept { return line_; }
};

/// "file:line" for messages that name a caller.
inline std::string where(const source_location& loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line());
}

}  // namespace tessera
