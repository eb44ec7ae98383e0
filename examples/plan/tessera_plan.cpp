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
#include <unistd.h>

#include <algorithm>
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

#include <tessera/layout/local_shape.hpp>
#include <tessera/layout/parse.hpp>
#include <tessera/layout/print.hpp>
#include <tessera/plan/planner.hpp>
#include <tessera/plan/runs.hpp>

#include "run_mode.hpp"

namespace {

using namespace tessera;

const char* const usage =
    "usage: tessera-plan --mesh NAME=SIZE[,NAME=SIZE...] --from LAYOUT --to LAYOUT --shape N[,N...]\n"
    "                    [--dtype f32|bf16|f16|f8|f64] [--link AXIS=GBPS[:HOP_US]]... [--no-picture] [--json]\n"
    "                    [--run [--backend threads|mpi] [--calls N] [--warmup N] [--next N]]\n"
    "  LAYOUT: DTensor style, one placement per mesh axis: 'S(0),R', 'P(sum),S(1)', 'S(0)#1,S(0)#0'\n"
    "          or canonical: '{0: (dp, tp), partial: sum(pp)}'\n"
    "  --link: the bandwidth (GB/s) and hop latency (us) of an axis; default 87.7 GB/s, 0.6 us\n"
    "  --json: one JSON object on stdout instead of the text report\n"
    "  --run: execute and time the chosen plan, the N next best (--next, default 3) and the\n"
    "         gather-first baseline on real ranks (threads; --backend mpi under mpirun, one\n"
    "         process per rank), checking every result; --calls timed calls per plan (default:\n"
    "         about 64 MiB of tensor, 5 to 200), after --warmup untimed ones (default 3)\n"
    "example: tessera-plan --mesh dp=2,tp=4 --from 'S(0),R' --to 'R,S(1)' --shape 1024,4096 --dtype bf16\n";

bool quiet = false;  // ranks other than 0 under mpirun

/// Command-line misuse: one message naming the value and the fix, exit code 2.
[[noreturn]] void die(const std::string& msg, int code = 2) {
  if (!quiet) std::cerr << "tessera-plan: " << msg << (code == 2 ? "\n\n" + std::string(usage) : std::string("\n"));
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

std::string human_bytes(double b) {
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

std::string ranks_str(const std::set<std::int64_t>& rs) {
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
void picture(const char* title, const layout_spec& l, const mesh_shape& m, const std::vector<std::string_view>& names,
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

void print_plan(const char* title, const layout_spec& src, const plan_value& p, const mesh_shape& m,
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
  // how the steps execute: consecutive all_to_alls as one exchange (plan/runs.hpp)
  const plan_runs runs = runs_of(p);
  const auto ls = plan_layouts(src, p);
  for (int k = 0; k < runs.size(); ++k) {
    const step_run& run = runs[k];
    if (!run.fused()) continue;
    exchange_cost most;
    for (std::int64_t rank = 0; rank < world_size(m); ++rank) {
      const exchange_cost c = exchange_traffic(ls[static_cast<std::size_t>(run.begin)], ls[static_cast<std::size_t>(run.end)],
                                               run.group, m, g, elem, cm, coords_of(m, rank));
      if (c.bus_bytes > most.bus_bytes || (c.bus_bytes == most.bus_bytes && c.time_us > most.time_us)) most = c;
    }
    std::ostringstream group;
    for (int i = 0; i < run.group.n; ++i) group << (i ? ", " : "(") << names[static_cast<std::size_t>(run.group[i])];
    group << ")";
    std::printf("  executed: steps %d-%d as one exchange over %s (%s): at most %s moved per rank, %.2f us modelled\n",
                run.begin + 1, run.end, group.str().c_str(),
                most.calls ? "one all_to_all" : "point-to-point", human_bytes(static_cast<double>(most.bus_bytes)).c_str(),
                most.time_us);
  }
}

}  // namespace

/// MemAvailable of /proc/meminfo in bytes (0 when unknown).
std::int64_t available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  std::int64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

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
        a != "--backend" && a != "--calls" && a != "--warmup" && a != "--next")
      die("unknown argument '" + a + "'");
    if (i + 1 >= argc) die(a + " needs a value");
    if (a == "--link")
      links.push_back(argv[++i]);
    else
      flags[a] = argv[++i];
  }
  for (const char* need : {"--mesh", "--from", "--to", "--shape"})
    if (!flags.count(need)) die(std::string("missing ") + need);
  for (const char* only_run : {"--backend", "--calls", "--warmup", "--next"})
    if (flags.count(only_run) && !run) die(std::string(only_run) + " applies to --run; add --run or drop it");
  const std::string backend = flags.count("--backend") ? flags["--backend"] : "threads";
  if (backend != "threads" && backend != "mpi")
    die("--backend: unknown backend '" + backend + "'; use threads (in-process ranks) or mpi (under mpirun)");
#ifdef TESSERA_HAS_MPI
  if (backend == "mpi" && !under_mpi)
    die("--backend mpi: not started by mpirun; run it as mpirun -np RANKS tessera-plan ... --backend mpi");
  if (backend == "threads" && under_mpi && run)
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

  cost_model cm;
  for (const std::string& l : links) {
    const auto kv = split(l, '=');
    const auto it = kv.size() == 2 ? std::find(axis_names.begin(), axis_names.end(), kv[0]) : axis_names.end();
    if (it == axis_names.end()) die("--link: write AXIS=GBPS[:HOP_US] with an axis of the mesh (got '" + l + "')");
    const auto bw = split(kv[1], ':');
    char* end = nullptr;
    const double gbps = std::strtod(bw[0].c_str(), &end);
    if (!(gbps > 0) || *end) die("--link: bandwidth must be a positive number of GB/s (got '" + bw[0] + "')");
    double hop = 0.6;
    if (bw.size() > 1) {
      hop = std::strtod(bw[1].c_str(), &end);
      if (!(hop >= 0) || *end) die("--link: hop latency must be a number of microseconds (got '" + bw[1] + "')");
    }
    cm = cm.with_axis(static_cast<int>(it - axis_names.begin()), gbps, hop);
  }

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
    q.times.calls = flags.count("--calls") ? static_cast<int>(parse_count(flags["--calls"], "--calls"))
                                           : plan_tool::default_calls(g.numel() * elem);
    if (flags.count("--warmup")) {
      const std::string& w = flags["--warmup"];
      q.times.warmup = w == "0" ? 0 : static_cast<int>(parse_count(w, "--warmup"));
  }
  if (q.times.calls > 100000 || q.times.warmup > 100000) die("--calls/--warmup: at most 100000");
  cs = bench::candidate_plans(src, dst, m, g, elem, cm, next_best, names);
  {  // memory: threads run every rank in this process; MPI processes share this node
    const std::int64_t per_rank = plan_tool::bytes_per_rank(q, cs);
    std::int64_t here = world_size(m);
    if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); local && backend == "mpi") here = std::atoll(local);
    const std::int64_t avail = available_memory();
    if (avail > 0 && per_rank * here > avail)
      die("--shape " + flags["--shape"] + ": running it needs about " + human_bytes(static_cast<double>(per_rank * here)) +
          " on this machine (" + std::to_string(here) + " ranks here, " + human_bytes(static_cast<double>(per_rank)) +
          " each), but " + human_bytes(static_cast<double>(avail)) + " is available; give a smaller --shape");
  }
#ifdef TESSERA_HAS_MPI
  if (backend == "mpi" && mpi_size != world_size(m))
    die("--mesh " + flags["--mesh"] + " has " + std::to_string(world_size(m)) + " ranks, but mpirun started " +
        std::to_string(mpi_size) + " processes; run mpirun -np " + std::to_string(world_size(m)) + " (or give a mesh of " +
        std::to_string(mpi_size) + " ranks)");
#endif
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
  comm::any_communicator world;
#ifdef TESSERA_HAS_MPI
  if (backend == "mpi") {
    comm::mpi_options o;
    o.check_calls = false;  // timing: no agreement round before each collective
    world = comm::any_communicator(comm::mpi_communicator(MPI_COMM_WORLD, o));
  }
#endif
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
