// tessera-plan --run: executes the candidate plans of a transition on real ranks (threads,
// or MPI processes under mpirun), checks each result element by element, and times them
// with tessera::bench::time_calls (slowest rank per call, barrier before each call).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/bench/measure.hpp>
#include <tessera/core/json.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/tensor/dtype.hpp>
#ifdef TESSERA_HAS_MPI
#include <tessera/comm/mpi.hpp>
#endif

namespace plan_tool {

using namespace tessera;

/// What one candidate plan measured.
struct measured {
  bench::candidate c;
  std::string check;  ///< "" when the result was right, else what differs
  bench::timing t;
};

struct run_request {
  layout_spec src, dst;
  mesh_shape m;
  shape_t g;
  std::string dtype;
  std::int64_t elem = 4;
  cost_model cm;
  int next_best = 3;
  bench::time_options times;
  std::vector<std::string_view> names;
};

/// Default number of timed calls: about 64 MiB of tensor per plan, 5 to 200 calls.
inline int default_calls(std::int64_t tensor_bytes) {
  return static_cast<int>(std::clamp<std::int64_t>((std::int64_t{64} << 20) / std::max<std::int64_t>(tensor_bytes, 1), 5, 200));
}

/// About how many bytes one rank's process needs to run the candidates: the largest block
/// any layout of any candidate has, for the input, the output, the check's copy and the
/// runtime's four staging buffers.
inline std::int64_t bytes_per_rank(const run_request& q, const std::vector<bench::candidate>& cs) {
  std::int64_t most = 0;
  for (const auto& c : cs) {
    const auto ls = plan_layouts(q.src, c.plan);
    for (int i = 0; i <= c.plan.n; ++i) {
      most = std::max(most, max_local_numel(ls[static_cast<std::size_t>(i)], q.m, q.g));
    }
  }
  return 8 * most * q.elem;
}

/// Runs on every rank; rank 0 fills `out`.
template <class T, class Mesh>
void measure_on_rank(device_mesh<Mesh>& dm, const run_request& q, const std::vector<bench::candidate>& cs,
                     std::vector<measured>* out) {
  for (const bench::candidate& c : cs) {
    measured r{c, bench::run_plan_checked<T>(dm, q.src, q.dst, c.plan, q.g), {}};
    const std::vector<T> in = bench::known_block<T>(q.src, q.m, q.g, dm.coords());
    std::vector<T> res(static_cast<std::size_t>(local_box(q.dst, q.m, q.g, dm.coords()).numel()));
    r.t = bench::time_calls(dm.world(), q.times, [&] { detail::run_plan<T>(dm, q.src, c.plan, q.g, in.data(), res.data()); });
    // every rank's check result: a wrong block anywhere fails the plan
    int bad = r.check.empty() ? 0 : 1;
    dm.world().all_reduce(&bad, &bad, 1, comm::dtype::i32, comm::reduce_op::max).wait();
    if (bad && r.check.empty()) r.check = "another rank's block differs";
    if (out) out->push_back(std::move(r));
  }
}

template <class T>
void measure_world(comm::any_communicator world, const run_request& q, const std::vector<bench::candidate>& cs,
                   std::vector<measured>* out) {
  bench::with_device_mesh(q.m, std::move(world), [&](auto& dm) { measure_on_rank<T>(dm, q, cs, dm.rank() == 0 ? out : nullptr); });
}

template <class T>
void measure_threads(const run_request& q, const std::vector<bench::candidate>& cs, std::vector<measured>* out) {
  comm::run_threads(static_cast<int>(world_size(q.m)),
                    [&](comm::threads_communicator& c) { measure_world<T>(comm::any_communicator(c), q, cs, out); });
}

inline std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

inline std::string plan_text(const plan_value& p, const std::vector<std::string_view>& names, const char* sep) {
  std::string s;
  for (int i = 0; i < p.n; ++i) s += (i ? sep : "") + to_string(p[i], names);
  return p.n ? s : "(nothing to do)";
}

inline void print_table(const run_request& q, const std::vector<measured>& ms, const std::string& backend) {
  std::printf("\nmeasured on %s, %lld ranks: %d warm-up + %d timed calls per plan, slowest rank per call, barrier before each\n",
              backend.c_str(), static_cast<long long>(world_size(q.m)), q.times.warmup, q.times.calls);
  std::printf("  %-3s %-12s %10s %10s %10s %12s %9s %11s %9s  %s\n", "#", "plan", "median us", "min us", "max us",
              "moved/rank", "bus GB/s", "model us", "meas/model", "steps");
  int i = 0;
  for (const measured& m : ms) {
    const std::string role = m.c.role.rfind("next best", 0) == 0 ? "next best" : m.c.role;
    const double bw = m.t.median_us > 0 ? static_cast<double>(m.c.model.bus_bytes) / (m.t.median_us * 1e3) : 0;
    std::printf("  %-3d %-12s %10.1f %10.1f %10.1f %12lld %9.2f %11.1f %9.2fx  %s%s\n", ++i, role.c_str(), m.t.median_us,
                m.t.min_us, m.t.max_us, static_cast<long long>(m.c.model.bus_bytes), bw, m.c.model.time_us,
                m.c.model.time_us > 0 ? m.t.median_us / m.c.model.time_us : 0.0, plan_text(m.c.plan, q.names, "; ").c_str(),
                m.check.empty() ? "" : ("   WRONG RESULT: " + m.check).c_str());
  }
  const auto fastest = std::min_element(ms.begin(), ms.end(), [](const measured& a, const measured& b) { return a.t.median_us < b.t.median_us; });
  if (fastest != ms.end() && !ms.empty())
    std::printf("  measured fastest: #%d (%s); the chosen plan is %.2fx its median time\n",
                static_cast<int>(fastest - ms.begin()) + 1, fastest->c.role.c_str(),
                fastest->t.median_us > 0 ? ms.front().t.median_us / fastest->t.median_us : 1.0);
  std::printf("  (moved/rank: bytes the busiest rank sends, as nccl-tests' bus bytes; model us: the cost model's time as executed)\n");
}

inline std::string json_plan(const bench::candidate& c, const std::vector<std::string_view>& names) {
  auto json_quote = [](std::string_view t) { return json::quote(t); };
  std::string s = "{\"role\": " + json_quote(c.role) + ", \"steps\": [";
  for (int i = 0; i < c.plan.n; ++i) s += (i ? ", " : "") + json_quote(to_string(c.plan[i], names));
  s += "], \"planner_us\": " + fmt("%.3f", c.planner_us) + ", \"bytes_per_rank\": " + std::to_string(c.model.bus_bytes) +
       ", \"modelled_us\": " + fmt("%.3f", c.model.time_us);
  return s;
}

inline std::string json_measured(const measured& m, const std::vector<std::string_view>& names) {
  std::string s = json_plan(m.c, names);
  const double bw = m.t.median_us > 0 ? static_cast<double>(m.c.model.bus_bytes) / (m.t.median_us * 1e3) : 0;
  s += ", \"correct\": " + std::string(m.check.empty() ? "true" : "false");
  if (!m.check.empty()) s += ", \"error\": " + json::quote(m.check);
  s += ", \"calls\": " + std::to_string(m.t.per_call_us.size()) + ", \"median_us\": " + fmt("%.3f", m.t.median_us) +
       ", \"min_us\": " + fmt("%.3f", m.t.min_us) + ", \"max_us\": " + fmt("%.3f", m.t.max_us) +
       ", \"busbw_GBps\": " + fmt("%.4f", bw) + ", \"measured_over_modelled\": " +
       fmt("%.4f", m.c.model.time_us > 0 ? m.t.median_us / m.c.model.time_us : 0.0) + "}";
  return s;
}

}  // namespace plan_tool
