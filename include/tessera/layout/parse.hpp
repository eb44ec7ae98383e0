// tessera/layout/parse.hpp: layouts from text, for tools that read them from flags.
//
// Accepts both notations that print.hpp writes:
//   DTensor:    "S(0),R"  "[S(0), S(1), P(sum)]"  "S(-1),P"   (P alone means P(sum));
//               "S(0)#1,S(0)#0" orders the splits of one dim (0 = outermost)
//   canonical:  "{0: (dp, tp), partial: sum(pp)}"  "{1: tp}"  "{}"
// Errors throw tessera::error naming the problem and the accepted forms.
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/layout/layout_spec.hpp>

namespace tessera {

namespace detail {
struct text_cursor {
  std::string_view s;
  std::size_t i = 0;
  void skip() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    skip();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool done() {
    skip();
    return i == s.size();
  }
  std::string_view word() {
    skip();
    const std::size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' || s[i] == '-')) ++i;
    return s.substr(b, i - b);
  }
};

/// The largest number a layout string may hold (a dimension or a #order).
inline constexpr int max_layout_number = 99999;

inline int parse_int(std::string_view w, std::string_view what) {
  check(!w.empty(), std::string(what) + ": expected a number");
  int v = 0;
  bool neg = false;
  std::size_t k = 0;
  if (w[0] == '-') {
    neg = true;
    k = 1;
  }
  check(k < w.size(), std::string(what) + ": expected a number, got '" + std::string(w) + "'");
  for (; k < w.size(); ++k) {
    check(std::isdigit(static_cast<unsigned char>(w[k])) != 0,
          std::string(what) + ": expected a number, got '" + std::string(w) + "'");
    // Dimensions and #orders are small; the bound keeps v * 10 + 9 inside int.
    check(v <= max_layout_number / 10,
          std::string(what) + ": the number '" + std::string(w.substr(0, 24)) + "' is too large");
    v = v * 10 + (w[k] - '0');
  }
  return neg ? -v : v;
}

inline reduce parse_reduce(std::string_view w, std::string_view text) {
  if (w == "sum") return reduce::sum;
  if (w == "avg") return reduce::avg;
  if (w == "max") return reduce::max;
  if (w == "min") return reduce::min;
  throw error("layout '" + std::string(text) + "': unknown reduce op '" + std::string(w) +
              "'; use sum, avg, max or min");
}

inline void finish(const layout_spec& s, std::string_view text) {
  const layout_error e = validate(s);
  check(e == layout_error::none, "layout '" + std::string(text) + "': " + std::string(describe(e)));
}
}  // namespace detail

/// Parses a layout of a rank-`rank` tensor on a mesh with axes `names` (mesh order).
inline layout_spec parse_layout(std::string_view text, std::span<const std::string_view> names, int rank) {
  const std::string t(text);
  check(rank >= 0 && rank <= max_tensor_rank, "layout '" + t + "': the tensor rank must be between 0 and 8");
  const int A = static_cast<int>(names.size());
  layout_spec s = replicated_spec(rank, A);
  detail::text_cursor c{text};
  if (c.eat('{')) {  // canonical
    while (!c.eat('}')) {
      check(!c.done(), "layout '" + t + "': missing '}'");
      const std::string_view key = c.word();
      check(c.eat(':'), "layout '" + t + "': expected ':' after '" + std::string(key) + "'");
      reduce op = reduce::sum;
      bool is_partial = key == "partial";
      int d = 0;
      if (is_partial) {
        if (c.eat('{')) {  // "partial: {}"
          check(c.eat('}'), "layout '" + t + "': write the partial axes as partial: sum(dp, tp)");
          c.eat(',');
          continue;
        }
        op = detail::parse_reduce(c.word(), text);
      } else {
        d = detail::parse_int(key, "layout '" + t + "'");
        check(d >= -rank && d < rank, "layout '" + t + "': dimension " + std::to_string(d) +
                                          " is out of range for a tensor of rank " + std::to_string(rank));
        if (d < 0) d += rank;
        check(s.axes_of(d) == 0, "layout '" + t + "': dimension " + std::to_string(d) + " is listed twice");
      }
      const bool paren = c.eat('(');
      do {
        const std::string_view w = c.word();
        if (w.empty()) break;
        const auto it = std::find(names.begin(), names.end(), w);
        check(it != names.end(), "layout '" + t + "': '" + std::string(w) + "' is not an axis of the mesh");
        const int a = static_cast<int>(it - names.begin());
        check(!s.is_sharded(a) && !s.is_partial(a), "layout '" + t + "': axis '" + std::string(w) + "' is used twice");
        if (is_partial)
          s.set_partial(a, op);
        else
          s.push_shard(d, a);
      } while (paren && c.eat(','));
      check(!paren || c.eat(')'), "layout '" + t + "': missing ')'");
      c.eat(',');
    }
    check(c.done(), "layout '" + t + "': unexpected text after '}'");
    detail::finish(s, text);
    return s;
  }
  // DTensor: one placement per mesh axis.
  const bool bracket = c.eat('[');
  struct entry {
    int dim, order;
  };
  std::vector<entry> shards(static_cast<std::size_t>(A), entry{-1, -1});
  int a = 0;
  do {
    const std::string_view w = c.word();
    check(!w.empty(), "layout '" + t + "': expected a placement S(d), R or P(op)");
    check(a < A, "layout '" + t + "': more placements than the mesh has axes (" + std::to_string(A) + ")");
    if (w == "R") {
    } else if (w == "P") {
      reduce op = reduce::sum;
      if (c.eat('(')) {
        op = detail::parse_reduce(c.word(), text);
        check(c.eat(')'), "layout '" + t + "': missing ')'");
      }
      check(!s.has_partial() || s.op == op, "layout '" + t + "': " + std::string(describe(layout_error::mixed_partial_ops)));
      s.set_partial(a, op);
    } else if (w == "S") {
      check(c.eat('('), "layout '" + t + "': write a shard as S(dim)");
      c.skip();
      std::string_view num = c.word();
      int d = detail::parse_int(num, "layout '" + t + "'");
      check(c.eat(')'), "layout '" + t + "': missing ')'");
      check(d >= -rank && d < rank, "layout '" + t + "': S(" + std::to_string(d) + ") is out of range for a tensor of rank " + std::to_string(rank));
      int order = -1;
      if (c.eat('#')) order = detail::parse_int(c.word(), "layout '" + t + "'");
      shards[static_cast<std::size_t>(a)] = {d < 0 ? d + rank : d, order};
    } else {
      throw error("layout '" + t + "': unknown placement '" + std::string(w) + "'; use S(d), R or P(op)");
    }
    ++a;
  } while (c.eat(','));
  check(!bracket || c.eat(']'), "layout '" + t + "': missing ']'");
  check(c.done(), "layout '" + t + "': unexpected text at position " + std::to_string(c.i));
  check(a == A, "layout '" + t + "': " + std::to_string(a) + " placements for a mesh of " + std::to_string(A) +
                    " axes; give one placement per mesh axis");
  for (int d = 0; d < rank; ++d) {  // order the axes of each dim: by #k if given, else mesh order
    std::vector<std::pair<int, int>> on;
    for (int x = 0; x < A; ++x)
      if (shards[static_cast<std::size_t>(x)].dim == d)
        on.push_back({shards[static_cast<std::size_t>(x)].order < 0 ? x : shards[static_cast<std::size_t>(x)].order, x});
    std::sort(on.begin(), on.end());
    for (std::size_t k = 0; k < on.size(); ++k) {
      check(k == 0 || on[k].first != on[k - 1].first,
            "layout '" + t + "': two axes of dimension " + std::to_string(d) + " have the same #order");
      s.push_shard(d, on[k].second);
    }
  }
  detail::finish(s, text);
  return s;
}

}  // namespace tessera
