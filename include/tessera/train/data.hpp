// tessera/train/data.hpp: llm.c-style batching over token streams (token files: io/token_file.hpp).
//
// A token stream is a flat vector of int32 ids. Each training step takes the next window of
// B*T+1 tokens: row i's inputs are tokens [i*T, i*T+T) of the window and its targets the
// same tokens shifted by one (llm.c's DataLoader). Windows start at multiples of B*T, so
// consecutive windows share one token. The order in which windows are visited is a
// permutation drawn per epoch from the seed (or the file order with shuffle off).
//
// A parallel run (parallel_llama) gives the loader the GLOBAL batch (TorchTitan's local
// batch per data-parallel rank x the dp degree): every rank reads the same windows and the
// model keeps its rows, so it sees what one rank with that batch sees. The optional
// rank/world arguments are another scheme: rank r of W takes windows r, r+W, r+2W, ... of
// the order, which is what one rank accumulating W micro-batches would read.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include <tessera/core/error.hpp>
#include <tessera/io/token_file.hpp>

namespace tessera::train {

// The token-file format (mapped_token_file, read_token_file, write_token_file, token_data)
// lives in io/token_file.hpp.
using io::mapped_token_file;
using io::read_token_file;
using io::token_data;
using io::write_token_file;

/// llm.c-style batches over a token stream, deterministic from a seed, sharded by rank.
class batch_loader {
 public:
  /// `tokens` must outlive the loader. Throws when one rank's window of B*T+1 tokens, for
  /// every one of `world` ranks, does not fit in the data.
  batch_loader(std::span<const std::int32_t> tokens, std::int64_t batch, std::int64_t seq_len,
               std::uint64_t seed, bool shuffle = true, int rank = 0, int world = 1)
      : tokens_(tokens), B_(batch), T_(seq_len), seed_(seed), shuffle_(shuffle), rank_(rank),
        world_(world) {
    check(batch > 0 && seq_len > 0, "batch_loader: batch and seq_len must be positive");
    check(world > 0 && rank >= 0 && rank < world,
          "batch_loader: rank " + std::to_string(rank) + " is not in [0, world=" +
              std::to_string(world) + ")");
    const std::int64_t n = static_cast<std::int64_t>(tokens.size());
    const std::int64_t need = B_ * T_ * world + 1;
    if (n < need)
      throw error("data: batch larger than the data: batch " + std::to_string(B_) +
                  " x seq_len " + std::to_string(T_) +
                  (world > 1 ? " x " + std::to_string(world) + " ranks" : std::string()) +
                  " + 1 = " + std::to_string(need) + " tokens are needed per step, but the "
                  "data has only " + std::to_string(n) + "; lower --batch or --seq-len");
    n_windows_ = (n - 1) / (B_ * T_);
    n_windows_ -= n_windows_ % world_;  // every rank gets the same number of windows
    start_epoch();
  }

  std::int64_t batch() const { return B_; }
  std::int64_t seq_len() const { return T_; }
  /// Windows per epoch for this rank.
  std::int64_t steps_per_epoch() const { return n_windows_ / world_; }
  std::int64_t epoch() const { return epoch_; }

  /// Fills the next batch: inputs and targets, each B*T ids, row-major [B, T].
  void next(std::span<std::int32_t> inputs, std::span<std::int32_t> targets) {
    check(static_cast<std::int64_t>(inputs.size()) == B_ * T_ &&
              static_cast<std::int64_t>(targets.size()) == B_ * T_,
          "batch_loader::next: inputs and targets must hold batch*seq_len ids");
    if (cursor_ >= steps_per_epoch()) {
      ++epoch_;
      start_epoch();
    }
    const std::int64_t w = order_[static_cast<std::size_t>(cursor_ * world_ + rank_)];
    ++cursor_;
    const std::int32_t* win = tokens_.data() + w * B_ * T_;
    std::copy(win, win + B_ * T_, inputs.begin());
    std::copy(win + 1, win + 1 + B_ * T_, targets.begin());
  }

  /// The position in the stream: the epoch and the windows read in it (checkpoints save
  /// it; every rank of a parallel run reads the same global batches, so it does not depend
  /// on the data-parallel degree).
  std::int64_t cursor() const { return cursor_; }
  std::uint64_t seed() const { return seed_; }
  bool shuffled() const { return shuffle_; }
  /// Continues from `epoch` after `cursor` windows of it (the order of an epoch is a
  /// function of the seed and the epoch, so this is where that run stood).
  void seek(std::int64_t epoch, std::int64_t cursor) {
    check(epoch >= 0 && cursor >= 0 && cursor <= steps_per_epoch(),
          "batch_loader::seek: position (epoch " + std::to_string(epoch) + ", window " + std::to_string(cursor) +
              ") is outside the data's " + std::to_string(steps_per_epoch()) + " windows per epoch");
    epoch_ = epoch;
    start_epoch();
    cursor_ = cursor;
  }

  /// Index (in B*T units) of the window the next call will read, for tests.
  std::int64_t peek_window() const {
    if (cursor_ >= steps_per_epoch()) return -1;
    return order_[static_cast<std::size_t>(cursor_ * world_ + rank_)];
  }

 private:
  std::span<const std::int32_t> tokens_;
  std::int64_t B_, T_;
  std::uint64_t seed_;
  bool shuffle_;
  int rank_, world_;
  std::int64_t n_windows_ = 0;
  std::int64_t epoch_ = 0;
  std::int64_t cursor_ = 0;
  std::vector<std::int64_t> order_;

  void start_epoch() {
    order_.resize(static_cast<std::size_t>(n_windows_));
    std::iota(order_.begin(), order_.end(), std::int64_t{0});
    if (shuffle_) {
      // Fisher-Yates with mt19937_64 (fully specified by the standard, so the order is the
      // same on every platform); std::shuffle's use of the engine is implementation-defined.
      std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(epoch_));
      for (std::size_t i = order_.size(); i > 1; --i) {
        const std::uint64_t j = rng() % i;
        std::swap(order_[i - 1], order_[j]);
      }
    }
    cursor_ = 0;
  }
};

}  // namespace tessera::train
