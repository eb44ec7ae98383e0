// tessera-plan: explore redistribution plans from the command line.
//
//   tessera-plan --mesh dp=2,tp=4 --from 'S(0),R' --to 'R,S(1)' --shape 1024,4096 --dtype bf16
//
// prints the least-cost plan (the same constexpr planner that resolves plan_t at compile
// time, here called with sizes read from flags), the bytes each rank moves per step, the
// modelled time, a gather-first baseline (gather, reduce, then slice) for comparison,
// and which rank holds which block before and after.
//
//   tessera-plan --mesh dp=2,tp=2 --from 'P,P' --to 'R,R' --shape 2048,2048 --run [--json]
//   mpirun -np 4 tessera-plan ... --run --backend mpi
//
// --run executes the chosen plan, the next best plans the search considered and the
// gather-first baseline on real ranks, checks every result and prints their times next to
// the cost model's (run_mode.hpp).
//
//   tessera-plan --mesh dp=2,tp=2 --calibrate links.toml      then  ... --links links.toml
//
// --calibrate fits the cost model's constants to the collectives measured on this machine
// and writes them as a link profile; --links plans with them (calibrate.hpp).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>
#include <memory>
#include <fstream>

#include <tessera/core/host_memory.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/layout/parse.hpp>
#include <tessera/layout/print.hpp>
#include <tessera/plan/planner.hpp>
#include <tessera/plan/runs.hpp>

#include "print.hpp"
#include "run_mode.hpp"
#ifdef TESSERA_HAS_TOMLPLUSPLUS
#include <tessera/plan/link_profile.hpp>

#include "calibrate.hpp"
#endif

namespace {

using namespace tessera;

const char* const usage =
    "usage: tessera-plan --mesh NAME=SIZE[,NAME=SIZE...] --from LAYOUT --to LAYOUT --shape N[,N...]\n"
    "                    [--dtype f32|bf16|f16|f8|f64] [--link AXIS=GBPS[:HOP_US]]... [--no-picture] [--json]\n"
    "                    [--links FILE] [--run [--backend threads|mpi] [--calls N] [--warmup N] [--next N]]\n"
    "       tessera-plan --mesh NAME=SIZE[,...] --calibrate FILE [--backend threads|mpi] [--calls N] [--warmup N]\n"
    "  LAYOUT: DTensor style, one placement per mesh axis: 'S(0),R', 'P(sum),S(1)', 'S(0)#1,S(0)#0'\n"
    "          or canonical: '{0: (dp, tp), partial: sum(pp)}'\n"
    "  --link: the bandwidth (GB/s) and hop latency (us) of an axis; default 87.7 GB/s, 0.6 us\n"
    "  --links FILE: the cost model's constants from a link profile (TOML) that --calibrate wrote\n"
    "  --calibrate FILE: time each collective on every axis and on all axes together, and a\n"
    "         rank's local packing copy; fit the cost model's constants (copy_GBps too) and\n"
    "         write them to FILE (docs/benchmarking.md)\n"
    "  --json: one JSON object on stdout instead of the text report\n"
    "  --run: execute and time the chosen plan, the N next best (--next, default 3) and the\n"
    "         gather-first baseline on real ranks (threads; --backend mpi under mpirun, one\n"
    "         process per rank), checking every result; --calls timed calls per plan (default:\n"
    "         about 64 MiB of tensor, 5 to 200), after --warmup untimed ones (default 3)\n"
    "example: tessera-plan --mesh dp=2,tp=4 --from 'S(0),R' --to 'R,S(1)' --shape 1024,4096 --dtype bf16\n";

bool quiet = false;  // ranks other than 0 under mpirun

/// Command-line misuse: one message naming the value and the fix, exit code 2.
[[noreturn]] void die(const std::string& msg, int code = 2) {
  // (one line, as tessera-schedule says it; the whole usage would bury the message)
  if (!quiet)
    std::cerr << "tessera-plan: " << msg << (code == 2 ? "\n(run tessera-plan --help for the flags)\n" : "\n");
#ifdef TESSERA_HAS_MPI
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Finalize();
#endif
  std::exit(code);
}

std::int64_t parse_count(std::string_view s, const std::string& what) {
  if (s.empty()) die(what + ": expected a positive number, got nothing");
  std::int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') die(what + ": expected a positive number, got '" + std::string(s) + "'");
    v = v * 10 + (c - '0');
    if (v > (std::int64_t{1} << 40)) die(what + ": '" + std::string(s) + "' is too large");
  }
  if (v <= 0) die(what + ": expected a positive number, got '" + std::string(s) + "'");
  return v;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

}  // namespace

namespace {

using plan_tool::human_bytes;
using plan_tool::picture;
using plan_tool::print_plan;

}  // namespace

int main(int argc, char** argv) {
#ifdef TESSERA_HAS_MPI
  // under mpirun (one process per rank), MPI is initialized before the flags are read,
  // so that every rank parses them and only rank 0 speaks
  const bool under_mpi = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE");
  std::unique_ptr<comm::mpi_environment> mpi_env;
  int mpi_rank = 0, mpi_size = 1;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "mpi" && std::string_view(argv[i - 1]) == "--backend") {
      mpi_env = std::make_unique<comm::mpi_environment>(argc, argv);
      MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
      MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    }
  if (mpi_rank != 0) quiet = true;
#endif
  std::map<std::string, std::string> flags;
  std::vector<std::string> links;
  bool draw = true, json = false, run = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << usage;
      return 0;
    }
    if (a == "--no-picture" || a == "--json" || a == "--run") {
      (a == "--json" ? json : a == "--run" ? run : draw) = a != "--no-picture";
      continue;
    }
    if (a != "--mesh" && a != "--from" && a != "--to" && a != "--shape" && a != "--dtype" && a != "--link" &&
        a != "--backend" && a != "--calls" && a != "--warmup" && a != "--next" && a != "--calibrate" && a != "--links")
      die("unknown argument '" + a + "'");
    if (i + 1 >= argc) die(a + " needs a value");
    if (a == "--link")
      links.push_back(argv[++i]);
    else
      flags[a] = argv[++i];
  }
  const bool calibrate = flags.count("--calibrate") > 0;
  if (calibrate && run) die("--calibrate and --run: give one of them (calibrate first, then --run --links FILE)");
  for (const char* need : {"--mesh", "--from", "--to", "--shape"})
    if (!flags.count(need) && (!calibrate || std::string_view(need) == "--mesh")) die(std::string("missing ") + need);
  for (const char* only_run : {"--backend", "--calls", "--warmup", "--next"})
    if (flags.count(only_run) && !run && !(calibrate && std::string_view(only_run) != "--next"))
      die(std::string(only_run) + " applies to --run (and --calibrate); add --run or drop it");
  const std::string backend = flags.count("--backend") ? flags["--backend"] : "threads";
  if (backend != "threads" && backend != "mpi")
    die("--backend: unknown backend '" + backend + "'; use threads (in-process ranks) or mpi (under mpirun)");
#ifdef TESSERA_HAS_MPI
  if (backend == "mpi" && !under_mpi)
    die("--backend mpi: not started by mpirun; run it as mpirun -np RANKS tessera-plan ... --backend mpi");
  if (backend == "threads" && under_mpi && (run || calibrate))
    die("--backend threads: started by mpirun; add --backend mpi, or run without mpirun");
#else
  if (backend == "mpi") die("--backend mpi: this tessera-plan was built without MPI; rebuild with MPI found, or use --backend threads");
#endif

  // mesh
  std::vector<std::string> axis_names;
  mesh_shape m;
  for (const std::string& part : split(flags["--mesh"], ',')) {
    const auto kv = split(part, '=');
    if (kv.size() != 2 || kv[0].empty()) die("--mesh: write each axis as NAME=SIZE, e.g. dp=2,tp=4 (got '" + part + "')");
    if (std::find(axis_names.begin(), axis_names.end(), kv[0]) != axis_names.end()) die("--mesh: axis '" + kv[0] + "' is given twice");
    if (m.ndim == max_mesh_axes) die("--mesh: at most 8 axes");
    axis_names.push_back(kv[0]);
    m.size[static_cast<std::size_t>(m.ndim++)] = parse_count(kv[1], "--mesh " + kv[0]);
  }
  if (world_size(m) > 4096) die("--mesh: at most 4096 ranks");
  const std::vector<std::string_view> names(axis_names.begin(), axis_names.end());
#ifdef TESSERA_HAS_MPI
  if (backend == "mpi" && mpi_size != world_size(m))
    die("--mesh " + flags["--mesh"] + " has " + std::to_string(world_size(m)) + " ranks, but mpirun started " +
        std::to_string(mpi_size) + " processes; run mpirun -np " + std::to_string(world_size(m)) + " (or give a mesh of " +
        std::to_string(mpi_size) + " ranks)");
  auto mpi_world = [&] {
    comm::mpi_options o;
    o.check_calls = false;  // timing: no agreement round before each collective
    return comm::any_communicator(comm::mpi_communicator(MPI_COMM_WORLD, o));
  };
#else
  auto mpi_world = [] { return comm::any_communicator(); };
#endif
  bench::time_options times;
  if (flags.count("--calls")) times.calls = static_cast<int>(parse_count(flags["--calls"], "--calls"));
  if (flags.count("--warmup")) {
    const std::string& w = flags["--warmup"];
    times.warmup = w == "0" ? 0 : static_cast<int>(parse_count(w, "--warmup"));
  }
  if (times.calls > 100000 || times.warmup > 100000) die("--calls/--warmup: at most 100000");

  cost_model cm;
  if (flags.count("--links") || calibrate) {
#ifdef TESSERA_HAS_TOMLPLUSPLUS
    if (flags.count("--links")) {
      try {
        cm = read_link_profile(flags["--links"], names);
      } catch (const error& e) {
        die(std::string("--links: ") + e.what());
      }
    }
    if (calibrate) {
      if (!flags.count("--calls")) times.calls = 10;
      const std::string file = flags["--calibrate"];
      if (!quiet) {  // refuse an unwritable path before measuring (the profile is written at the end)
        std::ofstream probe(file + ".tmp");
        if (!probe) die("--calibrate " + file + ": cannot write there; give a path in a writable directory");
        probe.close();
        std::remove((file + ".tmp").c_str());
      }
      try {
        const int code = plan_tool::calibrate(m, names, flags["--mesh"], file, backend == "mpi" ? mpi_world() : comm::any_communicator(),
                                              times, quiet);
#ifdef TESSERA_HAS_MPI
        mpi_env.reset();
#endif
        return code;
      } catch (const std::exception& e) {
        die(std::string("--calibrate: ") + e.what(), 1);
      }
    }
#else
    die("--links/--calibrate: this tessera-plan was built without toml++ (libtomlplusplus-dev); install it and rebuild");
#endif
  }

  // shape and dtype
  shape_t g;
  for (const std::string& e : split(flags["--shape"], ',')) {
    if (g.rank == max_tensor_rank) die("--shape: at most 8 dimensions");
    g[g.rank++] = parse_count(e, "--shape");
  }
  const std::map<std::string, std::int64_t> dtypes{{"f32", 4}, {"bf16", 2}, {"f16", 2}, {"f8", 1}, {"f64", 8}};
  const std::string dt = flags.count("--dtype") ? flags["--dtype"] : "f32";
  if (!dtypes.count(dt)) die("--dtype: unknown dtype '" + dt + "'; use f32, bf16, f16, f8 or f64");
  const std::int64_t elem = dtypes.at(dt);
  if (const std::string big = plan_size_problem(m, g, elem); !big.empty()) die("--shape " + flags["--shape"] + ": " + big);

  for (const std::string& l : links) {
    const auto kv = split(l, '=');
    const auto it = kv.size() == 2 ? std::find(axis_names.begin(), axis_names.end(), kv[0]) : axis_names.end();
    if (it == axis_names.end()) die("--link: write AXIS=GBPS[:HOP_US] with an axis of the mesh (got '" + l + "')");
    const auto bw = split(kv[1], ':');
    char* end = nullptr;
    const double gbps = std::strtod(bw[0].c_str(), &end);
    if (!(gbps > 0) || !std::isfinite(gbps) || *end)
      die("--link: bandwidth must be a finite, positive number of GB/s (got '" + bw[0] + "')");
    double hop = 0.6;
    if (bw.size() > 1) {
      hop = std::strtod(bw[1].c_str(), &end);
      if (!(hop >= 0) || !std::isfinite(hop) || *end)
        die("--link: hop latency must be a finite number of microseconds, not negative (got '" + bw[1] + "')");
    }
    cm = cm.with_axis(static_cast<int>(it - axis_names.begin()), gbps, hop);
  }
  if (const std::string bad = cost_model_text(cm, m.ndim); !bad.empty()) die("--link: " + bad);

  layout_spec src, dst;
  try {
    src = parse_layout(flags["--from"], names, g.rank);
    dst = parse_layout(flags["--to"], names, g.rank);
  } catch (const error& e) {
    die(std::string("--from/--to: ") + e.what());
  }
  const plan_result r = make_plan(src, dst, m, g, elem, cm);
  if (r.error != plan_error::none) die(std::string("cannot plan ") + flags["--from"] + " -> " + flags["--to"] + ": " + std::string(describe(r.error)));

  const int next_best = flags.count("--next") ? static_cast<int>(parse_count(flags["--next"], "--next")) : 3;
  // --run: every check before anything is printed
  plan_tool::run_request q{src, dst, m, g, dt, elem, cm, next_best, {}, names};
  std::vector<bench::candidate> cs;
  if (run) {
    if (dt != "f32" && dt != "bf16" && dt != "f64")
      die("--dtype " + dt + ": --run executes f32, bf16 or f64 tensors (the communicators reduce no f16 or f8); use one of those");
    q.times = times;
    if (!flags.count("--calls")) q.times.calls = plan_tool::default_calls(g.numel() * elem);
    cs = bench::candidate_plans(src, dst, m, g, elem, cm, next_best, names);
    {  // memory: threads run every rank in this process; MPI processes share this node
      const std::int64_t per_rank = plan_tool::bytes_per_rank(q, cs);
      std::int64_t here = world_size(m);
      if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); local && backend == "mpi") here = std::atoll(local);
      std::int64_t avail = 0;  // TESSERA_HOST_MEMORY, else what Linux says
      try {
        avail = host_memory_budget();
      } catch (const error& e) {
        die(e.what(), 1);  // the environment, not the command line: no usage
      }
      if (avail > 0 && per_rank * here > avail)
        die("--shape " + flags["--shape"] + ": running it needs about " + human_bytes(static_cast<double>(per_rank * here)) +
            " on this machine (" + std::to_string(here) + " ranks here, " + human_bytes(static_cast<double>(per_rank)) +
            " each), but " + human_bytes(static_cast<double>(avail)) + " is available" +
            (host_memory_budget_given() ? " (TESSERA_HOST_MEMORY)" : "") + "; give a smaller --shape");
    }
  }

  if (!run) {
    if (json) {
      const auto cs = bench::candidate_plans(src, dst, m, g, elem, cm, flags.count("--next") ? next_best : 0, names);
      std::string out = "{\"plans\": [";
      for (std::size_t i = 0; i < cs.size(); ++i) out += (i ? ", " : "") + plan_tool::json_plan(cs[i], names) + "}";
      std::cout << out << "]}\n";
      return 0;
    }
  }
  if (!json && !quiet) {
    std::cout << "mesh (";
    for (int a = 0; a < m.ndim; ++a) std::cout << (a ? ", " : "") << names[static_cast<std::size_t>(a)] << "=" << m[a];
    std::cout << "), " << world_size(m) << " ranks; tensor ";
    for (int d = 0; d < g.rank; ++d) std::cout << (d ? " x " : "") << g[d];
    std::cout << " " << dt << " (" << human_bytes(static_cast<double>(g.numel() * elem)) << ")\n";
    std::cout << "from " << to_dtensor_string(src) << "  " << to_canonical_string(src, names) << "\n";
    std::cout << "to   " << to_dtensor_string(dst) << "  " << to_canonical_string(dst, names) << "\n";
    print_plan("least-cost plan (tessera):", src, r.plan, m, names, g, elem, cm);
    const plan_value gf = gather_first_plan(src, dst);
    const plan_result gfr = evaluate_plan(src, gf, m, g, elem, cm);
    print_plan("gather-first order (gather every sharded axis, reduce, then slice), for comparison:", src, gf, m, names, g, elem, cm);
    if (gfr.time_us > 0)
      std::printf("\ntessera's plan: %.2fx the modelled time and %.2fx the bytes of the gather-first order\n",
                  r.time_us / gfr.time_us, gfr.bus_bytes ? static_cast<double>(r.bus_bytes) / static_cast<double>(gfr.bus_bytes) : 1.0);
    if (draw && !run) {
      picture("before:", src, m, names, g);
      picture("after: ", dst, m, names, g);
    }
  }
  if (!run) return 0;

  std::vector<plan_tool::measured> ms;
  auto measure = [&](auto tag, comm::any_communicator* world) {
    using T = decltype(tag);
    if (world)
      plan_tool::measure_world<T>(*world, q, cs, &ms);
    else
      plan_tool::measure_threads<T>(q, cs, &ms);
  };
  comm::any_communicator world = backend == "mpi" ? mpi_world() : comm::any_communicator();
  try {
    if (dt == "f32") measure(float{}, world ? &world : nullptr);
    else if (dt == "f64") measure(double{}, world ? &world : nullptr);
    else measure(bf16{}, world ? &world : nullptr);
  } catch (const std::exception& e) {
    die(std::string("--run failed: ") + e.what(), 1);
  }
  world = comm::any_communicator();
  bool wrong = false;
  for (const auto& x : ms) wrong = wrong || !x.check.empty();
  if (!quiet) {
    if (json) {
      std::string out = "{\"backend\": \"" + backend + "\", \"ranks\": " + std::to_string(world_size(m)) +
                        ", \"dtype\": \"" + dt + "\", \"shape\": [";
      for (int d = 0; d < g.rank; ++d) out += (d ? ", " : "") + std::to_string(g[d]);
      out += "], \"warmup\": " + std::to_string(q.times.warmup) + ", \"plans\": [";
      for (std::size_t i = 0; i < ms.size(); ++i) out += (i ? ", " : "") + plan_tool::json_measured(ms[i], names);
      std::cout << out << "]}\n";
    } else {
      plan_tool::print_table(q, ms, backend == "mpi" ? "mpi (one process per rank)" : "threads (in-process ranks)");
    }
  }
#ifdef TESSERA_HAS_MPI
  mpi_env.reset();
#endif
  if (wrong) {
    if (!quiet) std::cerr << "tessera-plan: a plan gave a wrong result (see above); this is a bug in tessera, please report it\n";
    return 1;
  }
  return 0;
}
