// Small helpers for tests that check error messages.
#pragma once

#include <exception>
#include <string>

namespace testing_support {

/// True when `part` occurs in `s`.
inline bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// The message of the E that f() throws, or "" when it throws nothing. Exceptions of other
/// types propagate (and fail the test).
template <class E = std::exception, class F>
std::string failure_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace testing_support
