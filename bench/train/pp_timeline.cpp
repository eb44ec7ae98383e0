// Measured pipeline timelines against the schedule simulator (issue 13): every schedule
// trains the debug model on pp thread ranks; one step is recorded (every F, B, I, W with
// its start and end), and the simulator is fed the mean F, B, I and W times of that very
// step. Prints, per schedule, the measured makespan and bubble next to the simulator's and
// their ratio (the simulator fed the mean of each kind over all stages, and fed each stage's
// own means: the embedding's and the head's stages do other work than the rest), and writes the measured and the planned timeline as SVG (the simulator's
// drawing style, time in ms).
//
//   pp_timeline [--pp 2] [--microbatches 4] [--seq 256] [--rounds 3] [--svg-dir DIR]
//
// Run with TESSERA_NUM_THREADS=1 and at most as many pp ranks as cores: each rank is one
// thread, and an oversubscribed machine measures the scheduler, not the schedule.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/pipeline/pipeline.hpp>
#include <tessera/train/parallel_llama.hpp>

using namespace tessera;
namespace tp = tessera::pipeline;

namespace {

struct pp_dyn {
  static constexpr std::string_view name = "pp_timeline";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"pp">>;
  using parallelize = tessera::parallelize<pipeline_parallel<"pp">>;
};

struct result {
  double measured_makespan = 0, measured_bubble = 0, sim_makespan = 0, sim_bubble = 0;
  double stage_makespan = 0, stage_bubble = 0;  ///< the simulator with per-stage costs
  tp::costs c{};
  std::string svg_measured, svg_planned;
};

/// One recorded step of schedule `k`; the median round by measured makespan.
result run(tp::schedule_kind k, int pp, int m, std::int64_t T, int rounds) {
  parallel::pipeline_choice choice;
  choice.set_schedule = true;
  choice.schedule = k;
  choice.microbatches = m;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(m * T));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7 + 3) % 2048);
  std::vector<result> all;
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::vector<train::pipeline_timing>> times(static_cast<std::size_t>(pp));
    tp::schedule lowered;
    comm::run_threads(pp, [&](comm::threads_communicator& c) {
      device_mesh<pp_dyn::mesh> dm(pp_dyn::mesh(pp), c);
      train::parallel_llama<pp_dyn> pm(dm, choice);
      pm.init_weights(1);
      (void)pm.forward(ids, ids, m, T);  // warm-up: buffers, first-touch pages
      pm.record_pipeline_timing(&times[static_cast<std::size_t>(c.rank())]);
      dm.world().barrier().wait();
      (void)pm.forward(ids, ids, m, T);
      pm.record_pipeline_timing(nullptr);
      if (c.rank() == 0) lowered = pm.stage_layout().lowered;
    });
    // the measured timeline as a simulation (time in ms from the first start)
    std::int64_t t0 = times[0].front().start_us, t1 = 0;
    for (const auto& r : times)
      for (const auto& t : r) t0 = std::min(t0, t.start_us), t1 = std::max(t1, t.end_us);
    tp::simulation meas;
    meas.ok = true;
    meas.makespan = static_cast<double>(t1 - t0) / 1000.0;
    double sum[4] = {}, busy_all = 0;
    int count[4] = {};
    const auto S = static_cast<std::size_t>(lowered.stages);
    std::vector<std::array<double, 4>> ssum(S, std::array<double, 4>{}), scount(S, std::array<double, 4>{});
    for (int r = 0; r < pp; ++r) {
      const auto& list = lowered.actions[static_cast<std::size_t>(r)];
      meas.start.emplace_back(list.size(), 0.0);
      meas.finish.emplace_back(list.size(), 0.0);
      double busy = 0;
      std::size_t next = 0;  // the recorded computes come in the list's order
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (!tp::is_compute(list[i].kind) || next >= times[static_cast<std::size_t>(r)].size()) continue;
        const auto& t = times[static_cast<std::size_t>(r)][next++];
        const double a = static_cast<double>(t.start_us - t0) / 1000.0, b = static_cast<double>(t.end_us - t0) / 1000.0;
        meas.start.back()[i] = a, meas.finish.back()[i] = b;
        busy += b - a;
        const int kind = t.kind == tp::op::F ? 0 : t.kind == tp::op::B ? 1 : t.kind == tp::op::I ? 2 : 3;
        sum[kind] += b - a;
        ++count[kind];
        ssum[static_cast<std::size_t>(t.stage)][static_cast<std::size_t>(kind)] += b - a;
        scount[static_cast<std::size_t>(t.stage)][static_cast<std::size_t>(kind)] += 1;
      }
      meas.busy.push_back(busy);
      meas.idle.push_back(meas.makespan - busy);
      busy_all += busy;
    }
    meas.bubble = 1.0 - busy_all / (pp * meas.makespan);
    result res;
    res.measured_makespan = meas.makespan, res.measured_bubble = meas.bubble;
    auto mean = [&](int k2, double fallback) { return count[k2] ? sum[k2] / count[k2] : fallback; };
    res.c.F = mean(0, 1);
    res.c.B = mean(1, mean(2, 1) + mean(3, 1));
    res.c.I = mean(2, res.c.B / 2);
    res.c.W = mean(3, res.c.B / 2);
    const tp::schedule compute = tp::compute_only(lowered);
    const tp::simulation sim = tp::simulate(compute, res.c);
    res.sim_makespan = sim.makespan, res.sim_bubble = sim.bubble;
    std::vector<tp::costs> per_stage(S);
    for (std::size_t st = 0; st < S; ++st) {
      auto sm = [&](int k2) { return scount[st][static_cast<std::size_t>(k2)] ? ssum[st][static_cast<std::size_t>(k2)] / scount[st][static_cast<std::size_t>(k2)] : 0.0; };
      per_stage[st] = tp::costs{sm(0), sm(1), sm(2), sm(3), 0};
    }
    const tp::simulation ssim = tp::simulate_per_stage(compute, per_stage);
    res.stage_makespan = ssim.makespan, res.stage_bubble = ssim.bubble;
    const std::string name(tp::schedule_name(k));
    res.svg_measured = tp::to_svg(lowered, meas, name + " measured (ms), pp=" + std::to_string(pp) + " m=" + std::to_string(m));
    res.svg_planned = tp::to_svg(compute, ssim, name + " simulated with each stage's measured F, B, I, W (ms)");
    all.push_back(res);
  }
  std::sort(all.begin(), all.end(),
            [](const result& a, const result& b) { return a.measured_makespan < b.measured_makespan; });
  return all[all.size() / 2];
}

int arg_int(int argc, char** argv, const char* flag, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == flag) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int pp = arg_int(argc, argv, "--pp", 2), m = arg_int(argc, argv, "--microbatches", 4);
  const int T = arg_int(argc, argv, "--seq", 256), rounds = arg_int(argc, argv, "--rounds", 3);
  std::string svg_dir;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--svg-dir") svg_dir = argv[i + 1];
  if (pp < 1 || m < 1 || T < 1 || rounds < 1) {
    std::fprintf(stderr, "pp_timeline: --pp, --microbatches, --seq and --rounds must be positive\n");
    return 2;
  }
  std::printf("debugmodel, pp=%d thread ranks, m=%d microbatches of 1 x %d tokens, median of %d rounds\n\n", pp, m, T,
              rounds);
  std::printf("| schedule | F / B / I / W (ms, measured means) | makespan measured (ms) | simulated, mean costs | "
              "ratio | simulated, per-stage costs | ratio | bubble measured / mean / per-stage |\n"
              "|---|---|---|---|---|---|---|---|\n");
  for (tp::schedule_kind k : tp::all_schedule_kinds) {
    const result r = run(k, pp, m, T, rounds);
    std::printf("| %s | %.1f / %.1f / %.1f / %.1f | %.1f | %.1f | %.3f | %.1f | %.3f | %.1f%% / %.1f%% / %.1f%% |\n",
                std::string(tp::schedule_name(k)).c_str(), r.c.F, r.c.B, r.c.I, r.c.W, r.measured_makespan,
                r.sim_makespan, r.measured_makespan / r.sim_makespan, r.stage_makespan,
                r.measured_makespan / r.stage_makespan, 100 * r.measured_bubble, 100 * r.sim_bubble,
                100 * r.stage_bubble);
    if (!svg_dir.empty()) {
      const std::string base = svg_dir + "/" + std::string(tp::schedule_name(k));
      tp::write_file_atomic(base + "_measured.svg", r.svg_measured);
      tp::write_file_atomic(base + "_planned.svg", r.svg_planned);
    }
  }
  return 0;
}
