// tessera/core/json.hpp: the one JSON reader and writer helper of the library.
//
// Every JSON tessera reads (safetensors headers, Hugging Face index files, flight-recorder
// dumps) goes through this reader, so every one gets the same guarantees (docs/formats.md
// says why tessera has its own reader rather than a dependency):
//   - strict RFC 8259 grammar: nothing after the value but whitespace, no leading zeros,
//     no bare `+`, `.5`, `1.` or `NaN`, no control characters in strings, `\u` followed by
//     exactly four hex digits, surrogates only in pairs; duplicate object keys are errors;
//   - numbers are checked once, here: a number out of double range (`2e666`, `1e-400`) is
//     an error; `as_int64()` gives a value only for an integer literal that fits int64_t;
//   - nesting is limited (`max_depth`, 64 by default), so no input can overflow the stack;
//   - errors are tessera::error, "<source>: invalid JSON at byte <n>: <what>".
// Strings are kept as the bytes between the quotes (escapes decoded to UTF-8); other bytes
// are not checked for UTF-8 validity, so names written by json_quote read back unchanged.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <tessera/core/error.hpp>

namespace tessera::json {

/// A parsed JSON value. Objects keep their members in file order.
struct value {
  enum class kind : std::uint8_t { null, boolean, number, string, array, object };
  kind k = kind::null;
  bool b = false;
  bool integral = false;    ///< a number written as an integer literal that fits int64_t
  double num = 0;           ///< every number, as the nearest double
  std::int64_t integer = 0; ///< the exact value when `integral`
  std::string str;
  std::vector<value> items;       ///< array elements, or object member values
  std::vector<std::string> keys;  ///< object member names (same order as items)

  bool is_null() const noexcept { return k == kind::null; }
  bool is_string() const noexcept { return k == kind::string; }
  bool is_number() const noexcept { return k == kind::number; }
  bool is_array() const noexcept { return k == kind::array; }
  bool is_object() const noexcept { return k == kind::object; }
  /// The value of an integer literal that fits int64_t; empty for anything else.
  std::optional<std::int64_t> as_int64() const noexcept {
    if (k == kind::number && integral) return integer;
    return std::nullopt;
  }
  friend bool operator==(const value&, const value&) = default;

  /// The member named `key` of an object, or nullptr (also when this is no object).
  const value* get(std::string_view key) const noexcept {
    if (k != kind::object) return nullptr;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return &items[i];
    return nullptr;
  }
};

/// The name of a kind, for messages ("a string", "an object", ...).
inline std::string_view kind_name(value::kind k) noexcept {
  switch (k) {
    case value::kind::null: return "null";
    case value::kind::boolean: return "a boolean";
    case value::kind::number: return "a number";
    case value::kind::string: return "a string";
    case value::kind::array: return "an array";
    case value::kind::object: return "an object";
  }
  return "?";
}

inline constexpr int default_max_depth = 64;

/// Parses `text` as one JSON document; `source` (a file name) starts every error message.
class parser {
 public:
  parser(std::string_view text, std::string source, int max_depth = default_max_depth)
      : s_(text), source_(std::move(source)), max_depth_(max_depth) {}

  value parse() {
    value v = parse_value(0);
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  std::string_view s_;
  std::string source_;
  int max_depth_;
  std::size_t i_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw error(source_ + ": invalid JSON at byte " + std::to_string(i_) + ": " + what);
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  char peek() {
    skip_ws();
    if (i_ >= s_.size()) fail("unexpected end of input");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool literal(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  static std::string shown(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
    static constexpr char hex[] = "0123456789abcdef";
    return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
  }

  value parse_value(int depth) {
    value v;
    const char c = peek();
    if (c == '{' || c == '[') {
      if (depth >= max_depth_)
        fail("nesting deeper than " + std::to_string(max_depth_) + " levels");
      ++i_;
      const bool obj = c == '{';
      v.k = obj ? value::kind::object : value::kind::array;
      const char close = obj ? '}' : ']';
      if (peek() == close) {
        ++i_;
        return v;
      }
      for (;;) {
        if (obj) {
          if (peek() != '"') fail("expected a string key");
          std::string key = parse_string();
          expect(':');
          v.keys.push_back(std::move(key));
        }
        v.items.push_back(parse_value(depth + 1));
        const char d = peek();
        ++i_;
        if (d == close) {
          if (obj) check_unique_keys(v.keys);
          break;
        }
        if (d != ',') {
          --i_;
          fail(std::string("expected ',' or '") + close + "' in " + (obj ? "an object" : "an array"));
        }
      }
    } else if (c == '"') {
      v.k = value::kind::string;
      v.str = parse_string();
    } else if (literal("true")) {
      v.k = value::kind::boolean;
      v.b = true;
    } else if (literal("false")) {
      v.k = value::kind::boolean;
    } else if (literal("null")) {
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      parse_number(v);
    } else {
      fail("unexpected " + shown(c));
    }
    return v;
  }

  /// Duplicate keys are an error (sorting: n log n, however many keys an object has).
  void check_unique_keys(const std::vector<std::string>& keys) const {
    if (keys.size() < 2) return;
    std::vector<const std::string*> p;
    p.reserve(keys.size());
    for (const auto& k : keys) p.push_back(&k);
    std::sort(p.begin(), p.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
    for (std::size_t i = 1; i < p.size(); ++i)
      if (*p[i] == *p[i - 1]) fail("duplicate key \"" + p[i]->substr(0, 60) + "\" in the object ending here");
  }

  bool digit() const { return i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9'; }

  void parse_number(value& v) {
    v.k = value::kind::number;
    const std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (!digit()) fail("a number needs a digit after '-'");
    if (s_[i_] == '0') {
      ++i_;
      if (digit()) fail("a number has a leading zero");
    } else {
      while (digit()) ++i_;
    }
    bool integral = true;
    if (i_ < s_.size() && s_[i_] == '.') {
      integral = false;
      ++i_;
      if (!digit()) fail("a number needs a digit after '.'");
      while (digit()) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      integral = false;
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digit()) fail("a number needs a digit in its exponent");
      while (digit()) ++i_;
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + i_;
    const auto [p, ec] = std::from_chars(b, e, v.num);
    if (ec == std::errc::result_out_of_range || p != e)
      fail("number " + std::string(s_.substr(start, std::min<std::size_t>(i_ - start, 40))) +
           " is out of the range of a double");
    if (integral) {
      const auto [q, ec2] = std::from_chars(b, e, v.integer);
      v.integral = ec2 == std::errc{} && q == e;
      if (!v.integral) v.integer = 0;
    }
  }

  unsigned hex4() {
    if (s_.size() - i_ < 4) fail("a \\u escape needs four hex digits");
    unsigned cp = 0;
    for (int n = 0; n < 4; ++n) {
      const char h = s_[i_];
      cp <<= 4;
      if (h >= '0' && h <= '9') cp |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') cp |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') cp |= static_cast<unsigned>(h - 'A' + 10);
      else fail("a \\u escape needs four hex digits, got " + shown(h));
      ++i_;
    }
    return cp;
  }

  static void put_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_];
      if (c == '"') {
        ++i_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character " + shown(c) + " in a string");
      ++i_;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("a \\u escape is a lone low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!literal("\\u")) fail("a high surrogate \\u escape is not followed by a low one");
            const std::uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("a high surrogate \\u escape is not followed by a low one");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default: --i_; fail("unknown escape \\" + std::string(1, e));
      }
    }
  }
};

/// Parses one JSON document; throws tessera::error starting with `source`.
inline value parse(std::string_view text, std::string source, int max_depth = default_max_depth) {
  return parser(text, std::move(source), max_depth).parse();
}

/// `s` as a JSON string literal (quotes, backslashes and control characters escaped; other
/// bytes as they are). json::parse reads it back as `s`.
inline std::string quote(std::string_view s) {
  std::string o = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char hex[] = "0123456789abcdef";
          o += "\\u00";
          o += hex[(c >> 4) & 0xf];
          o += hex[c & 0xf];
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

/// `v` as compact JSON text: json::parse reads it back equal (integers as they were read,
/// other numbers in the shortest form that reads back to the same double).
inline std::string dump(const value& v) {
  switch (v.k) {
    case value::kind::null: return "null";
    case value::kind::boolean: return v.b ? "true" : "false";
    case value::kind::number: {
      if (v.integral) return std::to_string(v.integer);
      char buf[32];
      const auto r = std::to_chars(buf, buf + sizeof buf, v.num);
      std::string t(buf, r.ptr);
      // to_chars may write an integral double without '.' or 'e'; keep it a non-integer
      if (t.find_first_of(".e") == std::string::npos) t += ".0";
      return t;
    }
    case value::kind::string: return quote(v.str);
    case value::kind::array:
    case value::kind::object: {
      const bool obj = v.k == value::kind::object;
      std::string o(1, obj ? '{' : '[');
      for (std::size_t i = 0; i < v.items.size(); ++i) {
        if (i) o += ',';
        if (obj) o += quote(v.keys[i]) + ":";
        o += dump(v.items[i]);
      }
      return o + (obj ? '}' : ']');
    }
  }
  return "null";
}

}  // namespace tessera::json
