// tessera/core/detail/toml_precheck.hpp: what a TOML file (a run configuration, a link
// profile) must pass before it is handed to toml++ (core/toml_text.hpp runs it).
//
// Debian 12's toml++ 3.3.0 has parser defects a config file can reach: a table header that
// does not start with a key (`[$`, `[[[1]]]`) violates an assumption of its key parser
// (an assertion in debug builds, undefined behaviour in release builds), and non-ASCII bytes
// outside strings and comments (`\xcf\xa2`) reach code with undefined behaviour
// (marzer/tomlplusplus #294, #295; fixed upstream after 3.3.0). This check rejects, with a
// message naming the file, line and column, what would reach those paths; anything it
// lets through is also what TOML allows, so valid configs are unaffected:
//   - the text is valid UTF-8 (TOML requires it);
//   - bytes outside ASCII stand only in strings and comments (TOML's bare keys, numbers,
//     booleans, dates and punctuation are ASCII);
//   - a table header (`[` or `[[` first on a line, outside a value) starts with a bare key
//     character (A-Za-z0-9_-) or a quote;
//   - a string begins only where a key or value can: first on a line or after `=`, `[`,
//     `{`, `,` or `.` (found by fuzz_toml_config: `lr = 1"""...é` made toml++'s error path
//     reach an `unreachable` in its Unicode tables);
//   - where a value must begin (after `=`, or after `[` or `,` inside a value) there is no
//     `}` or `,` (nor `]` right after `=`): toml++ asserts on `x = [}` (found by
//     fuzz_toml_config in CI's 30-second run).
//   - a value beginning with a digit and followed by one space and a digit is a date and a
//     time (`YYYY-MM-DD HH:...`): toml++ asserts on `s = 1979-05-27 1` and `s = 1;79-05-27 1`
//     (found by fuzz_link_profile in 600-second runs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <tessera/core/error.hpp>

namespace tessera::detail {

inline void toml_precheck(std::string_view s, const std::string& path) {
  std::size_t line = 1, col = 1;
  auto fail = [&](const std::string& what) {
    throw error(path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": TOML syntax error: " + what);
  };
  // 1. UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b == '\n') {
      ++line;
      col = 1;
      ++i;
      continue;
    }
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b < 0x80) n = 1, cp = b;
    else if (b >= 0xC2 && b <= 0xDF) n = 2, cp = b & 0x1Fu;
    else if (b >= 0xE0 && b <= 0xEF) n = 3, cp = b & 0x0Fu;
    else if (b >= 0xF0 && b <= 0xF4) n = 4, cp = b & 0x07u;
    else fail("the file is not valid UTF-8 (byte " + std::to_string(b) + ")");
    if (s.size() - i < n) fail("the file is not valid UTF-8 (it ends inside a character)");
    for (std::size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0u) != 0x80u) fail("the file is not valid UTF-8 (byte " + std::to_string(c) + ")");
      cp = (cp << 6) | (c & 0x3Fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      fail("the file is not valid UTF-8 (an overlong form, a surrogate or a code point above U+10FFFF)");
    i += n;
    ++col;
  }
  // 2. Non-ASCII outside strings and comments; table headers start with a key.
  line = 1;
  col = 1;
  int depth = 0;             // open [ and { of values
  bool line_start = true;    // only whitespace so far on this line
  bool value_side = false;   // after '=' on this line (or inside a value)
  char prev = '\n';          // the last character outside whitespace, strings and comments
  auto advance = [&](std::size_t& i) {
    if (s[i] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(s[i]) & 0xC0u) != 0x80u) {
      ++col;
    }
    ++i;
  };
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '\n') {
      advance(i);
      line_start = true;
      if (depth == 0) value_side = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      advance(i);
      continue;
    }
    if (c == '#') {  // a comment: anything to the end of the line
      while (i < s.size() && s[i] != '\n') advance(i);
      continue;
    }
    if (c == '"' || c == '\'') {  // a string: '...', "...", '''...''', """..."""
      // Only where a key or a value begins: first on a line, or after = [ { , or '.'.
      // Elsewhere (`lr = 1"""...`) toml++ does not read a string, and its error path then
      // runs into what the string held.
      if (!line_start && prev != '=' && prev != '[' && prev != '{' && prev != ',' && prev != '.')
        fail("a quote after '" + std::string(1, prev) + "' cannot begin a string; put a key or a value before it");
      const bool multi = s.substr(i, 3) == std::string_view(c == '"' ? "\"\"\"" : "'''");
      const std::size_t open = multi ? 3 : 1;
      for (std::size_t k = 0; k < open; ++k) advance(i);
      for (;;) {
        if (i >= s.size()) return;  // unterminated: toml++ reports it
        if (!multi && s[i] == '\n') break;
        if (c == '"' && s[i] == '\\' && i + 1 < s.size()) {
          advance(i);
          advance(i);
          continue;
        }
        if (s[i] == c && (!multi || s.substr(i, 3) == std::string_view(c == '"' ? "\"\"\"" : "'''"))) {
          for (std::size_t k = 0; k < open; ++k) advance(i);
          // TOML allows up to two more quotes closing a multi-line string
          while (multi && i < s.size() && s[i] == c) advance(i);
          break;
        }
        advance(i);
      }
      line_start = false;
      prev = c;
      continue;
    }
    if (static_cast<unsigned char>(c) >= 0x80)
      fail("a character outside ASCII stands outside a string or comment; quote the key or the value");
    if (c == '[' && line_start && depth == 0 && !value_side) {  // a table header
      advance(i);
      if (i < s.size() && s[i] == '[') advance(i);
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) advance(i);
      const char k = i < s.size() ? s[i] : '\n';
      const bool key_start = (k >= 'A' && k <= 'Z') || (k >= 'a' && k <= 'z') || (k >= '0' && k <= '9') ||
                             k == '_' || k == '-' || k == '"' || k == '\'';
      if (!key_start) fail("a table header must start with a key, e.g. [training] or [[a.b]]");
      line_start = false;
      prev = '[';
      continue;
    }
    // Where a value must begin (after '=', or after '[' or ',' inside a value) a closing
    // bracket or a comma is no value: toml++ 3.3.0 asserts on `x = [}` instead of reporting
    // it (found by fuzz_toml_config). An empty array `[]` and a trailing comma `[1, ]` stay.
    if (value_side && (c == '}' || c == ',' || c == ']') && (prev == '=' || prev == '[' || prev == ',') &&
        !(c == ']' && prev != '='))
      fail(std::string("'") + c + "' where a value must begin (after '" + prev + "'); write the value first");
    // A value beginning with a digit and followed by one space and a digit: valid TOML only as
    // a date-time, `YYYY-MM-DD HH:MM...`. toml++ 3.3.0 reads on past that digit and asserts
    // when a terminator follows it (`s = 1979-05-27 1` and `s = 1;79-05-27 1`, found by
    // fuzz_link_profile), so anything but a date followed by `HH:` is refused here. The value
    // runs, as toml++ scans it, to the first of its terminators: whitespace , ] } #.
    if (value_side && c >= '0' && c <= '9' && (prev == '=' || prev == '[' || prev == ',')) {
      auto terminator = [](char t) {
        return t == ' ' || t == '\t' || (t >= '\n' && t <= '\r') || t == ']' || t == '}' || t == ',' || t == '#';
      };
      std::size_t j = i;
      while (j < s.size() && !terminator(s[j])) ++j;
      auto digit = [&](std::size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '9'; };
      if (s.substr(j, 1) == " " && digit(j + 1)) {
        const std::string_view v = s.substr(i, j - i);
        bool date = v.size() == 10;
        for (std::size_t k = 0; date && k < v.size(); ++k) date = (k == 4 || k == 7) ? v[k] == '-' : digit(i + k);
        if (!date || !digit(j + 2) || s.substr(j + 3, 1) != ":")
          fail("a value followed by a space and a digit must be a date and a time, e.g. 1979-05-27 07:32:00");
      }
    }
    if (c == '=' && depth == 0) value_side = true;
    if (value_side && (c == '[' || c == '{')) ++depth;
    if (value_side && (c == ']' || c == '}') && depth > 0) --depth;
    line_start = false;
    prev = c;
    advance(i);
  }
}

}  // namespace tessera::detail
