// Prints the tables of docs/schedules.md: the comparison with PyTorch's generators (on
// the dumps in tests/pipeline/data) and the simulator's bubble table.
//   compare_pytorch DATA_DIR            comparison table
//   compare_pytorch --bubbles           bubble table
#include <algorithm>
#include <cstdio>
#include <string>
#include <tessera/pipeline/pipeline.hpp>

#include "pytorch_cases.hpp"

namespace tp = tessera::pipeline;

static int bubbles() {
  std::printf("| schedule | p | v | m | makespan | bubble | peak activations (rank 0 .. p-1) |\n|---|---|---|---|---|---|---|\n");
  for (tp::schedule_kind k : tp::all_schedule_kinds)
    for (int p : {4, 8})
      for (int m : {p, 2 * p, 4 * p}) {
        const bool vshape = k == tp::schedule_kind::zbv_zero_bubble || k == tp::schedule_kind::dualpipe_v;
        const int v = vshape || k == tp::schedule_kind::interleaved_1f1b || k == tp::schedule_kind::looped_bfs ||
                              k == tp::schedule_kind::interleaved_zero_bubble
                          ? 2
                          : 1;
        const tp::simulation s = tp::simulate(tp::generate(k, p, v, m), tp::per_chunk({}, v));
        std::string peaks;
        for (int x : s.peak_activations) {
          if (!peaks.empty()) peaks.push_back(' ');
          peaks.append(std::to_string(x));
        }
        std::printf("| %s | %d | %d | %d | %.2f | %.1f%% | %s |\n", std::string(tp::schedule_name(k)).c_str(), p, v, m,
                    s.makespan, 100 * s.bubble, peaks.c_str());
      }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: compare_pytorch DATA_DIR | --bubbles\n");
    return 2;
  }
  if (std::string(argv[1]) == "--bubbles") return bubbles();
  std::printf("| schedule | cases | PyTorch raises, ours valid | PyTorch order invalid | ours faster | equal | ours slower "
              "| worst ratio | peak memory no worse |\n|---|---|---|---|---|---|---|---|---|\n");
  for (tp::schedule_kind k : tp::all_schedule_kinds) {
    const auto cases = tessera_test::read_pytorch_cases(tessera_test::data_file(argv[1], k));
    if (cases.empty()) {
      std::fprintf(stderr, "compare_pytorch: no data for %s in %s\n", std::string(tp::schedule_name(k)).c_str(), argv[1]);
      return 2;
    }
    int n = 0, raised = 0, invalid = 0, faster = 0, equal = 0, slower = 0, mem_ok = 0, compared = 0;
    double worst = 0;
    for (const auto& c : cases) {
      const tessera_test::comparison r = tessera_test::compare(k, c);
      if (!r.ours_accepts) continue;
      ++n;
      if (c.raises) {
        raised += r.ours_valid;
        continue;
      }
      if (!r.torch_valid) {
        ++invalid;
        continue;
      }
      ++compared;
      mem_ok += r.peak_no_worse;
      const double ratio = r.ours_makespan / r.torch_makespan;
      worst = std::max(worst, ratio);
      if (ratio < 1 - 1e-9) ++faster;
      else if (ratio > 1 + 1e-9) ++slower;
      else ++equal;
    }
    std::printf("| %s | %d | %d | %d | %d | %d | %d | %.3f | %d / %d |\n", std::string(tp::schedule_name(k)).c_str(), n,
                raised, invalid, faster, equal, slower, worst, mem_ok, compared);
  }
  return 0;
}
