// tessera-plan's text report: a plan step by step, and which rank holds which block.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/layout/local_shape.hpp>
#include <tessera/layout/print.hpp>
#include <tessera/plan/planner.hpp>
#include <tessera/plan/runs.hpp>

namespace plan_tool {

using namespace tessera;

inline std::string human_bytes(double b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
  return buf;
}

inline std::string ranks_str(const std::set<std::int64_t>& rs) {
  std::string s;
  for (auto it = rs.begin(); it != rs.end();) {
    auto jt = it;
    while (std::next(jt) != rs.end() && *std::next(jt) == *jt + 1) ++jt;
    if (!s.empty()) s += ",";
    s += std::to_string(*it);
    if (jt != it) {
      s += *jt == *it + 1 ? ',' : '-';
      s += std::to_string(*jt);
    }
    it = std::next(jt);
  }
  return s;
}

// Which rank holds which block: one line per rank, and for 2-D tensors a grid whose cells
// list the ranks holding that block.
inline void picture(const char* title, const layout_spec& l, const mesh_shape& m, const std::vector<std::string_view>& names,
             const shape_t& g) {
  std::cout << "\n" << title << " " << to_dtensor_string(l) << "  " << to_canonical_string(l, names) << "\n";
  const std::int64_t world = world_size(m);
  std::vector<box> boxes;
  for (std::int64_t r = 0; r < world; ++r) boxes.push_back(local_box(l, m, g, coords_of(m, r)));
  for (std::int64_t r = 0; r < world; ++r) {
    const coords_t c = coords_of(m, r);
    std::string coord;
    for (int a = 0; a < m.ndim; ++a)
    {  // appended piece by piece: g++ 12's -Wrestrict misfires on ("," or "") + std::string
      if (a) coord += ',';
      coord.append(names[static_cast<std::size_t>(a)]);
      coord += '=';
      coord += std::to_string(c[static_cast<std::size_t>(a)]);
    }
    std::string blk;
    const box& b = boxes[static_cast<std::size_t>(r)];
    for (int d = 0; d < g.rank; ++d)
    {
      if (d) blk += ", ";
      blk += std::to_string(b.offset[static_cast<std::size_t>(d)]);
      blk += ':';
      blk += std::to_string(b.offset[static_cast<std::size_t>(d)] + b.size[static_cast<std::size_t>(d)]);
    }
    std::printf("  rank %-3lld (%s)  [%s]\n", static_cast<long long>(r), coord.c_str(), blk.c_str());
  }
  if (l.has_partial()) {
    std::string ax;
    for (int a = 0; a < m.ndim; ++a)
      if (l.is_partial(a)) ax += (ax.empty() ? "" : ", ") + std::string(names[static_cast<std::size_t>(a)]);
    std::cout << "  values are partial: " << to_string(l.op) << " over (" << ax << ") gives the tensor\n";
  }
  if (g.rank != 2) return;
  std::set<std::int64_t> cuts[2];
  for (int d = 0; d < 2; ++d) {
    cuts[d] = {0, g[d]};
    for (const box& b : boxes) {
      cuts[d].insert(b.offset[static_cast<std::size_t>(d)]);
      cuts[d].insert(b.offset[static_cast<std::size_t>(d)] + b.size[static_cast<std::size_t>(d)]);
    }
  }
  const std::vector<std::int64_t> rows(cuts[0].begin(), cuts[0].end()), cols(cuts[1].begin(), cuts[1].end());
  if (rows.size() > 17 || cols.size() > 9) return;  // too fine to draw
  std::vector<std::vector<std::string>> cell(rows.size() - 1, std::vector<std::string>(cols.size() - 1));
  std::size_t width = 3;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i)
    for (std::size_t j = 0; j + 1 < cols.size(); ++j) {
      std::set<std::int64_t> holders;
      for (std::int64_t r = 0; r < world; ++r) {
        const box& b = boxes[static_cast<std::size_t>(r)];
        if (b.offset[0] <= rows[i] && rows[i] < b.offset[0] + b.size[0] && b.offset[1] <= cols[j] && cols[j] < b.offset[1] + b.size[1])
          holders.insert(r);
      }
      cell[i][j] = ranks_str(holders);
      width = std::max(width, cell[i][j].size());
    }
  std::cout << "  block grid (rows: dim 0, columns: dim 1; each cell lists the ranks that hold it):\n";
  std::string sep = "  +";
  for (std::size_t j = 0; j + 1 < cols.size(); ++j) sep += std::string(width + 2, '-') + "+";
  std::cout << sep << "\n";
  for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
    std::string line = "  |";
    for (std::size_t j = 0; j + 1 < cols.size(); ++j) {
      const std::string& c = cell[i][j];
      const std::size_t pad = width - c.size();
      line += " " + std::string(pad / 2, ' ') + c + std::string(pad - pad / 2, ' ') + " |";
    }
    std::printf("%s  rows %lld:%lld\n", line.c_str(), static_cast<long long>(rows[i]), static_cast<long long>(rows[i + 1]));
    std::cout << sep << "\n";
  }
}

inline void print_plan(const char* title, const layout_spec& src, const plan_value& p, const mesh_shape& m,
                const std::vector<std::string_view>& names, const shape_t& g, std::int64_t elem, const cost_model& cm) {
  std::cout << "\n" << title << "\n";
  std::printf("  %-2s %-44s %6s %12s %14s %10s\n", "#", "step", "ranks", "buffer", "moved/rank", "time(us)");
  layout_spec l = src;
  double total_t = 0;
  std::int64_t total_b = 0;
  for (int i = 0; i < p.n; ++i) {
    const layout_spec next = apply(l, p[i]);
    const step_cost c = cost_of(p[i], l, next, m, g, elem, cm);
    std::printf("  %-2d %-44s %6lld %12s %14s %10.2f\n", i + 1, to_string(p[i], names).c_str(),
                static_cast<long long>(group_size(m, p[i].group)),
                is_collective(p[i].kind) ? human_bytes(static_cast<double>(c.buffer_bytes)).c_str() : "-",
                is_collective(p[i].kind) ? human_bytes(static_cast<double>(c.bus_bytes)).c_str() : "local",
                c.time_us);
    total_t += c.time_us;
    total_b += c.bus_bytes;
    l = next;
  }
  if (p.n == 0) std::cout << "  (nothing to do: the layouts are equal)\n";
  std::printf("  total: %d step(s), %d collective(s), %s moved per rank, %.2f us modelled\n", p.n, p.collectives(),
              human_bytes(static_cast<double>(total_b)).c_str(), total_t);
  // how the steps execute: consecutive all_to_alls as one exchange (plan/runs.hpp). Two
  // quantities, both printed: what the planner charges for the run (evaluate_plan: one
  // all_to_all over the union group, every rank's padded block, nccl-tests' bus bytes),
  // and what the exchange sends as the runtime makes it (exchange_traffic: the rank that
  // sends most; point-to-point when pairs move unequal pieces, a rank keeping what stays)
  const plan_runs runs = runs_of(p);
  const auto ls = plan_layouts(src, p);
  for (int k = 0; k < runs.size(); ++k) {
    const step_run& run = runs[k];
    if (!run.fused()) continue;
    const layout_spec& before = ls[static_cast<std::size_t>(run.begin)];
    const layout_spec& after = ls[static_cast<std::size_t>(run.end)];
    plan_step s = p[run.begin];
    s.group = run.group;
    const step_cost planned = cost_of(s, before, after, m, g, elem, cm);
    exchange_cost most;
    for (std::int64_t rank = 0; rank < world_size(m); ++rank) {
      const exchange_cost c = exchange_traffic(before, after, run.group, m, g, elem, cm, coords_of(m, rank));
      if (c.bus_bytes > most.bus_bytes || (c.bus_bytes == most.bus_bytes && c.time_us > most.time_us)) most = c;
    }
    std::ostringstream group;
    for (int i = 0; i < run.group.n; ++i) group << (i ? ", " : "(") << names[static_cast<std::size_t>(run.group[i])];
    group << ")";
    std::printf("  executed: steps %d-%d as one exchange over %s, planned as one all_to_all: %s moved per rank, %.2f us modelled\n",
                run.begin + 1, run.end, group.str().c_str(), human_bytes(static_cast<double>(planned.bus_bytes)).c_str(),
                planned.time_us);
    if (most.calls)
      std::printf("            sent as one all_to_all (even pieces): %s per rank, %.2f us modelled\n",
                  human_bytes(static_cast<double>(most.bus_bytes)).c_str(), most.time_us);
    else
      std::printf("            sent point-to-point (uneven pieces): the rank that sends most sends %s, %.2f us modelled\n",
                  human_bytes(static_cast<double>(most.bus_bytes)).c_str(), most.time_us);
  }
}

}  // namespace plan_tool
