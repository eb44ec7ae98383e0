// tessera/core/fixed_string.hpp: string literals as template arguments (axis names).
#pragma once

#include <cstddef>
#include <string_view>

namespace tessera {

/// A string literal usable as a template argument: `axis<"dp">`.
/// Structural (all members public), so two equal strings give the same type.
template <std::size_t N>
struct fixed_string {
  char data[N]{};

  constexpr fixed_string(const char (&s)[N]) noexcept {  // NOLINT: implicit by design
    for (std::size_t i = 0; i < N; ++i) data[i] = s[i];
  }
  /// Length without the terminating zero.
  static constexpr std::size_t size() noexcept { return N - 1; }
  constexpr std::string_view view() const noexcept { return {data, N - 1}; }
  constexpr operator std::string_view() const noexcept { return view(); }
};

template <std::size_t A, std::size_t B>
constexpr bool operator==(const fixed_string<A>& a, const fixed_string<B>& b) noexcept {
  return a.view() == b.view();
}

}  // namespace tessera
