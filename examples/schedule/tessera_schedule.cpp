// tessera-schedule: generate, verify, simulate and draw a pipeline schedule.
//
//   tessera-schedule --schedule Interleaved1F1B --pp 4 --stages-per-rank 2 --microbatches 8
//                    [--costs F=1,B=2,I=1,W=1,latency=0] [--format text|json] [--svg FILE]
//                    [--lower] [--fsdp] [--csv-out FILE]
//   tessera-schedule --csv FILE [--stages-per-rank V] ...      (a user table, PyTorch's CSV)
//   tessera-schedule --recipe debug_3d [--pp P] ...             (a recipe's schedule and stage split)
//
// Costs are per full stage (what one rank computes for one microbatch when it holds a
// single stage) and are divided by the stages per rank, as in the PyTorch comparison.
// Exit status: 0 valid, 2 bad arguments or unreadable input, 3 the schedule is invalid.
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <tessera/core/error.hpp>
#include <tessera/pipeline/pipeline.hpp>
#include <tessera/train/recipe.hpp>
#include <tessera/train/recipes.hpp>

namespace tp = tessera::pipeline;

namespace {

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "tessera-schedule: " << msg << "\n(run tessera-schedule --help for the flags)\n";
  std::exit(2);
}

void print_help() {
  std::cout << "usage: tessera-schedule --schedule NAME --pp P --microbatches M [--stages-per-rank V]\n"
               "                        [--costs F=1,B=2,I=1,W=1,latency=0] [--format text|json]\n"
               "                        [--svg FILE] [--lower] [--fsdp] [--csv-out FILE]\n"
               "       tessera-schedule --csv FILE [--stages-per-rank V] [...]\n"
               "       tessera-schedule --recipe NAME [--pp P] [...]   (the recipe's schedule and stage split;\n"
               "                        --pp only for a dynamic pp axis)\n"
               "schedules: GPipe 1F1B Interleaved1F1B LoopedBFS InterleavedZeroBubble ZBVZeroBubble DualPipeV\n"
               "--stages-per-rank defaults to 2 for ZBVZeroBubble and DualPipeV, 1 otherwise.\n"
               "--costs are per full stage and divided by the stages per rank.\n"
               "--lower adds SEND/RECV actions (and with --fsdp, UNSHARD/RESHARD/REDUCE_GRAD).\n"
               "exit status: 0 valid, 2 bad arguments or input, 3 invalid schedule\n";
}

int parse_int(std::string_view flag, std::string_view text, int lo, int hi) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    usage_error(std::string(flag) + " expects an integer, got '" + std::string(text) + "'");
  if (v < lo || v > hi)
    usage_error(std::string(flag) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                ", got " + std::to_string(v));
  return v;
}

tp::costs parse_costs(std::string_view text) {
  tp::costs c;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      usage_error("--costs expects KEY=VALUE items separated by commas (keys F, B, I, W, latency), got '" +
                  std::string(item) + "'");
    const std::string key(item.substr(0, eq)), val(item.substr(eq + 1));
    char* end = nullptr;
    const double d = std::strtod(val.c_str(), &end);
    if (val.empty() || end != val.c_str() + val.size() || !(d >= 0) || d > 1e12)
      usage_error("--costs: " + key + " must be a number >= 0, got '" + val + "'");
    if (key == "F") c.F = d;
    else if (key == "B") c.B = d;
    else if (key == "I") c.I = d;
    else if (key == "W") c.W = d;
    else if (key == "latency") c.latency = d;
    else usage_error("--costs: unknown key '" + key + "' (use F, B, I, W, latency)");
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return c;
}

std::string json_array(const auto& v) {
  std::ostringstream o;
  o << '[';
  for (std::size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
  o << ']';
  return o.str();
}

std::string json_string(std::string_view s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o + "\"";
}

}  // namespace

static int run(int argc, char** argv) {
  std::string name, csv_in, svg, csv_out, recipe, split, split_json, format = "text";
  int pp = -1, v = -1, m = -1;
  tp::costs full{};
  bool lower = false, fsdp = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) usage_error(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      print_help();
      return 0;
    } else if (a == "--schedule") name = value();
    else if (a == "--csv") csv_in = value();
    else if (a == "--recipe") recipe = value();
    else if (a == "--pp") pp = parse_int(a, value(), 1, 4096);
    else if (a == "--stages-per-rank") v = parse_int(a, value(), 1, tp::max_stages_per_rank);
    else if (a == "--microbatches") m = parse_int(a, value(), 1, 1 << 16);
    else if (a == "--costs") full = parse_costs(value());
    else if (a == "--format") {
      format = value();
      if (format != "text" && format != "json") usage_error("--format must be text or json, got '" + format + "'");
    } else if (a == "--svg") svg = value();
    else if (a == "--csv-out") csv_out = value();
    else if (a == "--lower") lower = true;
    else if (a == "--fsdp") fsdp = lower = true;
    else usage_error("unknown argument '" + std::string(a) + "'");
  }
  tp::schedule s;
  std::string label;
  try {
    if (!recipe.empty()) {
      if (!name.empty() || !csv_in.empty()) usage_error("give one of --recipe, --schedule and --csv");
      const bool known = tessera::recipes::visit(recipe, [&]<class R>() {
        using traits = tessera::recipe_traits<R>;
        if constexpr (traits::spec.pp < 0) {
          usage_error("recipe " + recipe + " has no pipeline_parallel policy");
        } else {
          constexpr std::int64_t static_pp = R::mesh::static_shape[traits::spec.pp];
          if (static_pp != tessera::dyn && pp >= 0 && pp != static_pp)
            usage_error("recipe " + recipe + " has pp = " + std::to_string(static_pp) + "; drop --pp");
          if (static_pp == tessera::dyn && pp < 0) usage_error("recipe " + recipe + " has a dynamic pp axis; give --pp P");
          if (static_pp != tessera::dyn) pp = static_cast<int>(static_pp);
          if (m > 0 || v > 0) usage_error("--microbatches and --stages-per-rank come from the recipe; drop them");
          const tessera::parallel::pp_plan plan = traits::pipeline(pp);
          const tessera::parallel::pipeline_layout layout(plan, traits::pipeline_settings(), 0);
          s = tessera::parallel::pp_compute_schedule(traits::pipeline_settings(), plan);
          v = plan.v;
          split = layout.describe();
          split_json = "[";
          for (int st = 0; st < plan.stages; ++st)
            split_json += std::string(st ? "," : "") + "{\"stage\":" + std::to_string(st) +
                          ",\"rank\":" + std::to_string(layout.rank_of(st)) + ",\"first_layer\":" +
                          std::to_string(plan.first_layer(st)) + ",\"last_layer\":" + std::to_string(plan.last_layer(st)) +
                          ",\"embedding\":" + (st == 0 ? "true" : "false") +
                          ",\"head\":" + (st == plan.stages - 1 ? "true" : "false") + "}";
          split_json += "]";
          label = recipe + ": " +
                  (plan.table ? std::string("user table") : std::string(tp::schedule_name(plan.kind))) +
                  " pp=" + std::to_string(pp) + " v=" + std::to_string(v) + " m=" + std::to_string(plan.m);
        }
      });
      if (!known) usage_error("unknown --recipe '" + recipe + "'; choose one of " + tessera::recipes::names());
    } else if (!csv_in.empty()) {
      if (!name.empty()) usage_error("give either --schedule or --csv, not both");
      s = tp::read_csv(tp::read_file(csv_in));
      if (v < 0) v = s.ranks > 0 && s.stages % s.ranks == 0 ? s.stages / s.ranks : 1;
      label = "table " + csv_in;
    } else {
      if (name.empty()) usage_error("--schedule NAME is required (or --csv FILE)");
      tp::schedule_kind k{};
      if (!tp::parse_schedule_kind(name, k))
        usage_error("unknown schedule '" + name +
                    "'; use one of GPipe 1F1B Interleaved1F1B LoopedBFS InterleavedZeroBubble ZBVZeroBubble DualPipeV");
      if (pp < 0) usage_error("--pp P (pipeline ranks) is required");
      if (m < 0) usage_error("--microbatches M is required");
      if (v < 0) v = (k == tp::schedule_kind::zbv_zero_bubble || k == tp::schedule_kind::dualpipe_v) ? 2 : 1;
      const std::string_view why = tp::check_arguments(k, pp, v, m);
      if (!why.empty()) usage_error(std::string(name) + ": " + std::string(why));
      if (static_cast<long long>(pp) * v * m > 4'000'000) usage_error("pp * stages-per-rank * microbatches must be at most 4000000");
      s = tp::generate(k, pp, v, m, tp::per_chunk(full, v));
      label = name + " pp=" + std::to_string(pp) + " v=" + std::to_string(v) + " m=" + std::to_string(m);
    }
  } catch (const tp::schedule_error& e) {
    std::cerr << "tessera-schedule: " << e.what() << "\n";
    return 2;
  } catch (const tessera::error& e) {
    std::cerr << "tessera-schedule: " << e.what() << "\n";
    return 2;
  }
  const tp::costs c = tp::per_chunk(full, v);
  tp::verify_result vr = tp::verify(s);
  if (vr.ok && lower) {
    s = tp::lower(s, {.fsdp = fsdp});
    vr = tp::verify(s);
  }
  const tp::simulation sim = tp::simulate(s, c);
  const bool valid = vr.ok && sim.ok;
  try {
    if (!csv_out.empty()) tp::write_file_atomic(csv_out, tp::to_csv(s));
    if (!svg.empty() && valid) tp::write_file_atomic(svg, tp::to_svg(s, sim, label));
  } catch (const tp::schedule_error& e) {
    std::cerr << "tessera-schedule: " << e.what() << "\n";
    return 2;
  }
  if (format == "json") {
    std::cout << "{\"schedule\":" << json_string(label) << ",\"pp\":" << s.ranks << ",\"stages_per_rank\":" << v
              << ",\"microbatches\":" << s.microbatches << ",\"valid\":" << (valid ? "true" : "false")
              << ",\"error\":" << json_string(vr.ok ? "" : vr.message()) << ",\"makespan\":" << sim.makespan
              << ",\"bubble\":" << sim.bubble << ",\"idle\":" << json_array(sim.idle)
              << ",\"busy\":" << json_array(sim.busy) << ",\"peak_activations\":" << json_array(sim.peak_activations)
              << (split_json.empty() ? std::string() : ",\"stages\":" + split_json) << "}\n";
  } else {
    std::cout << split << tp::format_grid(s);
    if (valid)
      std::cout << "makespan " << sim.makespan << "  bubble " << 100 * sim.bubble << "%  peak activations per rank "
                << json_array(sim.peak_activations) << "  idle per rank " << json_array(sim.idle) << "\n";
    else
      std::cout << "INVALID: " << vr.message() << "\n";
  }
  return valid ? 0 : 3;
}

int main(int argc, char** argv) {
  // read_csv bounds what a table makes verify and simulate allocate; a schedule that still
  // does not fit in memory is reported, not a crash.
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "tessera-schedule: out of memory for this schedule; use fewer stages or microbatches\n";
    return 2;
  }
}
