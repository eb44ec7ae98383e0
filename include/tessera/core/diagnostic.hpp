// tessera/core/diagnostic.hpp: putting the culprit into a compile-time diagnostic.
//
// A static_assert's message is a literal, so it cannot say *which* axis or *what* size is
// wrong. tessera's entry points therefore fail inside a class template whose arguments
// are the culprit: the compiler prints them in the instantiation line right above the
// message, e.g. (g++)
//   In instantiation of 'struct tessera::diagnostic::policy_axis_not_in_mesh<
//       tessera::diagnostic::text<'d', 'a', 't', 'a'>, tessera::diagnostic::text<'d', 'p'>>'
//   error: static assertion failed: tessera recipe: a policy names an axis that is not in
//       the mesh; ...
// `text_t<buf>` turns a constexpr string into such a type (one char per argument, which
// g++ and clang print alike); numbers are template arguments as they are.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <utility>

namespace tessera::diagnostic {

/// A string as the list of its characters: what a diagnostic prints.
template <char... C>
struct text {};

/// A structural copy of a constexpr string (a template argument).
template <std::size_t N>
struct buffer {
  char data[N + 1]{};
};
template <std::size_t N>
constexpr buffer<N> buffer_of(std::string_view s) {
  buffer<N> b;
  for (std::size_t i = 0; i < N && i < s.size(); ++i) b.data[i] = s[i];
  return b;
}

template <auto B, std::size_t... I>
text<B.data[I]...> text_of(std::index_sequence<I...>);
/// The text type of buffer B: text_t<buffer_of<s.size()>(s)>.
template <auto B>
using text_t = decltype(text_of<B>(std::make_index_sequence<sizeof(B.data) - 1>{}));

/// Length of `names` joined by ", " (for a buffer of the right size).
constexpr std::size_t joined_size(std::span<const std::string_view> names) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < names.size(); ++i) n += names[i].size() + (i ? 2 : 0);
  return n;
}
/// `names` joined by ", ".
template <std::size_t N>
constexpr buffer<N> joined(std::span<const std::string_view> names) {
  buffer<N> b;
  std::size_t k = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) b.data[k++] = ',', b.data[k++] = ' ';
    for (char c : names[i]) b.data[k++] = c;
  }
  return b;
}

/// False, but only once T is known (for static_assert in a template that is instantiated
/// only to fail).
template <class... T>
inline constexpr bool always_false = false;

}  // namespace tessera::diagnostic
