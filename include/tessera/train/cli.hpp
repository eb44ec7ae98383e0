// tessera/train/cli.hpp: command-line options bound to plain struct fields.
//
// An option_set maps dotted keys ("training.steps") to fields of a trainer's option
// struct, with a help line each; `alias("steps", "training.steps")` adds a short name for
// the same field. `parse(argc, argv)` accepts `--key value` and `--key=value`; `set(key,
// text)` is the same entry point for other sources (a TOML file flattened to dotted keys,
// see config.hpp). Options added with `add_early` (a config file) are applied before all
// others wherever they appear, so that later flags override the file. Keys a program
// refuses (`forbid`: what a recipe compiles in) fail with the program's message. Errors
// throw tessera::error with the flag, the bad value and what is expected (a number option
// takes finite values only: inf and nan are refused); an unknown key names the nearest
// known one.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/core/error.hpp>

namespace tessera::train {

/// What text an option accepts (a TOML loader checks its value types against this).
enum class value_kind { integer, number, text, flag, list };

class option_set {
 public:
  explicit option_set(std::string program, std::string summary = {})
      : program_(std::move(program)), summary_(std::move(summary)) {}

  option_set& add(std::string key, std::int64_t* field, std::string help) {
    return add_raw(std::move(key), value_kind::integer, "N", std::move(help), std::to_string(*field),
                   [field](const std::string& k, std::string_view v) { *field = to_int(k, v); });
  }
  option_set& add(std::string key, int* field, std::string help) {
    return add_raw(std::move(key), value_kind::integer, "N", std::move(help), std::to_string(*field),
                   [field](const std::string& k, std::string_view v) {
                     const std::int64_t x = to_int(k, v);
                     if (x < INT32_MIN || x > INT32_MAX) bad_value(k, v, "a 32-bit integer");
                     *field = static_cast<int>(x);
                   });
  }
  option_set& add(std::string key, std::uint64_t* field, std::string help) {
    return add_raw(std::move(key), value_kind::integer, "N", std::move(help), std::to_string(*field),
                   [field](const std::string& k, std::string_view v) {
                     const std::int64_t x = to_int(k, v);
                     if (x < 0) bad_value(k, v, "a non-negative integer");
                     *field = static_cast<std::uint64_t>(x);
                   });
  }
  option_set& add(std::string key, double* field, std::string help) {
    return add_raw(std::move(key), value_kind::number, "X", std::move(help), format_double(*field),
                   [field](const std::string& k, std::string_view v) { *field = to_double(k, v); });
  }
  option_set& add(std::string key, std::string* field, std::string help) {
    return add_raw(std::move(key), value_kind::text, "TEXT", std::move(help), *field,
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
    return add_raw(std::move(key), value_kind::text, meta, std::move(help), *field,
                   [field, choices, meta](const std::string& k, std::string_view v) {
                     for (const auto& c : choices)
                       if (c == v) {
                         *field = c;
                         return;
                       }
                     bad_value(k, v, "one of " + meta);
                   });
  }
  /// Names from `choices`, comma-separated on the command line (`--key a,b`; "" is none) and
  /// an array of strings in a config file (`key = ["a", "b"]`), as TorchTitan's list options.
  option_set& add_list(std::string key, std::vector<std::string>* field, std::vector<std::string> choices,
                       std::string help) {
    std::string meta, now;
    for (std::size_t i = 0; i < choices.size(); ++i) meta += (i ? "," : "") + choices[i];
    for (std::size_t i = 0; i < field->size(); ++i) now += (i ? "," : "") + (*field)[i];
    return add_raw(std::move(key), value_kind::list, "[" + meta + "]", std::move(help), now,
                   [field, choices, meta](const std::string& k, std::string_view v) {
                     std::vector<std::string> got;
                     for (std::size_t at = 0; !v.empty() && at <= v.size();) {
                       const std::size_t end = std::min(v.find(',', at), v.size());
                       const std::string item(v.substr(at, end - at));
                       if (std::find(choices.begin(), choices.end(), item) == choices.end())
                         bad_value(k, item, "one of " + meta + " (a comma-separated list of them)");
                       if (std::find(got.begin(), got.end(), item) == got.end()) got.push_back(item);
                       at = end + 1;
                     }
                     *field = std::move(got);
                   });
  }
  /// A flag without a value (`--key`; `--key=false` turns it off).
  option_set& add_flag(std::string key, bool* field, std::string help) {
    return add_raw(std::move(key), value_kind::flag, "", std::move(help), *field ? "on" : "off",
                   [field](const std::string& k, std::string_view v) {
                     if (v.empty() || v == "true" || v == "1") *field = true;
                     else if (v == "false" || v == "0") *field = false;
                     else bad_value(k, v, "true or false");
                   });
  }
  /// A text option applied before every other option of a command line, wherever it
  /// appears (in order, when given twice): `then(*this, value)` runs after the field is
  /// set, e.g. to load a config file whose values the remaining flags then override.
  option_set& add_early(std::string key, std::string* field, std::string help,
                        std::function<void(option_set&, const std::string&)> then) {
    add(std::move(key), field, std::move(help));
    options_.back().early = std::move(then);
    return *this;
  }
  /// `short_key` is another name of option `long_key` (same field, shown in the help);
  /// when both are given, the last one wins.
  option_set& alias(std::string short_key, std::string long_key) {
    check(find(long_key) != nullptr, "option_set: alias --" + short_key + " of an unknown option --" + long_key);
    check(find(short_key) == nullptr && !forbidden(short_key),
          "option_set: option --" + short_key + " is defined twice");
    aliases_.push_back({std::move(short_key), std::move(long_key)});
    return *this;
  }
  /// Setting `key` fails with the error "<the key given> <message>". `key` is a dotted key,
  /// or `section.*` for every key of a section not otherwise defined.
  option_set& forbid(std::string key, std::string message) {
    check(find(key) == nullptr, "option_set: --" + key + " is both an option and forbidden");
    forbidden_.push_back({std::move(key), std::move(message)});
    return *this;
  }

  /// The kind of value option `key` takes (aliases resolved); nullopt for an unknown key.
  std::optional<value_kind> kind_of(std::string_view key) const {
    const auto* o = find(key);
    return o ? std::optional<value_kind>(o->kind) : std::nullopt;
  }
  /// The option an alias names, or "" when `key` is not an alias.
  std::string alias_target(std::string_view key) const {
    for (const auto& a : aliases_)
      if (a.name == key) return a.target;
    return "";
  }
  /// The error for setting forbidden key `key`, or nullopt when it is not forbidden.
  std::optional<std::string> forbidden(std::string_view key) const {
    for (const auto& f : forbidden_) {
      const std::string_view p = f.key;
      const bool section = p.size() > 2 && p.substr(p.size() - 2) == ".*";
      const std::string_view prefix = p.substr(0, p.size() - 1);  // "section." when a section
      if (p == key || (section && key.size() > prefix.size() && key.substr(0, prefix.size()) == prefix))
        return std::string(key) + " " + f.message;
    }
    return std::nullopt;
  }
  /// The known key (aliases included unless `keys_only`) nearest to `key`: one with the
  /// same last component (`training.lr` -> `optimizer.lr`), else the nearest in edit
  /// distance; "" when none is close (more than a third of the letters differ).
  std::string nearest(std::string_view key, bool keys_only = false) const {
    const auto leaf = [](std::string_view k) { return k.substr(k.rfind('.') + 1); };
    if (key.find('.') != std::string_view::npos)
      for (const auto& o : options_)
        if (leaf(o.key) == leaf(key)) return o.key;
    std::string best;
    std::size_t best_d = std::max<std::size_t>(key.size() / 3, 1) + 1;
    auto consider = [&](const std::string& k) {
      const std::size_t d = edit_distance(key, k);
      if (d < best_d) best_d = d, best = k;
    };
    for (const auto& o : options_) consider(o.key);
    if (!keys_only)
      for (const auto& a : aliases_) consider(a.name);
    return best;
  }
  /// The error text for an unknown key, with the nearest known key when there is one.
  std::string unknown_message(std::string_view key, bool keys_only = false) const {
    const std::string near = nearest(key, keys_only);
    std::string m = std::string("unknown option --").append(key);
    if (!near.empty()) m += " (did you mean --" + near + "?)";
    return m + "; run " + program_ + " --help";
  }

  /// Sets option `key` (without dashes; an alias works too) from text. Throws on a
  /// forbidden or unknown key or a bad value. An early option's action runs too.
  void set(std::string_view key, std::string_view value) {
    const auto* o = lookup(key);
    o->apply(std::string(key), value);
    if (o->early) o->early(*this, std::string(value));
  }

  /// Parses argv: early options first (in order), then the others in order. Returns
  /// false when --help was given (the help text is in help()).
  bool parse(int argc, const char* const* argv) {
    struct given {
      const option* o;
      std::string name, value;
    };
    std::vector<given> args;
    for (int i = 1; i < argc; ++i) {
      std::string_view a = argv[i];
      if (a == "--help" || a == "-h") return false;
      if (a.substr(0, 2) != "--")
        throw error("unexpected argument '" + std::string(a) + "'; options start with --; run " +
                    program_ + " --help");
      a.remove_prefix(2);
      const auto eq = a.find('=');
      const std::string_view key = a.substr(0, eq);
      const auto* o = lookup(key);
      if (eq != std::string_view::npos) {
        args.push_back({o, std::string(key), std::string(a.substr(eq + 1))});
      } else if (o->kind == value_kind::flag) {
        args.push_back({o, std::string(key), ""});
      } else {
        if (i + 1 >= argc)
          throw error("option --" + std::string(key) + " needs a value (" + o->meta + ")");
        args.push_back({o, std::string(key), argv[++i]});
      }
    }
    for (const auto& g : args)
      if (g.o->early) {
        g.o->apply(g.name, g.value);
        g.o->early(*this, g.value);
      }
    for (const auto& g : args)
      if (!g.o->early) g.o->apply(g.name, g.value);
    return true;
  }

  std::string help() const {
    std::string out = "usage: " + program_ + " [options]\n";
    if (!summary_.empty()) out += summary_ + "\n";
    out += "\noptions:\n";
    for (const auto& o : options_) {
      std::string head = "  --" + o.key;
      for (const auto& a : aliases_)
        if (a.target == o.key) head += ", --" + a.name;
      head += o.meta.empty() ? "" : " " + o.meta;
      if (head.size() < 30) head.resize(30, ' ');
      else head += "\n" + std::string(30, ' ');
      out += head + o.help + (o.default_text.empty() ? "" : " [" + o.default_text + "]") + "\n";
    }
    if (!forbidden_.empty()) {
      out += "\nnot options (fixed at compile time):\n ";
      std::size_t col = 1;
      for (const auto& f : forbidden_) {
        if (col + 1 + f.key.size() > 90) out += "\n ", col = 1;
        out += " " + f.key;
        col += 1 + f.key.size();
      }
      out += "\n";
    }
    return out;
  }

 private:
  struct option {
    std::string key;
    value_kind kind;
    std::string meta, help, default_text;
    std::function<void(const std::string&, std::string_view)> apply;
    std::function<void(option_set&, const std::string&)> early;
  };
  struct alias_entry {
    std::string name, target;
  };
  struct forbidden_entry {
    std::string key, message;
  };
  std::string program_, summary_;
  std::vector<option> options_;
  std::vector<alias_entry> aliases_;
  std::vector<forbidden_entry> forbidden_;

  option_set& add_raw(std::string key, value_kind kind, std::string meta, std::string help,
                      std::string def, std::function<void(const std::string&, std::string_view)> f) {
    check(find(key) == nullptr && alias_target(key).empty(), "option_set: option --" + key + " is defined twice");
    options_.push_back({std::move(key), kind, std::move(meta), std::move(help), std::move(def), std::move(f), {}});
    return *this;
  }
  /// The option `key` or an alias names, or nullptr.
  const option* find(std::string_view key) const {
    for (const auto& a : aliases_)
      if (a.name == key) key = a.target;
    for (const auto& o : options_)
      if (o.key == key) return &o;
    return nullptr;
  }
  /// find(), throwing the forbidden or unknown-key message when there is no such option.
  const option* lookup(std::string_view key) const {
    if (const auto* o = find(key)) return o;
    if (auto m = forbidden(key)) throw error(*m);
    throw error(unknown_message(key));
  }
  /// Edits (insert, delete, substitute, swap two neighbours) that turn a into b.
  static std::size_t edit_distance(std::string_view a, std::string_view b) {
    const std::size_t w = b.size() + 1;
    std::vector<std::size_t> d((a.size() + 1) * w);
    for (std::size_t i = 0; i <= a.size(); ++i) d[i * w] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i)
      for (std::size_t j = 1; j <= b.size(); ++j) {
        std::size_t x = std::min({d[(i - 1) * w + j] + 1, d[i * w + j - 1] + 1,
                                  d[(i - 1) * w + j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
          x = std::min(x, d[(i - 2) * w + j - 2] + 1);
        d[i * w + j] = x;
      }
    return d[a.size() * w + b.size()];
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
    // inf and nan parse, but no option of a trainer means them: reject them up front
    // rather than diverge at step 2 (--lr inf) or loop forever.
    if (!std::isfinite(x)) bad_value(k, v, "a finite number");
    return x;
  }
  static std::string format_double(double x) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, x);
    return std::string(buf, r.ptr);
  }
};

}  // namespace tessera::train
