// tessera-plan --calibrate FILE: measures each collective's latency and bandwidth on every
// mesh axis and on the flattened group of all axes (on the backend at hand), fits the cost
// model's constants and writes them as a link profile (plan/link_profile.hpp).
//
// The measurement: each point (group, collective, size; and the local copies) is timed in
// calib_rounds rounds, each round visiting every point in turn with a share of the calls;
// a point's median is over all its calls. (Timing a group's points one after the other let
// a slower stretch of the machine's time fall on one group: on 2 x 2 threads the two axes'
// fitted bandwidths differed by up to 1.6x, and the worst fitted point by 2-3x.)
//
// The fit, per group g and collective c: a least-squares line (in relative error) through
// the median times at five buffer sizes (16 KiB .. 16 MiB), time = intercept[g][c] +
// slope[g][c] * bus_bytes. Then
//   GBps[a]      = 1 / slope of all_gather on axis a               (bandwidth of the axis)
//   hop, base_us : intercept = base_us + (n - 1) hop for all_gather on an axis of n ranks
//                  and on the flattened group (two sizes of group give both; one axis
//                  gives base_us alone, hop 0)
//   coll_scale[c]   = mean over groups of slope[g][c] / slope[g][all_gather]
//   coll_base_us[c] = mean over groups of intercept[g][c] - (base_us + hops_c(n) hop)
//   copy_GBps       = 1 / slope of the local copy, from 1 MiB up: every rank at once
//                     packs the first 2 KiB of each 4 KiB row of a block (what a
//                     collective whose pieces are not contiguous does first;
//                     tensor/detail/redistribute.hpp)
// (exchange: the all_to_all's, which the point-to-point exchange of uneven transitions
// is not measured apart from).
#pragma once

#include <algorithm>
#include <cmath>
#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/bench/measure.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/plan/cost_model.hpp>
#include <tessera/plan/link_profile.hpp>

namespace plan_tool {

using namespace tessera;

struct calib_point {
  int group = 0;  ///< index into the groups list; copy_group for the local copies
  coll_kind kind{};
  std::int64_t buffer_bytes = 0, bus_bytes = 0;
  double median_us = 0;
};

inline constexpr int copy_group = -1;
/// The smallest copy the fit of copy_GBps uses (see fit_cost_model).
inline constexpr std::int64_t copy_fit_bytes = std::int64_t{1} << 20;

struct calib_group {
  axis_group g;
  std::string name;
  std::int64_t n = 1;
};

inline std::vector<calib_group> calib_groups(const mesh_shape& m, const std::vector<std::string_view>& names) {
  std::vector<calib_group> gs;
  axis_group all;
  std::string all_name;
  for (int a = 0; a < m.ndim; ++a) {
    all.push(a);
    if (a) all_name += ',';  // (piece by piece: g++ 12's -Wrestrict misfires on ("," or "") + std::string)
    all_name.append(names[static_cast<std::size_t>(a)]);
    if (m[a] < 2) continue;
    axis_group g;
    g.push(a);
    gs.push_back({g, std::string(names[static_cast<std::size_t>(a)]), m[a]});
  }
  if (gs.size() > 1) gs.push_back({all, all_name, world_size(m)});
  return gs;
}

inline std::int64_t bus_of(coll_kind k, std::int64_t buffer, std::int64_t n) {
  return buffer * (k == coll_kind::all_reduce ? 2 : 1) * (n - 1) / n;
}

/// Rounds of a calibration: each point's timed calls are split over them, and every round
/// visits every point (groups, sizes, collectives, copies) in turn, so that a slower stretch of
/// the machine's time falls on every group alike rather than on the group measured then.
inline constexpr int calib_rounds = 4;

/// Measures on every rank; rank 0 fills `out`. Each point's median is over its calls of all
/// rounds (calib_rounds; the first round warms up with times.warmup calls, the others with one).
template <class Mesh>
void calibrate_on_rank(device_mesh<Mesh>& dm, const std::vector<calib_group>& gs, const std::vector<std::int64_t>& sizes,
                       const bench::time_options& times, std::vector<calib_point>* out) {
  std::vector<std::vector<double>> samples;  // per point, in the order below
  const int rounds = std::max(1, std::min(calib_rounds, times.calls));
  for (int r = 0; r < rounds; ++r) {
    const bench::time_options now{.warmup = r == 0 ? times.warmup : 1,
                                  .calls = times.calls / rounds + (r < times.calls % rounds ? 1 : 0)};
    std::size_t at = 0;
    auto add = [&](const bench::timing& t, int group, coll_kind kind, std::int64_t buf, std::int64_t bus) {
      if (samples.size() <= at) samples.emplace_back();
      samples[at].insert(samples[at].end(), t.per_call_us.begin(), t.per_call_us.end());
      if (r == rounds - 1 && out) out->push_back({group, kind, buf, bus, bench::summarize(samples[at]).median_us});
      ++at;
    };
    for (std::size_t gi = 0; gi < gs.size(); ++gi) {
      auto& c = dm.group(gs[gi].g);
      const auto n = static_cast<std::size_t>(gs[gi].n);
      for (std::int64_t bytes : sizes) {
        const std::size_t total = static_cast<std::size_t>(bytes) / 4 / n * n;  // f32 elements, a multiple of n
        std::vector<float> in(total, 1.0f), outb(total);
        for (int k = 0; k < 4; ++k) {
          const auto kind = static_cast<coll_kind>(k);
          const bench::timing t = bench::time_calls(dm.world(), now, [&] {
            switch (kind) {
              case coll_kind::all_gather: c.all_gather(in.data(), outb.data(), total / n, comm::dtype::f32).wait(); break;
              case coll_kind::reduce_scatter:
                c.reduce_scatter(in.data(), outb.data(), total / n, comm::dtype::f32, comm::reduce_op::sum).wait();
                break;
              case coll_kind::all_reduce:
                c.all_reduce(in.data(), outb.data(), total, comm::dtype::f32, comm::reduce_op::sum).wait();
                break;
              default: c.all_to_all(in.data(), outb.data(), total / n, comm::dtype::f32).wait(); break;
            }
          });
          const auto buf = static_cast<std::int64_t>(total * 4);
          add(t, static_cast<int>(gi), kind, buf, bus_of(kind, buf, gs[gi].n));
        }
      }
    }
    // local copies, every rank at once: half of each row of a [rows, 1024] f32 block
    for (std::int64_t bytes : sizes) {
      constexpr std::size_t half = 512;
      const std::size_t rows = std::max<std::size_t>(1, static_cast<std::size_t>(bytes) / 4 / half);
      std::vector<float> src(rows * 2 * half, 1.0f), dst(rows * half);
      const bench::timing t = bench::time_calls(dm.world(), now, [&] {
        host_space::copy_2d(dst.data(), half * 4, src.data(), 2 * half * 4, half * 4, rows);
      });
      const auto moved = static_cast<std::int64_t>(rows * half * 4);
      add(t, copy_group, coll_kind::all_gather, moved, moved);
    }
  }
}

struct line {
  double intercept = 0, slope = 0;
};
/// Least squares in relative error (weights 1 / time^2): small and large buffers count
/// alike, instead of the largest deciding the line.
inline line fit(const std::vector<calib_point>& ps, int group, coll_kind k, std::int64_t min_bytes = 0) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  int cnt = 0;
  for (const auto& p : ps)
    if (p.group == group && p.kind == k && p.median_us > 0 && p.buffer_bytes >= min_bytes) {
      const double x = static_cast<double>(p.bus_bytes), y = p.median_us, w = 1 / (y * y);
      sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y, ++cnt;
    }
  line l;
  const double den = sw * sxx - sx * sx;
  if (cnt < 2 || den <= 0) return l;
  l.slope = (sw * sxy - sx * sy) / den;
  l.intercept = (sy - l.slope * sx) / sw;
  l.slope = std::max(l.slope, 1e-9);  // (noise can tilt a line: keep bandwidth finite)
  l.intercept = std::max(l.intercept, 0.0);
  return l;
}

inline cost_model fit_cost_model(const std::vector<calib_group>& gs, const std::vector<calib_point>& ps, int ndim) {
  cost_model cm;
  const int ng = static_cast<int>(gs.size());
  std::vector<line> ag(static_cast<std::size_t>(ng));
  for (int g = 0; g < ng; ++g) ag[static_cast<std::size_t>(g)] = fit(ps, g, coll_kind::all_gather);
  // hop and base from the axes and the flattened group (last) when there are two sizes
  double hop = 0, base = 0;
  const int axes = ng > 1 ? ng - 1 : ng;
  if (ng > 1) {
    double h = 0;
    for (int g = 0; g < axes; ++g)
      h += (ag.back().intercept - ag[static_cast<std::size_t>(g)].intercept) /
           static_cast<double>(gs.back().n - gs[static_cast<std::size_t>(g)].n);
    hop = std::max(0.0, h / axes);
    double b = 0;
    for (int g = 0; g < axes; ++g)
      b += ag[static_cast<std::size_t>(g)].intercept - static_cast<double>(gs[static_cast<std::size_t>(g)].n - 1) * hop;
    base = std::max(0.0, b / axes);
  } else if (ng == 1) {
    base = ag[0].intercept;
  }
  cm.base_us = base;
  for (int g = 0; g < axes; ++g) {
    const auto a = static_cast<std::size_t>(gs[static_cast<std::size_t>(g)].g[0]);
    cm.GBps[a] = 1.0 / (ag[static_cast<std::size_t>(g)].slope * 1e3);
    cm.hop_us[a] = ng > 1 ? std::max(0.0, (ag[static_cast<std::size_t>(g)].intercept - base) /
                                              static_cast<double>(gs[static_cast<std::size_t>(g)].n - 1))
                          : 0.0;
  }
  (void)ndim;
  for (int k = 1; k < 4; ++k) {
    const auto kind = static_cast<coll_kind>(k);
    double sc = 0, ex = 0;
    for (int g = 0; g < ng; ++g) {
      const line l = fit(ps, g, kind);
      sc += l.slope / ag[static_cast<std::size_t>(g)].slope;
      const double hops = static_cast<double>((kind == coll_kind::all_reduce ? 2 : 1) * (gs[static_cast<std::size_t>(g)].n - 1));
      double link_hop = 0;
      for (int i = 0; i < gs[static_cast<std::size_t>(g)].g.n; ++i)
        link_hop = std::max(link_hop, cm.hop_us[static_cast<std::size_t>(gs[static_cast<std::size_t>(g)].g[i])]);
      ex += l.intercept - (cm.base_us + hops * link_hop);
    }
    cm.coll_scale[static_cast<std::size_t>(k)] = ng ? sc / ng : 1.0;
    cm.coll_base_us[static_cast<std::size_t>(k)] = std::max(-cm.base_us, ng ? ex / ng : 0.0) + 0.0;  // (+0.0: no -0)
  }
  // (from 1 MiB up: the copies a redistribution's packing makes of large blocks, which leave
  // the caches; smaller ones run several times faster on CPUs)
  const line copy = fit(ps, copy_group, coll_kind::all_gather, copy_fit_bytes);
  if (copy.slope > 1e-9) cm.copy_GBps = 1.0 / (copy.slope * 1e3);  // (no copy points: not counted)
  cm.coll_scale[static_cast<std::size_t>(coll_kind::exchange)] = cm.coll_scale[static_cast<std::size_t>(coll_kind::all_to_all)];
  cm.coll_base_us[static_cast<std::size_t>(coll_kind::exchange)] = cm.coll_base_us[static_cast<std::size_t>(coll_kind::all_to_all)];
  return cm;
}

/// The cost model's time for a measured point (a local copy: its copy time).
inline double model_of(const cost_model& cm, const calib_group& g, const calib_point& p) {
  if (p.group == copy_group) return cm.copy_us(p.bus_bytes);
  const double hops = static_cast<double>((p.kind == coll_kind::all_reduce ? 2 : 1) * (g.n - 1));
  return modelled_us(cm, link_of(cm, g.g), hops, p.bus_bytes, p.kind);
}

/// Measures, fits, prints (rank 0) and writes the link profile `file`. `world` is the MPI
/// world, or empty for in-process ranks. Returns the exit code.
inline int calibrate(const mesh_shape& m, const std::vector<std::string_view>& names, const std::string& mesh_flag,
                     const std::string& file, comm::any_communicator world, const bench::time_options& times, bool quiet) {
  const auto gs = calib_groups(m, names);
  if (gs.empty()) throw error("--mesh " + mesh_flag + ": every axis has size 1; nothing communicates, nothing to calibrate");
  const std::vector<std::int64_t> sizes{std::int64_t{16} << 10, std::int64_t{256} << 10, std::int64_t{1} << 20,
                                        std::int64_t{4} << 20, std::int64_t{16} << 20};
  std::vector<calib_point> ps;
  const bool mpi = static_cast<bool>(world);
  if (mpi)
    bench::with_device_mesh(m, std::move(world), [&](auto& dm) { calibrate_on_rank(dm, gs, sizes, times, dm.rank() == 0 ? &ps : nullptr); });
  else
    comm::run_threads(static_cast<int>(world_size(m)), [&](comm::threads_communicator& c) {
      bench::with_device_mesh(m, comm::any_communicator(c), [&](auto& dm) {
        calibrate_on_rank(dm, gs, sizes, times, dm.rank() == 0 ? &ps : nullptr);
      });
    });
  if (quiet) return 0;
  const cost_model fitted = fit_cost_model(gs, ps, m.ndim), nvlink{};
  if (const std::string bad = cost_model_text(fitted, m.ndim); !bad.empty())  // (a profile --links would refuse)
    throw error("the fit gives " + bad + "; nothing written; calibrate again with more --calls");
  std::printf("calibration on %s, mesh %s: %d warm-up + %d timed calls per point, slowest rank per call\n",
              mpi ? "mpi" : "threads", mesh_flag.c_str(), times.warmup, times.calls);
  std::printf("  %-10s %-15s %10s %12s %12s %12s %12s\n", "group", "collective", "S bytes", "median us", "fitted us",
              "fit/meas", "NVLink us");
  toml::array points;
  double worst = 0;
  const calib_group local{axis_group{}, "(each rank)", 1};
  for (const calib_point& p : ps) {
    const bool copy = p.group == copy_group;
    const calib_group& g = copy ? local : gs[static_cast<std::size_t>(p.group)];
    const std::string what = copy ? "local copy" : std::string(coll_kind_names[static_cast<int>(p.kind)]);
    const double f = model_of(fitted, g, p), d = model_of(nvlink, g, p);
    if (!copy || p.buffer_bytes >= copy_fit_bytes) worst = std::max(worst, std::abs(f / p.median_us - 1));
    std::printf("  %-10s %-15s %10lld %12.1f %12.1f %11.2fx %12.1f\n", g.name.c_str(), what.c_str(),
                static_cast<long long>(p.buffer_bytes), p.median_us, f, f / p.median_us, d);
    points.push_back(toml::table{{"group", g.name},
                                 {"collective", what},
                                 {"buffer_bytes", p.buffer_bytes},
                                 {"median_us", p.median_us},
                                 {"fitted_us", f}});
  }
  std::printf("  fitted: base_us %.2f", fitted.base_us);
  for (int a = 0; a < m.ndim; ++a)
    std::printf(", %s %.3f GB/s %.2f us/hop", std::string(names[static_cast<std::size_t>(a)]).c_str(),
                fitted.GBps[static_cast<std::size_t>(a)], fitted.hop_us[static_cast<std::size_t>(a)]);
  std::printf("\n  local copies: %.3f GB/s per rank", fitted.copy_GBps);
  std::printf("\n  per collective (scale, extra us):");
  for (int k = 0; k < coll_kinds; ++k)
    std::printf(" %s %.2f %+.1f", std::string(coll_kind_names[k]).c_str(), fitted.coll_scale[static_cast<std::size_t>(k)],
                fitted.coll_base_us[static_cast<std::size_t>(k)]);
  std::printf("\n  largest |fitted / measured - 1| over the points fitted: %.0f%% (local copies from 1 MiB up)\n",
              100 * worst);
  std::ostringstream header;
  const std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  header << "tessera link profile: written by tessera-plan --calibrate on " << (mpi ? "mpi" : "threads") << ", mesh "
         << mesh_flag << ", " << when << "\n"
         << "use: tessera-plan --links " << file << " ...  (docs/benchmarking.md)";
  std::ostringstream measured;
  measured << toml::table{{"measured", toml::table{{"points", points}}}} << "\n";
  write_link_profile(file, link_profile_text(fitted, names, header.str(), measured.str()));
  std::printf("wrote %s\n", file.c_str());
  return 0;
}

}  // namespace plan_tool
