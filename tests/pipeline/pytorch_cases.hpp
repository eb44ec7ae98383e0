// Reader of the PyTorch schedule dumps in tests/pipeline/data (see dump_pytorch_schedules.py).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <tessera/pipeline/schedule.hpp>
#include <vector>

namespace tessera_test {

struct pytorch_case {
  int p = 0, v = 0, m = 0;
  bool raises = false;
  std::string reason;              ///< PyTorch's exception text when it raises
  std::vector<std::string> rows;   ///< one CSV row per rank
};

inline std::vector<pytorch_case> read_pytorch_cases(const std::string& path) {
  std::ifstream in(path);
  std::vector<pytorch_case> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("#case ", 0) == 0 || line.rfind("#raises ", 0) == 0) {
      pytorch_case c;
      c.raises = line[1] == 'r';
      std::istringstream is(line.substr(c.raises ? 8 : 6));
      is >> c.p >> c.v >> c.m;
      if (c.raises) std::getline(is, c.reason);
      else
        for (int r = 0; r < c.p && std::getline(in, line); ++r) c.rows.push_back(line);
      out.push_back(std::move(c));
    }
  }
  return out;
}

inline tessera::pipeline::table_result to_schedule(const pytorch_case& c) {
  std::vector<std::string_view> views(c.rows.begin(), c.rows.end());
  return tessera::pipeline::from_table(views);
}

}  // namespace tessera_test

#include <tessera/pipeline/generators.hpp>
#include <tessera/pipeline/simulate.hpp>
#include <tessera/pipeline/verify.hpp>

namespace tessera_test {

/// One case of the comparison: PyTorch's schedule and ours, simulated with F=1, B=2,
/// I=W=1 per full stage divided by the stages per rank.
struct comparison {
  bool torch_raises = false;
  bool torch_valid = false;        ///< PyTorch's order passes tessera's verifier
  std::string torch_problem;       ///< the verifier's sentence when it does not
  bool ours_accepts = false;       ///< tessera's generator takes these arguments
  bool ours_valid = false;
  double ours_makespan = 0, torch_makespan = 0;
  std::vector<int> ours_peak, torch_peak;
  bool peak_no_worse = true;
};

inline comparison compare(tessera::pipeline::schedule_kind k, const pytorch_case& c) {
  namespace tp = tessera::pipeline;
  comparison r;
  r.torch_raises = c.raises;
  const tp::costs cost = tp::per_chunk({}, c.v);
  r.ours_accepts = tp::check_arguments(k, c.p, c.v, c.m).empty();
  if (r.ours_accepts) {
    const tp::schedule s = tp::generate(k, c.p, c.v, c.m);
    const tp::simulation sim = tp::simulate(s, cost);
    r.ours_valid = tp::verify(s).ok && sim.ok;
    r.ours_makespan = sim.makespan;
    r.ours_peak = sim.peak_activations;
  }
  if (!c.raises) {
    const tp::table_result t = to_schedule(c);
    tp::verify_result vr = t.ok ? tp::verify(t.value) : tp::verify_result{};
    if (!t.ok) r.torch_problem = "unparsable";
    else if (!vr.ok) r.torch_problem = std::string(vr.message());
    r.torch_valid = t.ok && vr.ok;
    if (r.torch_valid) {
      const tp::simulation sim = tp::simulate(t.value, cost);
      r.torch_makespan = sim.makespan;
      r.torch_peak = sim.peak_activations;
      for (std::size_t i = 0; i < r.ours_peak.size() && i < r.torch_peak.size(); ++i)
        if (r.ours_peak[i] > r.torch_peak[i]) r.peak_no_worse = false;
    }
  }
  return r;
}

inline std::string data_file(const std::string& dir, tessera::pipeline::schedule_kind k) {
  return dir + "/pytorch_" + std::string(tessera::pipeline::schedule_name(k)) + ".csv";
}

}  // namespace tessera_test
