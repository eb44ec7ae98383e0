// tessera/train/cli.hpp: command-line options bound to plain struct fields.
//
// An option_set maps dotted keys ("steps", or later "training.steps") to fields of a
// trainer's option struct, with a help line each. `parse(argc, argv)` accepts
// `--key value` and `--key=value`; `set(key, text)` is the same entry point for other
// sources (a TOML file flattened to dotted keys, recipe overrides). Errors throw
// tessera::error with the flag, the bad value and what is expected.
#pragma once

#include <charconv>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/core/error.hpp>

namespace tessera::train {

class option_set {
 public:
  explicit option_set(std::string program, std::string summary = {})
      : program_(std::move(program)), summary_(std::move(summary)) {}

  option_set& add(std::string key, std::int64_t* field, std::string help) {
    return add_raw(std::move(key), "N", std::move(help), std::to_string(*field),
                   [field](const std::string& k, std::string_view v) { *field = to_int(k, v); });
  }
  option_set& add(std::string key, int* field, std::string help) {
    return add_raw(std::move(key), "N", std::move(help), std::to_string(*field),
                   [field](const std::string& k, std::string_view v) {
                     const std::int64_t x = to_int(k, v);
                     if (x < INT32_MIN || x > INT32_MAX) bad_value(k, v, "a 32-bit integer");
                     *field = static_cast<int>(x);
                   });
  }
  option_set& add(std::string key, std::uint64_t* field, std::string help) {
    return add_raw(std::move(key), "N", std::move(help), std::to_string(*field),
                   [field](const std::string& k, std::string_view v) {
                     const std::int64_t x = to_int(k, v);
                     if (x < 0) bad_value(k, v, "a non-negative integer");
                     *field = static_cast<std::uint64_t>(x);
                   });
  }
  option_set& add(std::string key, double* field, std::string help) {
    return add_raw(std::move(key), "X", std::move(help), format_double(*field),
                   [field](const std::string& k, std::string_view v) { *field = to_double(k, v); });
  }
  option_set& add(std::string key, std::string* field, std::string help) {
    return add_raw(std::move(key), "TEXT", std::move(help), *field,
                   [field](const std::string&, std::string_view v) { *field = std::string(v); });
  }
  /// A string restricted to `choices`.
  option_set& add_choice(std::string key, std::string* field, std::vector<std::string> choices,
                         std::string help) {
    std::string meta;
    for (std::size_t i = 0; i < choices.size(); ++i) {
      if (i) meta += '|';
      meta += choices[i];
    }
    return add_raw(std::move(key), meta, std::move(help), *field,
                   [field, choices, meta](const std::string& k, std::string_view v) {
                     for (const auto& c : choices)
                       if (c == v) {
                         *field = c;
                         return;
                       }
                     bad_value(k, v, "one of " + meta);
                   });
  }
  /// A flag without a value (`--key`; `--key=false` turns it off).
  option_set& add_flag(std::string key, bool* field, std::string help) {
    options_.push_back({std::move(key), "", std::move(help), *field ? "on" : "off", true,
                        [field](const std::string& k, std::string_view v) {
                          if (v.empty() || v == "true" || v == "1") *field = true;
                          else if (v == "false" || v == "0") *field = false;
                          else bad_value(k, v, "true or false");
                        }});
    return *this;
  }

  /// Sets option `key` (without dashes) from text. Throws on an unknown key or bad value.
  void set(std::string_view key, std::string_view value) {
    const auto* o = find(key);
    if (!o) throw error("unknown option --" + std::string(key) + "; run " + program_ + " --help");
    o->apply(o->key, value);
  }

  /// Parses argv. Returns false when --help was given (the help text is in help()).
  bool parse(int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i) {
      std::string_view a = argv[i];
      if (a == "--help" || a == "-h") return false;
      if (a.substr(0, 2) != "--")
        throw error("unexpected argument '" + std::string(a) + "'; options start with --; run " +
                    program_ + " --help");
      a.remove_prefix(2);
      const auto eq = a.find('=');
      const std::string_view key = a.substr(0, eq);
      const auto* o = find(key);
      if (!o)
        throw error("unknown option --" + std::string(key) + "; run " + program_ + " --help");
      if (eq != std::string_view::npos) {
        o->apply(o->key, a.substr(eq + 1));
      } else if (o->is_flag) {
        o->apply(o->key, "");
      } else {
        if (i + 1 >= argc)
          throw error("option --" + std::string(key) + " needs a value (" + o->meta + ")");
        o->apply(o->key, argv[++i]);
      }
    }
    return true;
  }

  std::string help() const {
    std::string out = "usage: " + program_ + " [options]\n";
    if (!summary_.empty()) out += summary_ + "\n";
    out += "\noptions:\n";
    for (const auto& o : options_) {
      std::string head = "  --" + o.key + (o.meta.empty() ? "" : " " + o.meta);
      if (head.size() < 30) head.resize(30, ' ');
      else head += "\n" + std::string(30, ' ');
      out += head + o.help + (o.default_text.empty() ? "" : " [" + o.default_text + "]") + "\n";
    }
    return out;
  }

 private:
  struct option {
    std::string key, meta, help, default_text;
    bool is_flag = false;
    std::function<void(const std::string&, std::string_view)> apply;
  };
  std::string program_, summary_;
  std::vector<option> options_;

  option_set& add_raw(std::string key, std::string meta, std::string help, std::string def,
                      std::function<void(const std::string&, std::string_view)> f) {
    check(find(key) == nullptr, "option_set: option --" + key + " is defined twice");
    options_.push_back({std::move(key), std::move(meta), std::move(help), std::move(def), false,
                        std::move(f)});
    return *this;
  }
  const option* find(std::string_view key) const {
    for (const auto& o : options_)
      if (o.key == key) return &o;
    return nullptr;
  }
  [[noreturn]] static void bad_value(const std::string& k, std::string_view v,
                                     const std::string& want) {
    throw error("option --" + k + ": '" + std::string(v) + "' is not " + want);
  }
  static std::int64_t to_int(const std::string& k, std::string_view v) {
    std::int64_t x = 0;
    const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
    if (v.empty() || r.ec != std::errc() || r.ptr != v.data() + v.size())
      bad_value(k, v, "an integer");
    return x;
  }
  static double to_double(const std::string& k, std::string_view v) {
    const std::string s(v);
    std::size_t used = 0;
    double x = 0;
    try {
      x = std::stod(s, &used);
    } catch (const std::exception&) {
      bad_value(k, v, "a number");
    }
    if (used != s.size()) bad_value(k, v, "a number");
    return x;
  }
  static std::string format_double(double x) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, x);
    return std::string(buf, r.ptr);
  }
};

}  // namespace tessera::train
