// tessera/train/checkpoint.hpp: distributed checkpoints of a training run -- TorchTitan's
// CheckpointManager over the format of io/checkpoint_format.hpp (docs/checkpoints.md).
// tessera-requires: openblas
//
// `checkpointer<Model>` saves and loads what makes a resumed run continue exactly: the
// master weights (each rank's stored blocks, Model::stored(i) over Model::storage_box(i)),
// AdamW's moments (laid out as the stored blocks), the step, the LR schedule's settings and
// the data loader's position (epoch, window, seed: the same on every rank, since every rank
// reads the global batch, so it reshards to any data-parallel degree). There is no other
// random state: the data order is a function of (seed, epoch).
//   - save(step): every rank adds its blocks to a shard_writer (async: copied into a
//     staging arena that is allocated once and kept; sync: the live state) and writes
//     "shard-<rank>.safetensors" into "step-<N>.tmp"; a block replicated on several ranks
//     is written by the lowest of them only (one all-gather of the boxes, on the
//     calling thread). Rank 0 waits for every rank's box list (a timeout names the ranks
//     that did not arrive), writes metadata.json, renames the folder (the commit) and keeps
//     the newest keep_latest_k checkpoints. Sync mode does all of it before returning (and
//     ends with a barrier); async mode returns after the staging copy and lets a background
//     thread write and commit; the next save (and finish()) waits for it first.
//   - load(dir) / resume(): every rank reads the saved boxes that intersect its own storage
//     boxes (of a larger box only the chunks that hold its part: chunk_bytes), checks
//     checksums, names and shapes, and restores the trainer's step and the loader's position.
// A single-rank model (basic_llama_model<K>: llama_model, device_llama; no mesh) writes the
// same files as rank 0 of a world of one, each tensor whole: its checkpoints resume on any
// recipe and mesh, and a recipe's resume on one rank.
// A model on a device backend (parallel_llama<R, cuda_kernels>: state in GPU memory, an NCCL
// mesh) checkpoints the same files: its blocks are copied to the host staging arena in both
// modes (the backend's to_host), loads go through a host buffer (to_device), and the few
// integers the ranks exchange travel through device memory, which is what NCCL moves.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <tessera/comm/any_communicator.hpp>
#include <tessera/comm/communicator.hpp>
#include <tessera/core/error.hpp>
#include <tessera/io/checkpoint_format.hpp>
#include <tessera/io/checkpoint_io.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/model/llama_params.hpp>
#include <tessera/tensor/memory.hpp>
#include <tessera/train/data.hpp>
#include <tessera/train/trainer.hpp>
#include <tessera/train/checkpoint_options.hpp>

namespace tessera::train {

template <class Model>
class checkpointer {
  using K = typename kernels_of<Model>::type;
  using space = typename K::space;
  static constexpr bool on_host = space::host_accessible;
  static constexpr bool on_mesh = requires(Model& m) { m.mesh().world(); };

 public:
  checkpointer(Model& model, basic_trainer<Model>& trainer, batch_loader& loader, checkpoint_options opt)
      : m_(model), tr_(trainer), loader_(loader), opt_(std::move(opt)) {}
  checkpointer(const checkpointer&) = delete;
  checkpointer& operator=(const checkpointer&) = delete;
  ~checkpointer() {
    cancel_ = true;  // a rank 0 still waiting for the others' shards gives up (the run is stopping)
    if (bg_.joinable()) bg_.join();  // errors of a last async save surface in finish()
  }

  const checkpoint_options& options() const noexcept { return opt_; }
  const checkpoint_stats& last() const noexcept { return last_; }
  /// Whether the trainer's step `step` (steps done) is a checkpoint step.
  bool due(std::int64_t step) const { return !opt_.folder.empty() && opt_.interval > 0 && step % opt_.interval == 0; }

  /// Saves the state after `step` steps (collective: every rank calls it); with `model_only`
  /// the weights alone (the state then says "contents": "model").
  void save(std::int64_t step, bool model_only = false) {
    check(!opt_.folder.empty(), "checkpoint: no --checkpoint.folder given");
    const auto t0 = clock::now();
    finish();  // a new checkpoint waits for the previous one
    const int rank = rank_of();
    const std::int64_t nworld = world_size();
    if (writes_.empty()) writes_ = who_writes();  // collective, once: the storage boxes do not change
    const std::filesystem::path folder = opt_.folder;
    std::filesystem::path tmp;
    if (rank == 0) tmp = io::checkpoint::begin_save(folder, step);
    barrier();  // the folder exists before anyone writes into it
    tmp = io::checkpoint::temp_folder(folder, step);
    const auto t1 = clock::now();
    auto w = std::make_unique<io::checkpoint::shard_writer>(opt_.chunk_bytes);
    stage_into(*w, model_only);  // the blocked part: copies into the arena kept from the last save
    last_ = {};
    last_.step = step;
    last_.staging_s = seconds(t1, clock::now());
    last_.bytes = w->bytes();
    last_.staging_bytes = arena_.size() * sizeof(float);
    staged_ = std::move(w);
    auto job = [this, w = staged_.get(), tmp, folder, step, rank, nworld, st = state(step, model_only)]() {
      const auto t = clock::now();
      try {
        if (opt_.before_write) opt_.before_write(step, rank);
        w->write(tmp, rank, opt_.fsync);
      } catch (const std::exception& e) {
        io::checkpoint::mark_failed(tmp, rank, e.what());  // rank 0 stops waiting for this rank at once
        throw;
      }
      if (rank == 0) {
        io::checkpoint::wait_for_ranks(tmp, nworld, opt_.timeout_s, &cancel_);
        io::checkpoint::commit(folder, step, nworld, st, opt_.fsync);
        io::checkpoint::prune(folder, opt_.keep_latest_k);
      }
      last_.write_s = seconds(t, clock::now());
    };
    if (opt_.mode == async_mode::async) {
      bg_ = std::thread([this, job = std::move(job)]() mutable {
        try {
          job();
        } catch (...) {
          error_ = std::current_exception();
        }
      });
    } else {
      job();
      barrier();  // every rank returns with the checkpoint committed
    }
    last_.blocked_s = seconds(t0, clock::now());
  }

  /// Waits for an asynchronous save in flight; rethrows its error.
  void finish() {
    if (bg_.joinable()) bg_.join();
    staged_.reset();
    if (error_) {
      auto e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }

  /// Checks that the folder is writable, then loads the newest complete checkpoint in it, if
  /// there is one, or the one of options().load_step (collective); returns its step.
  std::optional<std::int64_t> resume() {
    initial_.reset();
    if (opt_.folder.empty()) return load_initial();
    io::checkpoint::check_writable(opt_.folder, rank_of());  // every rank: all fail alike
    std::optional<std::filesystem::path> dir = io::checkpoint::latest(opt_.folder);
    if (opt_.load_step >= 0) {
      const auto steps = io::checkpoint::complete_steps(opt_.folder);
      if (std::find(steps.begin(), steps.end(), opt_.load_step) == steps.end()) {
        std::string have;
        for (const auto s : steps) have += (have.empty() ? "" : ", ") + std::to_string(s);
        throw error("checkpoint: --checkpoint.load_step " + std::to_string(opt_.load_step) +
                    ": there is no complete checkpoint of that step in '" + opt_.folder + "' (" +
                    (have.empty() ? "it holds none" : "complete: steps " + have) +
                    "); give one of them, or -1 for the latest");
      }
      dir = io::checkpoint::step_folder(opt_.folder, opt_.load_step);
    }
    std::int64_t mine = dir ? io::checkpoint::read_metadata(*dir).step : -1;
    std::vector<std::int64_t> all(static_cast<std::size_t>(world_size()));
    gather_i64(&mine, all.data(), 1);
    for (std::size_t r = 0; r < all.size(); ++r)
      if (all[r] != mine)
        throw error("checkpoint: ranks see different latest checkpoints in '" + opt_.folder + "' (rank " +
                    std::to_string(r) + ": step " + std::to_string(all[r]) + ", rank " +
                    std::to_string(rank_of()) + ": step " + std::to_string(mine) +
                    "); is the folder shared by every rank?");
    if (!dir) return load_initial();
    const std::int64_t step = load(*dir);
    // a run that went back (load_step, or the step not loaded) must not meet a checkpoint of
    // a step it will save: one is never overwritten, and the save would fail then
    for (const std::int64_t s : io::checkpoint::complete_steps(opt_.folder))
      if (s > tr_.step() && s <= tr_.steps() && (due(s) || s == tr_.steps()))
        throw error("checkpoint: this run goes on from step " + std::to_string(tr_.step()) + " and would save step " +
                    std::to_string(s) + ", whose checkpoint in '" + opt_.folder +
                    "' is complete and never overwritten; remove " +
                    io::checkpoint::step_folder(opt_.folder, s).string() +
                    " (and the later ones), or save into another --checkpoint.folder");
    return step;
  }

  /// Loads the checkpoint in `dir` into this rank's model, trainer and loader, but for what
  /// options().exclude names; returns its step.
  std::int64_t load(const std::filesystem::path& dir) { return load(dir, opt_.exclude); }
  /// Loads the weights alone of the checkpoint in `dir` (full or model-only, of any mesh):
  /// the trainer at step 0, AdamW and the schedule fresh, the data from its start.
  std::int64_t load_weights(const std::filesystem::path& dir) {
    return load(dir, {.model = false, .optimizer = true, .lr_scheduler = true, .dataloader = true, .train_state = true});
  }
  /// The checkpoint the last resume() took the weights from (options().initial_load_path), if
  /// it found nothing to resume and one was named.
  const std::optional<std::filesystem::path>& initial() const noexcept { return initial_; }

  /// Loads the checkpoint in `dir`, but for what `x` names; returns its step.
  std::int64_t load(const std::filesystem::path& dir, const load_exclusions& x) {
    io::checkpoint::box_reader r(dir);
    const auto& meta = r.meta();
    const std::string mpath = (dir / io::checkpoint::metadata_file).string();
    const std::int64_t n = llm().n_tensors();
    const auto contents = meta.state.find("contents");
    const bool model_only = contents != meta.state.end() && contents->second == "model";
    if (model_only && !(x.optimizer && x.lr_scheduler && x.dataloader && x.train_state))
      throw error("checkpoint: '" + mpath + "' holds the weights alone (saved with "
                  "--checkpoint.last_save_model_only): a new run can start from them with "
                  "--checkpoint.exclude_from_loading optimizer,lr_scheduler,dataloader,train_state (or from "
                  "tessera-ckpt export's safetensors with --checkpoint.initial_load_path); to resume, give "
                  "--checkpoint.load_step of an earlier full checkpoint");
    if (static_cast<std::int64_t>(meta.tensors.size()) != (model_only ? 1 : 3) * n)
      throw error("checkpoint: '" + mpath + "' holds " + std::to_string(meta.tensors.size()) +
                  " tensors; this model's checkpoint has " + std::to_string((model_only ? 1 : 3) * n) + " (" +
                  (model_only ? "the weights" : "weights and two AdamW moments") + " of " + std::to_string(n) +
                  " parameters): a checkpoint of another model");
    float* p0 = m_.params().data();
    read_bytes_ = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const box b = block(i);
      if (b.numel() == 0) continue;
      const shape_t g = param_global_shape(llm().entry(i));
      const std::string name = llm().name(i);
      const std::ptrdiff_t off = stored(i) - p0;
      float* to[3] = {stored(i), tr_.exp_avg().data() + off, tr_.exp_avg_sq().data() + off};
      const std::string names[3] = {name, "optimizer.exp_avg." + name, "optimizer.exp_avg_sq." + name};
      for (int k = 0; k < 3; ++k) {
        if (k == 0 ? x.model : x.optimizer) continue;
        if constexpr (on_host) {
          read_bytes_ += r.read(names[k], g, b, to[k]);
        } else {  // through a host buffer
          host_block_.resize(static_cast<std::size_t>(b.numel()));
          read_bytes_ += r.read(names[k], g, b, host_block_.data());
          K::to_device(to[k], host_block_.data(), b.numel());
        }
      }
    }
    if (const auto it = meta.state.find("model"); it != meta.state.end() && it->second != m_.config().name)
      throw error("checkpoint: '" + mpath + "' is a checkpoint of model " + it->second + ", this run trains " +
                  std::string(m_.config().name));
    auto get = [&](const std::string& k) -> std::int64_t {
      auto it = meta.state.find(k);
      if (it == meta.state.end()) throw error("checkpoint: '" + mpath + "' has no state '" + k + "'");
      try {
        return std::stoll(it->second);
      } catch (const std::exception&) {
        throw error("checkpoint: '" + mpath + "': state '" + k + "' is not an integer");
      }
    };
    tr_.restore_step(x.train_state ? 0 : meta.step);
    // the schedule's and AdamW's steps go on from what they had counted, or start over here
    // (a checkpoint without the counts: they had counted every step)
    auto counted = [&](const std::string& k) { return meta.state.count(k) ? get(k) : meta.step; };
    tr_.set_schedule_origin(tr_.step() - (x.lr_scheduler ? 0 : counted("lr_schedule.progress")));
    tr_.set_optimizer_origin(tr_.step() - (x.optimizer ? 0 : counted("optimizer.steps")));
    if (x.dataloader) return meta.step;
    if (get("loader.batch") != loader_.batch() || get("loader.seq_len") != loader_.seq_len())
      throw error("checkpoint: '" + mpath + "' was saved with a global batch of " + meta.state.at("loader.batch") +
                  " x seq_len " + meta.state.at("loader.seq_len") + "; this run reads " +
                  std::to_string(loader_.batch()) + " x " + std::to_string(loader_.seq_len()) +
                  ": the data position does not carry over; resume with --training.global_batch_size " +
                  meta.state.at("loader.batch") + " (on any number of data-parallel ranks) and --seq-len " +
                  meta.state.at("loader.seq_len") + ", or start the data over with --checkpoint.exclude_from_loading "
                  "dataloader");
    if (meta.state.at("loader.seed") != std::to_string(loader_.seed()) ||
        get("loader.shuffle") != (loader_.shuffled() ? 1 : 0))
      throw error("checkpoint: '" + mpath + "' was saved reading the data in the order of seed " +
                  meta.state.at("loader.seed") + "; this run's --seed gives another order; resume with the same --seed, "
                  "or start the data over with --checkpoint.exclude_from_loading dataloader");
    loader_.seek(get("loader.epoch"), get("loader.cursor"));
    return meta.step;
  }
  /// Bytes the last load read from files on this rank.
  std::uint64_t read_bytes() const noexcept { return read_bytes_; }

 private:
  using clock = std::chrono::steady_clock;
  Model& m_;
  basic_trainer<Model>& tr_;
  batch_loader& loader_;
  checkpoint_options opt_;
  checkpoint_stats last_;
  std::thread bg_;
  std::unique_ptr<io::checkpoint::shard_writer> staged_;  // the box list of the save in flight (views of arena_)
  std::optional<std::filesystem::path> initial_;  // what resume() took the weights from

  /// resume() with nothing to resume: the weights of options().initial_load_path, if named.
  std::optional<std::int64_t> load_initial() {
    if (opt_.initial_load_path.empty()) return std::nullopt;
    const auto dir = io::checkpoint::checkpoint_in(opt_.initial_load_path);
    if (!dir)
      throw error("checkpoint: initial_load_path '" + opt_.initial_load_path +
                  "' holds no complete checkpoint (no metadata.json in it or in a step-<N> folder)");
    load_weights(*dir);
    initial_ = *dir;
    return std::nullopt;
  }
  std::vector<float> arena_;   // the staging copy: allocated (and its pages touched) once, reused by every save
  std::vector<float> host_block_;  // a device model's load: one block at a time through the host
  std::vector<bool> writes_;   // who_writes(), computed at the first save
  std::atomic<bool> cancel_{false};
  std::exception_ptr error_;
  std::uint64_t read_bytes_ = 0;

  static double seconds(clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

  // What the checkpointer reads of the model: a parallel one's mesh and stored blocks, or a
  // single-rank one's whole tensors as rank 0 of a world of one.
  auto& llm() {
    if constexpr (on_mesh) return m_.model();
    else return m_;
  }
  box block(std::int64_t i) {
    if constexpr (on_mesh) return m_.storage_box(i);
    else return whole_box(param_global_shape(m_.entry(i)));
  }
  float* stored(std::int64_t i) {
    if constexpr (on_mesh) return m_.stored(i);
    else return m_.param(i);
  }
  int rank_of() {
    if constexpr (on_mesh) return m_.mesh().world().rank();
    else return 0;
  }
  std::int64_t world_size() {
    if constexpr (on_mesh) return m_.mesh().world().size();
    else return 1;
  }
  void barrier() {
    if constexpr (on_mesh) m_.mesh().world().barrier().wait();
  }

  /// all[r * n + k] = rank r's mine[k], on every rank (through device memory where the
  /// model's communicator moves device buffers).
  void gather_i64(const std::int64_t* mine, std::int64_t* all, std::size_t n) {
    if constexpr (!on_mesh) {
      std::copy(mine, mine + n, all);
    } else if constexpr (on_host) {
      m_.mesh().world().all_gather(mine, all, n, comm::dtype::i64).wait();
    } else {
      auto& world = m_.mesh().world();
      const std::size_t ranks = static_cast<std::size_t>(world.size());
      space_vector<std::int64_t, space> d(n * (ranks + 1));
      space::from_host(d.data(), mine, n * sizeof(std::int64_t));
      space::fence();
      world.all_gather(d.data(), d.data() + n, n, comm::dtype::i64).wait();
      space::to_host(all, d.data() + n, n * ranks * sizeof(std::int64_t));
    }
  }

  std::map<std::string, std::string> state(std::int64_t step, bool model_only) const {
    const lr_schedule& s = tr_.schedule();
    return {{"step", std::to_string(step)},
            {"contents", model_only ? "model" : "full"},
            {"model", std::string(m_.config().name)},
            {"lr_schedule.lr", std::to_string(s.lr)},
            {"lr_schedule.warmup", std::to_string(s.warmup)},
            {"lr_schedule.steps", std::to_string(s.steps)},
            {"lr_schedule.decay", std::to_string(static_cast<int>(s.decay))},
            {"lr_schedule.progress", std::to_string(step - tr_.schedule_origin())},
            {"optimizer.steps", std::to_string(step - tr_.optimizer_origin())},
            {"loader.epoch", std::to_string(loader_.epoch())},
            {"loader.cursor", std::to_string(loader_.cursor())},
            {"loader.batch", std::to_string(loader_.batch())},
            {"loader.seq_len", std::to_string(loader_.seq_len())},
            {"loader.seed", std::to_string(loader_.seed())},
            {"loader.shuffle", loader_.shuffled() ? "1" : "0"},
            {"rng", "none: the data order is a function of loader.seed and loader.epoch"}};
  }

  /// Adds the blocks this rank writes (weights, AdamW's m and v) to `w`. Async: copies
  /// them into the arena first (the staging copy), which is sized at the first save and
  /// kept, so the copy goes into pages already touched: a plain memcpy (TorchTitan stages
  /// into pinned memory kept across saves for the same reason). Sync: views of the live
  /// state, no copy (training waits for the write anyway) -- but a device model's state is
  /// always copied to the arena (the backend's to_host), in both modes.
  void stage_into(io::checkpoint::shard_writer& w, bool model_only) {
    const std::int64_t n = llm().n_tensors();
    const bool bf16 = model_only && opt_.export_dtype == dtype::bf16;
    const bool copy = opt_.mode == async_mode::async || !on_host;
    if (copy && arena_.empty()) {
      std::size_t total = 0;
      for (std::int64_t i = 0; i < n; ++i)
        if (writes_[static_cast<std::size_t>(i)]) total += 3 * static_cast<std::size_t>(block(i).numel());
      arena_.assign(total, 0.0f);  // value-initialised: every page touched now, not in the next save
    }
    float* p0 = m_.params().data();
    float* at = arena_.data();
    for (std::int64_t i = 0; i < n; ++i) {
      if (!writes_[static_cast<std::size_t>(i)]) continue;
      const box b = block(i);
      const auto count = static_cast<std::size_t>(b.numel());
      const shape_t g = param_global_shape(llm().entry(i));
      const std::string name = llm().name(i);
      const std::ptrdiff_t off = stored(i) - p0;
      const float* from[3] = {stored(i), tr_.exp_avg().data() + off, tr_.exp_avg_sq().data() + off};
      const std::string names[3] = {name, "optimizer.exp_avg." + name, "optimizer.exp_avg_sq." + name};
      for (int k = 0; k < (model_only ? 1 : 3); ++k) {
        if (!copy || bf16) {  // (bf16: the writer keeps its own rounded copy)
          if constexpr (!on_host) {
            K::to_host(at, from[k], static_cast<std::int64_t>(count));
            from[k] = at;
          }
          if (bf16)
            w.add(names[k], g, b, from[k], dtype::bf16);
          else
            w.add_view(names[k], g, b, from[k]);
          continue;
        }
        if constexpr (on_host) {
          if (count) std::memcpy(at, from[k], count * sizeof(float));
        } else {
          K::to_host(at, from[k], static_cast<std::int64_t>(count));
        }
        w.add_view(names[k], g, b, at);
        at += count;
      }
    }
  }

  /// For each parameter: whether this rank writes its block (it holds one, and no lower
  /// rank holds the same box). One all-gather of every rank's boxes.
  std::vector<bool> who_writes() {
    const std::int64_t n = llm().n_tensors();
    const std::size_t per = static_cast<std::size_t>(n) * 2 * max_tensor_rank;
    std::vector<std::int64_t> mine(per, 0), all(per * static_cast<std::size_t>(world_size()));
    for (std::int64_t i = 0; i < n; ++i) {
      const box b = block(i);
      for (int d = 0; d < max_tensor_rank; ++d) {
        mine[static_cast<std::size_t>((i * 2) * max_tensor_rank + d)] = b.offset[static_cast<std::size_t>(d)];
        mine[static_cast<std::size_t>((i * 2 + 1) * max_tensor_rank + d)] = b.numel() ? b.size[static_cast<std::size_t>(d)] : 0;
      }
    }
    gather_i64(mine.data(), all.data(), per);
    std::vector<bool> w(static_cast<std::size_t>(n));
    const int rank = rank_of();
    for (std::int64_t i = 0; i < n; ++i) {
      if (block(i).numel() == 0) continue;
      const std::size_t at = static_cast<std::size_t>(i) * 2 * max_tensor_rank, len = 2 * max_tensor_rank;
      bool first = true;
      for (int q = 0; q < rank && first; ++q)
        first = !std::equal(mine.begin() + static_cast<std::ptrdiff_t>(at), mine.begin() + static_cast<std::ptrdiff_t>(at + len),
                            all.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(q) * per + at));
      w[static_cast<std::size_t>(i)] = first;
    }
    return w;
  }
};

}  // namespace tessera::train
