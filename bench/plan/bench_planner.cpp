// Run-time cost of the planner (what tessera-plan and dynamic-size tools pay; compile-time
// plans cost nothing at run time). Usage: build/<cc>/bench/plan/bench_planner
#include <benchmark/benchmark.h>

#include <array>
#include <string_view>

#include <tessera/layout/parse.hpp>
#include <tessera/plan/planner.hpp>

namespace {
using namespace tessera;

void plan(benchmark::State& st, const char* from, const char* to, mesh_shape m, std::array<std::string_view, 3> names,
          shape_t g) {
  const std::span<const std::string_view> n(names.data(), static_cast<std::size_t>(m.ndim));
  const layout_spec s = parse_layout(from, n, g.rank), d = parse_layout(to, n, g.rank);
  int explored = 0;
  for (auto _ : st) {
    const plan_result r = make_plan(s, d, m, g, 2);
    explored = r.explored;
    benchmark::DoNotOptimize(r);
  }
  st.counters["settled"] = explored;
}

const std::array<std::string_view, 3> dp_tp{"dp", "tp", ""};
const std::array<std::string_view, 3> pp_dp_tp{"pp", "dp", "tp"};
}  // namespace

BENCHMARK_CAPTURE(plan, swap_2d, "S(0),S(1)", "S(1),S(0)", mesh_shape{2, {2, 4}}, dp_tp, shape_t{1024, 4096});
BENCHMARK_CAPTURE(plan, fsdp_tp_to_replicate, "{0: (tp, dp)}", "R,R", mesh_shape{2, {8, 8}}, dp_tp, shape_t{4096, 4096});
BENCHMARK_CAPTURE(plan, partial_3d, "P,S(0),P", "S(1),R,S(0)", mesh_shape{3, {4, 8, 8}}, pp_dp_tp, shape_t{8192, 8192});
BENCHMARK_CAPTURE(plan, rotate_3d_rank3, "S(0),S(1),S(2)", "S(2),S(0),S(1)", mesh_shape{3, {2, 4, 8}}, pp_dp_tp,
                  shape_t{64, 1024, 4096});

BENCHMARK_MAIN();
