// tessera/layout/print.hpp: a layout in DTensor's and in the canonical notation.
//
//   DTensor:    [S(0), R, P(sum)]     one placement per mesh axis, in mesh order.
//               A dimension split by several axes in an order other than mesh order
//               (what DTensor needs _StridedShard for) prints its axes as S(d)#k, where
//               k is the axis' position in the split (0 = outermost).
//   Canonical:  {0: (dp, tp), partial: sum(pp)}   sharded dims only, each with its
//               axes outermost first; `partial: {}` when nothing is partial.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <tessera/layout/layout_spec.hpp>

namespace tessera {

/// True when every dimension's axes are listed in mesh order (DTensor can spell it).
constexpr bool in_mesh_order(const layout_spec& s) noexcept {
  for (int d = 0; d < s.rank; ++d)
    for (int i = 1; i < s.axes_of(d); ++i)
      if (s.axis_at(d, i) < s.axis_at(d, i - 1)) return false;
  return true;
}

inline std::string to_dtensor_string(const layout_spec& s) {
  const bool ordered = in_mesh_order(s);
  std::string out = "[";
  for (int a = 0; a < s.mesh_ndim; ++a) {
    if (a) out += ", ";
    const int d = s.dim_of(a);
    if (d >= 0) {
      out += "S(";
      out += std::to_string(d);
      out += ")";
      if (!ordered && s.axes_of(d) > 1) {
        out += "#";
        out += std::to_string(s.position_of(a));
      }
    } else if (s.is_partial(a)) {
      out += "P(";
      out += to_string(s.op);
      out += ")";
    } else {
      out += "R";
    }
  }
  return out + "]";
}

inline std::string to_canonical_string(const layout_spec& s, std::span<const std::string_view> names) {
  auto name = [&](int a) {
    std::string n = "axis";
    if (a < static_cast<int>(names.size())) return std::string(names[static_cast<std::size_t>(a)]);
    n += std::to_string(a);
    return n;
  };
  std::string out = "{";
  for (int d = 0; d < s.rank; ++d) {
    if (!s.axes_of(d)) continue;
    out += std::to_string(d);
    out += ": (";
    for (int i = 0; i < s.axes_of(d); ++i) {
      if (i) out += ", ";
      out += name(s.axis_at(d, i));
    }
    out += "), ";
  }
  out += "partial: ";
  if (!s.has_partial()) return out + "{}}";
  out += to_string(s.op);
  out += "(";
  bool first = true;
  for (int a = 0; a < s.mesh_ndim; ++a)
    if (s.is_partial(a)) {
      if (!first) out += ", ";
      out += name(a);
      first = false;
    }
  return out + ")}";
}

}  // namespace tessera
