// train_llama's single-rank loop, shared by the CPU run (train_llama.cpp) and the GPU run
// (train_llama_cuda.cu): resuming from and saving distributed checkpoints (--checkpoint.*),
// every step's progress line and metrics, then the trace; and what the recipe runs share
// with it (parallel_run.hpp): the naming of trace tracks and the checkpoint lines.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <tessera/core/trace.hpp>
#include <tessera/io/checkpoint_io.hpp>
#include <tessera/train/checkpoint.hpp>
#include <tessera/train/data.hpp>
#include <tessera/train/metrics.hpp>
#include <tessera/train/trainer.hpp>

namespace train_llama_cli {

/// Names the tracks of `ranks` ranks: a process per rank, its compute and its collectives.
inline void name_tracks(tessera::trace::recorder& t, int ranks) {
  for (int r = 0; r < ranks; ++r) {
    t.name_track(r, -1, "rank " + std::to_string(r));
    t.name_track(r, 0, "compute");
    t.name_track(r, 1, "collectives");
  }
}

/// Whether --checkpoint.initial_load_path `p` names a tessera checkpoint (the checkpointer
/// loads its weights) rather than Hugging Face safetensors (read before training).
inline bool names_checkpoint(const std::string& p) {
  return !p.empty() && tessera::io::checkpoint::checkpoint_in(p).has_value();
}

/// Loads the newest complete checkpoint in the options' folder, if any, or the one of
/// --checkpoint.load_step (collective), and says so on the lead rank, with what
/// --checkpoint.exclude_from_loading left out; returns the step the run goes on from.
template <class Model>
std::int64_t resume_run(tessera::train::checkpointer<Model>& ck, const tessera::train::basic_trainer<Model>& tr,
                        bool lead) {
  const auto from = ck.resume();
  if (!from && ck.initial() && lead)
    std::printf("loaded the weights of %s (checkpoint.initial_load_path); training starts at step 0 with a fresh "
                "optimizer\n",
                ck.initial()->string().c_str());
  if (from && lead) {
    std::printf("resumed from %s at step %lld (read %.2f MiB on rank 0)",
                tessera::io::checkpoint::step_folder(ck.options().folder, *from).string().c_str(),
                static_cast<long long>(*from), static_cast<double>(ck.read_bytes()) / (1 << 20));
    const tessera::train::load_exclusions& x = ck.options().exclude;
    std::string left;
    for (const auto& [on, what] : {std::pair{x.model, "the weights"}, {x.optimizer, "the optimizer's moments"},
                                   {x.lr_scheduler, "the schedule's progress"}, {x.dataloader, "the data position"},
                                   {x.train_state, "the step"}})
      if (on) left += std::string(left.empty() ? "" : ", ") + what;
    if (x.any())
      std::printf("; not loaded: %s; training goes on from step %lld, the LR schedule from its step %lld, AdamW "
                  "from its step %lld",
                  left.c_str(), static_cast<long long>(tr.step()), static_cast<long long>(tr.step() - tr.schedule_origin()),
                  static_cast<long long>(tr.step() - tr.optimizer_origin()));
    std::printf("\n");
  }
  return tr.step();
}

/// Saves after `step` when it is a checkpoint step or the last (collective); the lead rank
/// says what the save cost.
template <class Model>
void save_if_due(tessera::train::checkpointer<Model>& ck, std::int64_t step, std::int64_t steps, bool lead) {
  if (ck.options().folder.empty() || !(ck.due(step) || step == steps)) return;
  const bool model_only = step == steps && ck.options().last_save_model_only;
  ck.save(step, model_only);
  if (!lead) return;
  std::printf("checkpoint step %lld%s: %s, training blocked %.3f s (staging copy %.3f s, arena %.2f MiB), "
              "%.2f MiB from rank 0\n",
              static_cast<long long>(step), model_only ? " (the weights alone)" : "",
              ck.options().mode == tessera::train::async_mode::async ? "writing in the background" : "committed",
              ck.last().blocked_s, ck.last().staging_s, static_cast<double>(ck.last().staging_bytes) / (1 << 20),
              static_cast<double>(ck.last().bytes) / (1 << 20));
}

/// Runs the steps of `tr` left after resuming from `ckpt.folder` (when one is named), printing
/// each step's line, writing its metrics to `jsonl` and saving the checkpoints that are due;
/// records the run's events and writes them to `trace_file` when one is named.
template <class Model>
void run_steps(Model& model, tessera::train::basic_trainer<Model>& tr, tessera::train::batch_loader& loader,
               const tessera::train::checkpoint_options& ckpt, tessera::train::jsonl_writer& jsonl,
               const std::string& trace_file) {
  tessera::train::checkpointer<Model> ck(model, tr, loader, ckpt);
  tessera::trace::recorder events;
  tessera::trace::bind traced(trace_file.empty() ? nullptr : &events, 0, 0);
  name_tracks(events, 1);
  for (std::int64_t s = resume_run(ck, tr, true); s < tr.steps(); ++s) {
    const auto m = tr.train_step();
    save_if_due(ck, m.step, tr.steps(), true);  // (before the step's line, as a recipe's run says it)
    std::printf("%s\n", tessera::train::progress_line(m).c_str());
    std::fflush(stdout);
    jsonl.write(m);
  }
  ck.finish();  // the last asynchronous save is committed before the run ends
  if (!ckpt.folder.empty()) std::printf("checkpoints in %s\n", ckpt.folder.c_str());
  if (!trace_file.empty()) {
    events.write(trace_file);
    std::printf("wrote the trace (%zu events) to %s\n", events.size(), trace_file.c_str());
  }
}

}  // namespace train_llama_cli
