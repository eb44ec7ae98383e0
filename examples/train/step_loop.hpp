// train_llama's single-rank loop, shared by the CPU run (train_llama.cpp) and the GPU run
// (train_llama_cuda.cu): every step's progress line and metrics, then the trace; and the
// naming of trace tracks, which the recipe runs use too (parallel_run.hpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include <tessera/core/trace.hpp>
#include <tessera/train/metrics.hpp>

namespace train_llama_cli {

/// Names the tracks of `ranks` ranks: a process per rank, its compute and its collectives.
inline void name_tracks(tessera::trace::recorder& t, int ranks) {
  for (int r = 0; r < ranks; ++r) {
    t.name_track(r, -1, "rank " + std::to_string(r));
    t.name_track(r, 0, "compute");
    t.name_track(r, 1, "collectives");
  }
}

/// Runs `steps` steps of `tr`, printing each step's line and writing its metrics to `jsonl`;
/// records the run's events and writes them to `trace_file` when one is named.
template <class Trainer>
void run_steps(Trainer& tr, std::int64_t steps, tessera::train::jsonl_writer& jsonl, const std::string& trace_file) {
  tessera::trace::recorder events;
  tessera::trace::bind traced(trace_file.empty() ? nullptr : &events, 0, 0);
  name_tracks(events, 1);
  for (std::int64_t s = 0; s < steps; ++s) {
    const auto m = tr.train_step();
    std::printf("%s\n", tessera::train::progress_line(m).c_str());
    std::fflush(stdout);
    jsonl.write(m);
  }
  if (!trace_file.empty()) {
    events.write(trace_file);
    std::printf("wrote the trace (%zu events) to %s\n", events.size(), trace_file.c_str());
  }
}

}  // namespace train_llama_cli
