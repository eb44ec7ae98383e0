// tessera/train/checkpoint_options.hpp: what a checkpointer (train/checkpoint.hpp) is told --
// TorchTitan's [checkpoint] settings as values: the folder, interval, async mode, what a
// resume leaves out, the model-only last save, the initial load -- and what a save cost.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/core/dtype.hpp>
#include <tessera/core/error.hpp>
#include <tessera/io/checkpoint_format.hpp>

namespace tessera::train {

enum class async_mode : std::uint8_t { disabled, async };

inline async_mode parse_async_mode(std::string_view s) {
  if (s == "disabled") return async_mode::disabled;
  if (s == "async") return async_mode::async;
  throw error("--checkpoint.async_mode '" + std::string(s) + "' is not one of disabled|async");
}

/// What a resume leaves as a new run starts it (TorchTitan's checkpoint.exclude_from_loading).
struct load_exclusions {
  bool model = false;         ///< the weights (as initialised)
  bool optimizer = false;     ///< AdamW's moments (zero, a fresh optimizer)
  bool lr_scheduler = false;  ///< the schedule's progress: warmup and decay start over at the resumed step
  bool dataloader = false;    ///< the data position (and its checks: any global batch, seq_len, seed)
  bool train_state = false;   ///< the step: training starts at step 0
  bool any() const { return model || optimizer || lr_scheduler || dataloader || train_state; }
};

/// The exclusions named in `names` (model, optimizer, lr_scheduler, dataloader, train_state).
inline load_exclusions parse_exclusions(const std::vector<std::string>& names) {
  load_exclusions x;
  for (const auto& n : names) {
    bool* f = n == "model" ? &x.model : n == "optimizer" ? &x.optimizer : n == "lr_scheduler" ? &x.lr_scheduler
            : n == "dataloader" ? &x.dataloader : n == "train_state" ? &x.train_state : nullptr;
    if (!f)
      throw error("--checkpoint.exclude_from_loading: '" + n +
                  "' is not one of model, optimizer, lr_scheduler, dataloader, train_state");
    *f = true;
  }
  return x;
}

/// TorchTitan's [checkpoint] section (the names of its flags and TOML keys).
struct checkpoint_options {
  std::string folder;              ///< --checkpoint.folder (empty: no checkpoints)
  std::int64_t interval = 0;       ///< --checkpoint.interval: save every N steps (0: only when asked)
  int keep_latest_k = 0;           ///< --checkpoint.keep_latest_k (0: keep all)
  async_mode mode = async_mode::disabled;  ///< --checkpoint.async_mode
  double timeout_s = 600;          ///< how long rank 0 waits for the other ranks' shards
  bool fsync = false;              ///< fsync every file before it is renamed into place
  /// Each saved block larger than this also records each chunk's checksum, so that a load
  /// into another mesh reads only the chunks holding its blocks (io/checkpoint_format.hpp).
  std::uint64_t chunk_bytes = io::checkpoint::default_chunk_bytes;
  /// --checkpoint.load_step: resume() loads this step's checkpoint (an error when there is
  /// none), -1 the latest.
  std::int64_t load_step = -1;
  /// --checkpoint.exclude_from_loading: what resume() and load() leave as they are.
  load_exclusions exclude{};
  /// --checkpoint.last_save_model_only: the run's last save holds the weights alone (no AdamW
  /// moments), a third of the bytes: a model to export or to start a new run from, not to
  /// resume (step_loop's save_if_due asks for it; save(step, true)).
  bool last_save_model_only = false;
  /// --checkpoint.export_dtype: the values of that model-only last save, f32 or bf16 (rounded
  /// to nearest even; a load widens them to f32). Full checkpoints are always f32.
  dtype export_dtype = dtype::f32;
  /// --checkpoint.initial_load_path when it names a tessera checkpoint (a step-<N> folder, or
  /// a folder of them: the newest): a run with nothing to resume in `folder` starts from its
  /// weights, at step 0 with a fresh optimizer and data (TorchTitan's initial_load_path with
  /// initial_load_model_only). Empty: none.
  std::string initial_load_path{};
  /// Called by the writer (the background thread in async mode) with (step, rank) before
  /// this rank writes its shard; what it throws fails the save as a write error would.
  /// For fault-injection tests (a rank that fails or dies in the middle of a save).
  std::function<void(std::int64_t, int)> before_write = nullptr;
};

/// What the last save cost this rank.
struct checkpoint_stats {
  std::int64_t step = 0;
  double blocked_s = 0;       ///< time save() kept training from going on (sync: all of it)
  double staging_s = 0;       ///< the staging copy's part of it
  double write_s = 0;         ///< the file writing (sync: inside blocked_s; async: in the background)
  std::uint64_t bytes = 0;    ///< tensor bytes this rank wrote
  std::uint64_t staging_bytes = 0;  ///< the staging arena (kept from save to save; estimate_checkpoint_staging)
};

}  // namespace tessera::train
