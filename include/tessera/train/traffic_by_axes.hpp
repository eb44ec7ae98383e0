// tessera/train/traffic_by_axes.hpp: bytes and collective calls per group of mesh axes,
// the unit in which the traffic estimator (train/traffic_estimator.hpp) and a flight
// recorder's measurement (measured_traffic() below) are compared.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <tessera/comm/flight_recorder.hpp>
#include <tessera/layout/mesh.hpp>

namespace tessera {

/// Bytes and collective calls per group of mesh axes (a bit mask of axes); `sent` is the
/// part of `bytes` moved by point-to-point sends, which count no call.
struct axis_traffic {
  unsigned axes = 0;
  std::int64_t bytes = 0;
  std::int64_t calls = 0;
  std::int64_t sent = 0;
  friend constexpr bool operator==(const axis_traffic&, const axis_traffic&) = default;
};

struct traffic_by_axes {
  std::array<axis_traffic, 32> lines{};
  int n = 0;

  /// Adds `bytes` moved over the group `axes` in `calls` collective calls, of which `sent`
  /// bytes went by point-to-point sends.
  constexpr void add(unsigned axes, std::int64_t bytes, std::int64_t calls, std::int64_t sent = 0) {
    for (int i = 0; i < n; ++i)
      if (lines[static_cast<std::size_t>(i)].axes == axes) {
        lines[static_cast<std::size_t>(i)].bytes += bytes;
        lines[static_cast<std::size_t>(i)].calls += calls;
        lines[static_cast<std::size_t>(i)].sent += sent;
        return;
      }
    if (n < static_cast<int>(lines.size())) lines[static_cast<std::size_t>(n++)] = {axes, bytes, calls, sent};
  }
  /// Adds bytes moved by point-to-point sends over the group `axes`.
  constexpr void add_sent(unsigned axes, std::int64_t bytes) { add(axes, bytes, 0, bytes); }
  /// The line of the group `axes` (zeros when nothing ran over it).
  constexpr axis_traffic at(unsigned axes) const {
    for (int i = 0; i < n; ++i)
      if (lines[static_cast<std::size_t>(i)].axes == axes) return lines[static_cast<std::size_t>(i)];
    return {axes, 0, 0, 0};
  }
  constexpr std::int64_t bytes() const {
    std::int64_t b = 0;
    for (int i = 0; i < n; ++i) b += lines[static_cast<std::size_t>(i)].bytes;
    return b;
  }
  constexpr std::int64_t calls() const {
    std::int64_t c = 0;
    for (int i = 0; i < n; ++i) c += lines[static_cast<std::size_t>(i)].calls;
    return c;
  }
  /// The same bytes and calls over every group (order does not matter).
  constexpr bool same_as(const traffic_by_axes& o) const {
    for (int i = 0; i < n; ++i)
      if (!(o.at(lines[static_cast<std::size_t>(i)].axes) == lines[static_cast<std::size_t>(i)])) return false;
    for (int i = 0; i < o.n; ++i)
      if (!(at(o.lines[static_cast<std::size_t>(i)].axes) == o.lines[static_cast<std::size_t>(i)])) return false;
    return true;
  }

  /// "dp: 1.500 MiB in 60 calls; tp: ..." with the mesh's axis names. Sends count bytes, no
  /// call (measured_traffic): a group that only sends reads "cp: 3.000 MiB in point-to-point
  /// sends", one that does both "pp: 2.000 MiB (0.500 MiB in 4 calls, 1.500 MiB in
  /// point-to-point sends)".
  std::string to_string(std::span<const std::string_view> names) const {
    std::string s;
    for (int i = 0; i < n; ++i) {
      const axis_traffic& l = lines[static_cast<std::size_t>(i)];
      std::string g;
      for (std::size_t a = 0; a < names.size(); ++a)
        if ((l.axes >> a) & 1u) {
          if (!g.empty()) g += ',';
          g += names[a];
        }
      auto mib = [](std::int64_t b) {
        char buf[48];
        std::snprintf(buf, sizeof buf, "%.3f MiB", static_cast<double>(b) / (1 << 20));
        return std::string(buf);
      };
      const std::string calls = std::to_string(l.calls) + " calls", sends = "point-to-point sends";
      s += (i ? "; " : "") + g + ": " + mib(l.bytes);
      if (l.sent == 0 && l.calls == 0 && l.bytes > 0)  // (a line added without saying how)
        s += " in " + sends;
      else if (l.sent == 0)
        s += " in " + calls;
      else if (l.calls == 0 && l.sent == l.bytes)
        s += " in " + sends;
      else
        s += " (" + mib(l.bytes - l.sent) + " in " + calls + ", " + mib(l.sent) + " in " + sends + ")";
    }
    return n ? s : std::string("nothing");
  }
};

/// What a rank's flight recorder saw: the bus bytes (comm::bus_bytes) and collective calls
/// of its entries with id >= `since`, per group of mesh axes (the axes along which the
/// group's ranks differ). Point-to-point sends count their bytes and no call.
inline traffic_by_axes measured_traffic(std::span<const comm::flight_entry> entries, const mesh_shape& shape,
                                        std::uint64_t since = 0) {
  traffic_by_axes t;
  for (const comm::flight_entry& f : entries) {
    if (f.id < since || f.group.size() <= 1) continue;
    unsigned axes = 0;
    const coords_t c0 = coords_of(shape, f.group.front());
    for (int r : f.group) {
      const coords_t c = coords_of(shape, r);
      for (int a = 0; a < shape.ndim; ++a)
        if (c[static_cast<std::size_t>(a)] != c0[static_cast<std::size_t>(a)]) axes |= 1u << a;
    }
    const bool p2p = comm::is_p2p(f.desc.kind);
    const std::int64_t b = comm::bus_bytes(f);
    if (p2p && b == 0) continue;
    t.add(axes, b, p2p ? 0 : 1, p2p ? b : 0);
  }
  return t;
}

}  // namespace tessera
