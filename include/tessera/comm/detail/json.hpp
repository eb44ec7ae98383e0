// tessera/comm/detail/json.hpp: the small JSON reader and writer of the flight recorder.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tessera/core/error.hpp>
#include <vector>

namespace tessera::comm::detail {

inline std::string json_quote(std::string_view s) {
  std::string o = "\"";
  for (char c : s) {
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

/// A parsed JSON value (numbers as double; enough for the recorder's integers < 2^53).
struct json_value {
  enum class type { null, boolean, number, string, array, object } t = type::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<json_value> arr;
  std::map<std::string, json_value> obj;

  const json_value& operator[](const std::string& k) const {
    static const json_value none{};
    auto it = obj.find(k);
    return it == obj.end() ? none : it->second;
  }
  std::int64_t integer() const { return static_cast<std::int64_t>(num); }
};

class json_parser {
 public:
  explicit json_parser(std::string_view text, std::string source)
      : s_(text), source_(std::move(source)) {}

  json_value parse() {
    json_value v = value();
    ws();
    if (i_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw tessera::error(source_ + ": invalid JSON at byte " + std::to_string(i_) + ": " + why);
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  char peek() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end of input");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  json_value value() {
    const char c = peek();
    json_value v;
    if (c == '{') {
      v.t = json_value::type::object;
      ++i_;
      if (peek() == '}') { ++i_; return v; }
      for (;;) {
        if (peek() != '"') fail("expected a key");
        std::string k = string();
        expect(':');
        v.obj[k] = value();
        if (peek() == ',') { ++i_; continue; }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.t = json_value::type::array;
      ++i_;
      if (peek() == ']') { ++i_; return v; }
      for (;;) {
        v.arr.push_back(value());
        if (peek() == ',') { ++i_; continue; }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.t = json_value::type::string;
      v.str = string();
      return v;
    }
    if (s_.substr(i_, 4) == "true") { i_ += 4; v.t = json_value::type::boolean; v.b = true; return v; }
    if (s_.substr(i_, 5) == "false") { i_ += 5; v.t = json_value::type::boolean; return v; }
    if (s_.substr(i_, 4) == "null") { i_ += 4; return v; }
    const std::size_t start = i_;
    while (i_ < s_.size() && (std::string_view("+-.eE0123456789").find(s_[i_]) != std::string_view::npos)) ++i_;
    if (start == i_) fail("unexpected character");
    v.t = json_value::type::number;
    try {
      v.num = std::stod(std::string(s_.substr(start, i_ - start)));
    } catch (...) {
      fail("bad number");
    }
    return v;
  }
  std::string string() {
    expect('"');
    std::string o;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) fail("bad escape");
        const char e = s_[i_++];
        switch (e) {
          case 'n': o += '\n'; break;
          case 't': o += '\t'; break;
          case 'r': o += '\r'; break;
          case 'b': o += '\b'; break;
          case 'f': o += '\f'; break;
          case 'u': {
            if (i_ + 4 > s_.size()) fail("bad \\u escape");
            const auto cp = std::stoul(std::string(s_.substr(i_, 4)), nullptr, 16);
            i_ += 4;
            if (cp < 0x80) o += static_cast<char>(cp);
            else o += '?';
            break;
          }
          default: o += e;
        }
      } else {
        o += c;
      }
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return o;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  std::string source_;
};

}  // namespace tessera::comm::detail
