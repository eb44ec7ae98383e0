// tessera/plan/link_profile.hpp: a cost model's constants in a TOML file (a "link
// profile"), as `tessera-plan --calibrate` writes it and `tessera-plan --links FILE` reads it.
// tessera-requires: tomlplusplus
//
//   # tessera link profile
//   [model]
//   base_us = 31.5                       # every collective
//   copy_GBps = 12.0                     # a rank's local copies (0 or absent: not counted)
//   [axes.dp]                            # one table per mesh axis, by name
//   GBps = 2.9
//   hop_us = 4.1
//   [collectives.all_reduce]             # all_gather, reduce_scatter, all_reduce,
//   scale = 1.8                          # all_to_all, exchange: bandwidth-term multiplier
//   base_us = 12.0                       # and extra latency (defaults 1 and 0)
//
// Axes the profile does not name keep the default (87.7 GB/s, 0.6 us); an axis it names
// that the mesh lacks is an error, as are unknown keys, non-numbers, a non-positive GBps
// or scale, a negative latency or copy_GBps, and nan or inf; the text is parsed past
// toml++ 3.3.0's defects (core/toml_text.hpp; fuzzed by tests/fuzz/fuzz_link_profile.cpp).
// For plans resolved at compile time, copy the numbers into a type with `static constexpr
// tessera::cost_model value` and pass it as plan_t's (or dist_tensor::redistribute's) Cost
// argument.
#pragma once

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/core/toml_text.hpp>
#include <tessera/plan/cost_model.hpp>

namespace tessera {

namespace detail {
inline double profile_number(const toml::node& n, const std::string& where) {
  if (auto v = n.value<double>()) return *v;
  throw error(where + " must be a number");
}
}  // namespace detail

/// Reads a link profile for a mesh whose axes are `names` (in mesh order). Throws
/// tessera::error naming the file, the key and the fix.
inline cost_model read_link_profile(const std::string& path, const std::vector<std::string_view>& names) {
  std::ifstream f(path);
  if (!f) throw error(path + ": cannot read the link profile; give the file tessera-plan --calibrate wrote");
  std::stringstream text;
  text << f.rdbuf();
  toml::table root;
  try {  // (past toml++ 3.3.0's defects: core/toml_text.hpp)
    root = parse_toml_text(text.str(), path);
  } catch (const error& e) {
    throw error(std::string(e.what()) + " (not a TOML file); write it as tessera-plan --calibrate does");
  }
  cost_model cm;
  const std::string hint = "; see docs/benchmarking.md (Calibrate the cost model)";
  for (auto&& [k, node] : root) {
    const std::string key(k.str());
    const std::string where = path + ": [" + key + "]";
    const toml::table* t = node.as_table();
    if (!t) throw error(path + ": '" + key + "' must be a table ([model], [axes.NAME] or [collectives.NAME])" + hint);
    if (key == "model") {
      for (auto&& [mk, mv] : *t) {
        if (mk.str() == "base_us")
          cm.base_us = detail::profile_number(mv, where + " base_us");
        else if (mk.str() == "copy_GBps")
          cm.copy_GBps = detail::profile_number(mv, where + " copy_GBps");
        else
          throw error(where + ": unknown key '" + std::string(mk.str()) + "' (base_us, copy_GBps)" + hint);
      }
    } else if (key == "axes") {
      for (auto&& [ak, av] : *t) {
        const std::string axis(ak.str());
        int a = -1;
        for (std::size_t i = 0; i < names.size(); ++i)
          if (names[i] == axis) a = static_cast<int>(i);
        std::string mesh;
        for (auto n : names) {  // (piece by piece: g++ 12's -Wrestrict misfires on ("" or ", ") + std::string)
          if (!mesh.empty()) mesh += ", ";
          mesh.append(n);
        }
        if (a < 0) throw error(path + ": [axes." + axis + "]: the mesh has no axis '" + axis + "' (its axes: " + mesh +
                               "); calibrate on this mesh or rename the table");
        const toml::table* at = av.as_table();
        if (!at) throw error(path + ": axes." + axis + " must be a table with GBps and hop_us" + hint);
        for (auto&& [fk, fv] : *at) {
          const std::string field(fk.str()), w = path + ": [axes." + axis + "] " + field;
          const double v = detail::profile_number(fv, w);
          if (field == "GBps") {
            cm.GBps[static_cast<std::size_t>(a)] = v;
          } else if (field == "hop_us") {
            cm.hop_us[static_cast<std::size_t>(a)] = v;
          } else {
            throw error(path + ": [axes." + axis + "]: unknown key '" + field + "' (GBps, hop_us)" + hint);
          }
        }
      }
    } else if (key == "collectives") {
      for (auto&& [ck, cv] : *t) {
        const std::string coll(ck.str());
        int c = -1;
        for (int i = 0; i < coll_kinds; ++i)
          if (coll_kind_names[i] == coll) c = i;
        if (c < 0)
          throw error(path + ": [collectives." + coll +
                      "]: unknown collective (all_gather, reduce_scatter, all_reduce, all_to_all, exchange)" + hint);
        const toml::table* ct = cv.as_table();
        if (!ct) throw error(path + ": collectives." + coll + " must be a table with scale and base_us" + hint);
        for (auto&& [fk, fv] : *ct) {
          const std::string field(fk.str()), w = path + ": [collectives." + coll + "] " + field;
          const double v = detail::profile_number(fv, w);
          if (field == "scale") {
            cm.coll_scale[static_cast<std::size_t>(c)] = v;
          } else if (field == "base_us") {
            cm.coll_base_us[static_cast<std::size_t>(c)] = v;
          } else {
            throw error(path + ": [collectives." + coll + "]: unknown key '" + field + "' (scale, base_us)" + hint);
          }
        }
      }
    } else if (key != "measured") {  // [measured...]: what the calibration saw, for people
      throw error(path + ": unknown table [" + key + "] (model, axes, collectives, measured)" + hint);
    }
  }
  // One check of every constant, named as the file spells it (nan and inf are TOML numbers).
  if (const cost_model_problem p = check_cost_model(cm, static_cast<int>(names.size()))) {
    using P = cost_model_problem;
    const auto i = static_cast<std::size_t>(p.index < 0 ? 0 : p.index);
    const std::string key = p.field == P::base_us     ? "[model] base_us"
                            : p.field == P::copy_GBps ? "[model] copy_GBps"
                            : p.field == P::GBps  ? "[axes." + std::string(names[i]) + "] GBps"
                            : p.field == P::hop_us ? "[axes." + std::string(names[i]) + "] hop_us"
                            : p.field == P::coll_scale ? "[collectives." + std::string(coll_kind_names[i]) + "] scale"
                                                       : "[collectives." + std::string(coll_kind_names[i]) + "] base_us";
    throw error(path + ": " + key + " " + std::string(cost_field_rule(p)) + hint);
  }
  return cm;
}

/// The profile's text for a mesh with axes `names` (`header` lines become comments;
/// `measured` is appended as is, e.g. a [measured] table of what the fit saw).
inline std::string link_profile_text(const cost_model& cm, const std::vector<std::string_view>& names,
                                     const std::string& header, const std::string& measured = {}) {
  toml::table axes, colls;
  for (std::size_t a = 0; a < names.size(); ++a)
    axes.insert(std::string(names[a]), toml::table{{"GBps", cm.GBps[a]}, {"hop_us", cm.hop_us[a]}});
  for (int c = 0; c < coll_kinds; ++c)
    colls.insert(std::string(coll_kind_names[c]),
                 toml::table{{"scale", cm.coll_scale[static_cast<std::size_t>(c)]},
                             {"base_us", cm.coll_base_us[static_cast<std::size_t>(c)]}});
  toml::table model{{"base_us", cm.base_us}};
  if (cm.copy_GBps > 0) model.insert("copy_GBps", cm.copy_GBps);
  const toml::table root{{"model", model}, {"axes", axes}, {"collectives", colls}};
  std::ostringstream out;
  std::istringstream h(header);
  for (std::string line; std::getline(h, line);) out << "# " << line << "\n";
  out << root << "\n";
  if (!measured.empty()) out << "\n" << measured;
  return out.str();
}

/// Writes the profile to `path` through a temporary file renamed into place (a failed
/// write leaves any earlier file as it was).
inline void write_link_profile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw error(path + ": cannot write the link profile here; give a writable path");
    f << text;
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw error(path + ": writing the link profile failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw error(path + ": cannot rename the written profile into place; give a writable path");
  }
}

}  // namespace tessera
