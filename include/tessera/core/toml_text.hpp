// tessera/core/toml_text.hpp: the text of a TOML file to a toml::table, past the parser
// defects of Debian 12's toml++ 3.3.0 that a file can reach (core/detail/toml_precheck.hpp).
// Run configurations (train/config.hpp) and link profiles (plan/link_profile.hpp) are read
// through it, and fuzzed (tests/fuzz: fuzz_toml_config, fuzz_link_profile).
// tessera-requires: tomlplusplus
#pragma once

#include <string>
#include <utility>

#if __has_include(<toml++/toml.hpp>)
#include <toml++/toml.hpp>
#else
#include <toml++/toml.h>  // toml++ 3.3 (Debian 12) names its header toml.h
#endif

#include <tessera/core/detail/toml_precheck.hpp>
#include <tessera/core/error.hpp>

namespace tessera {

namespace detail {
/// "path:line:column" of a place in a TOML file.
inline std::string toml_where(const std::string& path, const toml::source_region& r) {
  return path + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}
}  // namespace detail

/// Parses `text`, the contents of the TOML file `path`. Throws tessera::error
/// "path:line:column: TOML syntax error: ..." for text that is not TOML, or that would
/// reach one of toml++ 3.3.0's defects (toml_precheck). toml++'s error path reaches an
/// `unreachable` in its Unicode tables when a syntax error lies near a non-ASCII character
/// (found twice by fuzz_toml_config), so the text is parsed first with every non-ASCII
/// character replaced by one 'x' (valid UTF-8 is checked first, and outside strings and
/// comments there is none): a syntax error is then reported from ASCII text at the same
/// line and column, and only text whose structure parsed is parsed again as written.
inline toml::table parse_toml_text(const std::string& text, const std::string& path) {
  detail::toml_precheck(text, path);
  auto parse = [&](const std::string& t) {
#if TOML_EXCEPTIONS
    try {
      return toml::parse(t, path);
    } catch (const toml::parse_error& e) {
      throw error(detail::toml_where(path, e.source()) + ": TOML syntax error: " + std::string(e.description()));
    }
#else
    auto parsed = toml::parse(t, path);
    if (!parsed)
      throw error(detail::toml_where(path, parsed.error().source()) +
                  ": TOML syntax error: " + std::string(parsed.error().description()));
    return std::move(parsed).table();
#endif
  };
  std::string ascii;
  ascii.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) ascii += text[i];
    else if ((b & 0xC0u) != 0x80u) ascii += 'x';  // a character's first byte; continuation bytes vanish
  }
  toml::table root = parse(ascii);
  if (ascii.size() != text.size()) root = parse(text);
  return root;
}

}  // namespace tessera
