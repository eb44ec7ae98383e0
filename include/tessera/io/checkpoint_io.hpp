// tessera/io/checkpoint_io.hpp: writing a rank's shard, committing a checkpoint, and
// reading boxes back (the format: io/checkpoint_format.hpp; docs/checkpoints.md).
//
// A save, as the train layer runs it (train/checkpoint.hpp), on every rank:
//   1. shard_writer w; w.add(...) for each block this rank writes -- add() copies the data
//      (the staging copy: training may go on changing the source afterwards);
//   2. w.write(tmp, rank): "shard-<rank>.safetensors" and its box list "shard-<rank>.json";
//   3. a barrier; rank 0 calls commit(folder, step, world, state): merges the box lists into
//      metadata.json and renames "step-<N>.tmp" to "step-<N>" -- only now is the checkpoint
//      complete (latest() never sees a folder without metadata.json or with ".tmp");
//   4. prune(folder, k) keeps the newest k complete checkpoints.
// A crash at any moment leaves the previous complete checkpoints as they were.
//
// box_reader reads the boxes of a tensor that intersect a requested block -- of a box with chunk
// checksums only the chunks that hold the intersection --, verifies what it read, and copies
// the intersections (tensor/detail/box_copy.hpp); errors name the file and the tensor.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <tessera/core/atomic_file.hpp>
#include <tessera/core/error.hpp>
#include <tessera/io/checkpoint_format.hpp>
#include <tessera/io/safetensors.hpp>
#include <tessera/tensor/detail/box_copy.hpp>

namespace tessera::io::checkpoint {

namespace fs = std::filesystem;

/// "<folder>/step-<N>" (complete) and "<folder>/step-<N>.tmp" (being written).
inline fs::path step_folder(const fs::path& folder, std::int64_t step) {
  return folder / ("step-" + std::to_string(step));
}
inline fs::path temp_folder(const fs::path& folder, std::int64_t step) {
  return folder / ("step-" + std::to_string(step) + ".tmp");
}
inline std::string shard_file(int rank) { return "shard-" + std::to_string(rank) + ".safetensors"; }

/// The steps of the complete checkpoints in `folder` (a "step-<N>" folder with
/// metadata.json), ascending. A missing folder has none.
inline std::vector<std::int64_t> complete_steps(const fs::path& folder) {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return steps;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) != 0 || n.size() == 5) continue;
    const std::string digits = n.substr(5);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 18)
      continue;
    if (fs::is_regular_file(e.path() / metadata_file, ec)) steps.push_back(std::stoll(digits));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

/// The newest complete checkpoint in `folder`, if any.
inline std::optional<fs::path> latest(const fs::path& folder) {
  const auto s = complete_steps(folder);
  if (s.empty()) return std::nullopt;
  return step_folder(folder, s.back());
}

/// The checkpoint `p` names: `p` itself when it holds metadata.json, else the newest complete
/// one in it; none when neither (a file, a Hugging Face folder, nothing there).
inline std::optional<fs::path> checkpoint_in(const fs::path& p) {
  std::error_code ec;
  if (fs::is_regular_file(p / metadata_file, ec)) return p;
  return latest(p);
}

/// Whether the complete checkpoint in `dir` holds the weights alone (state "contents" is
/// "model": a model-only last save); false when its metadata does not read.
inline bool holds_weights_alone(const fs::path& dir) {
  try {
    const metadata m = read_metadata(dir);
    const auto it = m.state.find("contents");
    return it != m.state.end() && it->second == "model";
  } catch (const std::exception&) {
    return false;
  }
}

/// Removes all but the newest `keep` complete checkpoints (keep = 0 keeps all, as
/// TorchTitan's keep_latest_k), and returns how many it removed. When each of those holds the
/// weights alone (a model-only last save), the newest full checkpoint stays too: a run's
/// last save does not take the last one it could resume from with it.
inline int prune(const fs::path& folder, int keep) {
  if (keep <= 0) return 0;
  const auto s = complete_steps(folder);
  if (s.size() <= static_cast<std::size_t>(keep)) return 0;
  const std::size_t first_kept = s.size() - static_cast<std::size_t>(keep);
  bool full_kept = false;
  for (std::size_t i = first_kept; i < s.size() && !full_kept; ++i)
    full_kept = !holds_weights_alone(step_folder(folder, s[i]));
  std::size_t spare = s.size();  // (none)
  for (std::size_t i = first_kept; !full_kept && i-- > 0;)
    if (!holds_weights_alone(step_folder(folder, s[i]))) spare = i, full_kept = true;
  int removed = 0;
  for (std::size_t i = 0; i < first_kept; ++i) {
    if (i == spare) continue;
    std::error_code ec;
    // drop the marker first: a crash halfway leaves an incomplete folder, never a damaged "complete" one
    fs::remove(step_folder(folder, s[i]) / metadata_file, ec);
    fs::remove_all(step_folder(folder, s[i]), ec);
    ++removed;
  }
  return removed;
}

/// Creates `folder` if needed and checks that this process can write there (a probe file,
/// removed again), so that a run learns of a bad --checkpoint.folder before it trains.
inline void check_writable(const fs::path& folder, int rank) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec || !fs::is_directory(folder))
    throw error("checkpoint: cannot create the folder '" + folder.string() + "'" + (ec ? ": " + ec.message() : "") +
                "; give --checkpoint.folder a writable path");
  const fs::path probe = folder / (".probe." + std::to_string(rank) + "." + std::to_string(static_cast<long>(::getpid())));
  {
    std::ofstream out(probe, std::ios::binary | std::ios::trunc);
    out << "x";
    if (!out.flush())
      throw error("checkpoint: cannot write into the folder '" + folder.string() +
                  "'; give --checkpoint.folder a writable path");
  }
  fs::remove(probe, ec);
}

/// Makes (or empties) "step-<N>.tmp" for a new save; checks that the folder is writable
/// and that "step-<N>" does not exist (a complete checkpoint is never overwritten).
inline fs::path begin_save(const fs::path& folder, std::int64_t step) {
  std::error_code ec;
  if (fs::exists(step_folder(folder, step) / metadata_file, ec))
    throw error("checkpoint: '" + step_folder(folder, step).string() +
                "' already holds a complete checkpoint; it is not overwritten (remove it, or resume from it)");
  fs::create_directories(folder, ec);
  if (ec || !fs::is_directory(folder))
    throw error("checkpoint: cannot create the folder '" + folder.string() + "': " + ec.message() +
                "; give --checkpoint.folder a writable path");
  const fs::path tmp = temp_folder(folder, step);
  fs::remove_all(tmp, ec);  // the leftover of a save that crashed
  fs::create_directories(tmp, ec);
  if (ec || !fs::is_directory(tmp))
    throw error("checkpoint: cannot create '" + tmp.string() + "' (" + ec.message() +
                "); give --checkpoint.folder a writable path");
  return tmp;
}

/// One rank's blocks of one checkpoint.
class shard_writer {
 public:
  /// `chunk_bytes`: each block of more than that many bytes also gets the checksum of each
  /// chunk of it (checkpoint_format.hpp), of chunk_bytes or, for a block of more than
  /// max_chunks of them, of 1/max_chunks of the block (rounded up to 8 bytes: the metadata
  /// stays at most max_chunks checksums a block); 0: none.
  explicit shard_writer(std::uint64_t chunk_bytes = default_chunk_bytes) : chunk_(chunk_bytes) {
    check(chunk_bytes % 8 == 0, "checkpoint: chunk_bytes must be a multiple of 8");
  }

  /// Adds the block `where` of tensor `name` (global shape `shape`), copying `data`
  /// (where.numel() floats, row-major over the block), stored as `type`: f32, or bf16
  /// (rounded to nearest even).
  void add(const std::string& name, const shape_t& shape, const box& where, const float* data,
           dtype type = dtype::f32) {
    const std::size_t n = static_cast<std::size_t>(where.numel());
    w_.add(box_key(name, where), dims_of(where), std::span<const float>(data, n), type);
    record(name, shape, where, n, type == dtype::bf16 ? "BF16" : "F32");
  }
  /// The same without a copy: `data` must stay unchanged until write() returns (the
  /// checkpointer's staging arena, already a copy of the training state).
  void add_view(const std::string& name, const shape_t& shape, const box& where, const float* data) {
    const std::size_t n = static_cast<std::size_t>(where.numel());
    w_.add_view(box_key(name, where), dims_of(where), std::span<const float>(data, n));
    record(name, shape, where, n, "F32");
  }
  /// Bytes of tensor data staged so far.
  std::uint64_t bytes() const { return bytes_; }

  /// Writes "shard-<rank>.safetensors" (when this rank has blocks) and "shard-<rank>.json"
  /// (its box list) into `tmp`; `sync` fsyncs them.
  void write(const fs::path& tmp, int rank, bool sync = false) {
    metadata m = meta_;
    if (!order_.empty()) {
      const std::string file = shard_file(rank);
      std::uint64_t off = w_.write(tmp / file, sync);
      for (std::size_t e = 0; e < order_.size(); ++e) {
        const auto [t, k] = order_[e];
        saved_box& b = m.tensors[t].boxes[k];
        const auto bytes = w_.bytes(e);
        const std::uint64_t chunk = chunk_ ? std::max(chunk_, (bytes.size() + 8 * max_chunks - 1) / (8 * max_chunks) * 8) : 0;
        checksums(bytes.data(), bytes.size(), chunk, b.sum, b.chunk_sums);
        b.chunk_bytes = b.chunk_sums.empty() ? 0 : chunk;
        const std::uint64_t n = b.end;
        b.file = file;
        b.begin = off;
        b.end = off + n;
        off += n;
      }
    }
    write_text_atomically(tmp / ("shard-" + std::to_string(rank) + ".json"), to_json(m), "checkpoint", sync);
  }

 private:
  static constexpr std::uint64_t max_chunks = 256;
  std::uint64_t chunk_;
  safetensors::writer w_;
  metadata meta_;
  std::vector<std::pair<std::size_t, std::size_t>> order_;  // (tensor, box) in the order added
  std::uint64_t bytes_ = 0;

  static std::vector<std::int64_t> dims_of(const box& where) {
    return {where.size.begin(), where.size.begin() + where.rank};
  }
  void record(const std::string& name, const shape_t& shape, const box& where, std::size_t n,
              const std::string& type) {
    saved_box b;
    b.where = where;
    b.end = n * value_bytes(type);  // relative sizes until write() knows the header (checksums: in write())
    tensor_entry& t = meta_.add(name, shape, type);
    check(t.dtype == type, "checkpoint: tensor '" + name + "' added as " + type + " and as " + t.dtype);
    t.boxes.push_back(b);
    order_.emplace_back(meta_.tensors.size(), 0);
    for (std::size_t k = 0; k < meta_.tensors.size(); ++k)
      if (meta_.tensors[k].name == name) order_.back() = {k, meta_.tensors[k].boxes.size() - 1};
    bytes_ += b.end;
  }
};

/// Rank 0: waits until every rank 0..world-1 has written its box list into `tmp` (each
/// rank's write() ends with it), polling the folder; after `timeout_s` seconds throws an
/// error naming the ranks that did not arrive (torchtitan#3065: no silent hang).
/// A rank whose write failed (or that was told to stop) says so with
/// "shard-<rank>.failed" (the reason inside), so rank 0 stops waiting for it at once.
/// Best effort: a rank that dies without a word is found by the timeout.
inline void mark_failed(const fs::path& tmp, int rank, const std::string& why) noexcept {
  try {
    write_text_atomically(tmp / ("shard-" + std::to_string(rank) + ".failed"), why, "checkpoint");
  } catch (...) {
  }
}

/// Also stops with an error when a rank marked its write failed (mark_failed; the error
/// names it and its reason) or when `*cancel` becomes true (the run is stopping).
inline void wait_for_ranks(const fs::path& tmp, std::int64_t world, double timeout_s,
                           const std::atomic<bool>* cancel = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string intact = "; the checkpoint is not committed (the previous complete one is intact)";
  for (int sleep_us = 100;; sleep_us = std::min(sleep_us * 2, 20000)) {
    std::vector<std::int64_t> missing;
    std::error_code ec;
    for (std::int64_t r = 0; r < world; ++r) {
      const std::string stem = "shard-" + std::to_string(r);
      if (fs::is_regular_file(tmp / (stem + ".json"), ec)) continue;
      if (fs::is_regular_file(tmp / (stem + ".failed"), ec)) {
        std::ifstream in(tmp / (stem + ".failed"));
        const std::string why((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        throw error("checkpoint: rank " + std::to_string(r) + " failed to write its shard into '" + tmp.string() +
                    "': " + why + intact);
      }
      missing.push_back(r);
    }
    if (missing.empty()) return;
    if (cancel && cancel->load())
      throw error("checkpoint: the save into '" + tmp.string() + "' was abandoned (the run is stopping)" + intact);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited >= timeout_s) {
      std::string names;
      for (std::size_t k = 0; k < missing.size(); ++k) {
        if (k) names += ", ";
        names += std::to_string(missing[k]);
      }
      throw error("checkpoint: rank" + std::string(missing.size() > 1 ? "s " : " ") + names + " of " +
                  std::to_string(world) + " did not finish writing '" + tmp.string() + "' within " +
                  std::to_string(timeout_s) + " s" + intact);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }
}

/// Rank 0, after every rank's write(): merges the box lists of ranks 0..world-1 into
/// metadata.json and renames "step-<N>.tmp" to "step-<N>". Throws naming the rank whose
/// list is missing (the checkpoint then stays incomplete).
inline fs::path commit(const fs::path& folder, std::int64_t step, std::int64_t world,
                       const std::map<std::string, std::string>& state, bool sync = false) {
  const fs::path tmp = temp_folder(folder, step);
  metadata all;
  all.step = step;
  all.world = world;
  all.state = state;
  for (std::int64_t r = 0; r < world; ++r) {
    const fs::path p = tmp / ("shard-" + std::to_string(r) + ".json");
    std::ifstream in(p, std::ios::binary);
    if (!in)
      throw error("checkpoint: rank " + std::to_string(r) + " wrote no '" + p.string() +
                  "'; the checkpoint of step " + std::to_string(step) + " is incomplete and not committed");
    std::stringstream ss;
    ss << in.rdbuf();
    const metadata part = parse_metadata(ss.str(), p.string(), false);
    for (const auto& t : part.tensors) {
      tensor_entry& dst = all.add(t.name, t.shape, t.dtype);
      if (dst.shape != t.shape || dst.dtype != t.dtype)
        throw error("checkpoint: '" + p.string() + "': tensor '" + t.name + "' has another shape or dtype than on rank 0");
      dst.boxes.insert(dst.boxes.end(), t.boxes.begin(), t.boxes.end());
    }
  }
  const std::string text = to_json(all);
  parse_metadata(text, (tmp / metadata_file).string());  // the merged metadata covers every tensor
  write_text_atomically(tmp / metadata_file, text, "checkpoint", sync);
  for (std::int64_t r = 0; r < world; ++r) {
    std::error_code ec;
    fs::remove(tmp / ("shard-" + std::to_string(r) + ".json"), ec);
  }
  const fs::path done = step_folder(folder, step);
  std::error_code ec;
  fs::rename(tmp, done, ec);
  if (ec)
    throw error("checkpoint: cannot rename '" + tmp.string() + "' to '" + done.string() + "': " + ec.message());
  return done;
}

/// Reads blocks of tensors from a complete checkpoint.
class box_reader {
 public:
  explicit box_reader(const fs::path& dir) : dir_(dir), meta_(read_metadata(dir)) {}

  const metadata& meta() const { return meta_; }
  const fs::path& folder() const { return dir_; }

  /// Fills `out` (row-major over `want`, a block of tensor `name` of global shape `shape`)
  /// from the saved boxes that intersect it: each box read once, whole and its checksum
  /// verified, or -- a box with chunk checksums that `want` needs only part of -- the chunks
  /// from the one holding the first element it needs to the one holding the last, each
  /// verified. BF16 values are widened to f32. Returns the bytes read from files.
  std::uint64_t read(const std::string& name, const shape_t& shape, const box& want, float* out) {
    const std::string meta_path = (dir_ / metadata_file).string();
    const tensor_entry* t = meta_.find(name);
    if (!t)
      throw error("checkpoint: '" + meta_path + "' has no tensor '" + name +
                  "' (a checkpoint of another model?)");
    if (t->shape != shape)
      throw error("checkpoint: '" + meta_path + "': tensor '" + name + "' has shape " + shape_str(t->shape) +
                  ", this model's is " + shape_str(shape) + " (a checkpoint of another model?)");
    std::uint64_t bytes = 0;
    std::int64_t covered = 0;
    for (const auto& b : t->boxes) {
      const box x = intersect(b.where, want);
      if (x.numel() == 0 || b.where.numel() == 0) continue;
      const auto n = static_cast<std::size_t>(b.where.numel());
      float* buf = buffer(n);
      if (t->value() == 4) {
        bytes += x == b.where ? read_box(*t, b, buf) : read_part(*t, b, x, buf);
      } else {  // BF16: the bytes into their own buffer, then the values that were read widened
        if (n > raw_size_) raw_.reset(new std::uint16_t[n]), raw_size_ = n;
        bytes += x == b.where ? read_box(*t, b, raw_.get()) : read_part(*t, b, x, raw_.get());
        const element_range e = x == b.where || b.chunk_sums.empty() ? element_range{0, n} : elements_holding(b, x);
        for (std::uint64_t i = e.first; i < e.last; ++i) buf[i] = safetensors::detail::bf16_to_f32(raw_[i]);
      }
      tessera::detail::copy_region(buf, b.where, out, want, x);
      covered += x.numel();
    }
    if (covered != want.numel())
      throw error("checkpoint: '" + meta_path + "': tensor '" + name + "': the saved boxes cover " +
                  std::to_string(covered) + " of the " + std::to_string(want.numel()) +
                  " elements this rank needs (overlapping or missing boxes)");
    return bytes;
  }

  /// Reads one saved box whole (its bytes: b.where.numel() values of t's dtype) and verifies
  /// its checksum (and with `chunks`, each chunk's too: tessera-ckpt verify). Returns the
  /// bytes read.
  std::uint64_t read_box(const tensor_entry& t, const saved_box& b, void* out, bool chunks = false) {
    const fs::path p = read_bytes(t, b, 0, b.end - b.begin, out);
    const std::uint64_t sum = checksum(out, b.end - b.begin);
    if (sum != b.sum)
      throw error("checkpoint: '" + p.string() + "' is corrupt: tensor '" + t.name + "' block " +
                  box_key(t.name, b.where) + " has checksum " + hex64(sum) + ", the metadata says " + hex64(b.sum));
    if (chunks) verify_chunks(t, b, p, out, 0, b.chunk_sums.size());
    return b.end - b.begin;
  }

  /// Reads the chunks of box `b` that hold its part `x` into their places in `out` (the
  /// whole box's buffer) and verifies them; without chunk checksums the box whole. Returns
  /// the bytes read.
  std::uint64_t read_part(const tensor_entry& t, const saved_box& b, const box& x, void* out) {
    if (b.chunk_sums.empty()) return read_box(t, b, out);
    const chunk_range k = chunks_holding(b, x, t.value());
    const std::uint64_t lo = k.first * b.chunk_bytes, hi = std::min<std::uint64_t>(b.end - b.begin, k.last * b.chunk_bytes);
    const fs::path p = read_bytes(t, b, lo, hi, static_cast<char*>(out) + lo);
    verify_chunks(t, b, p, out, k.first, k.last);
    return hi - lo;
  }

 private:
  fs::path dir_;
  metadata meta_;
  std::map<std::string, std::unique_ptr<std::ifstream>> files_;
  std::unique_ptr<float[]> buf_;  // a box (not value-initialised: a part's read touches only its chunks' pages)
  std::size_t buf_size_ = 0;
  std::unique_ptr<std::uint16_t[]> raw_;  // a BF16 box's bytes
  std::size_t raw_size_ = 0;

  float* buffer(std::size_t n) {
    if (n > buf_size_) {
      buf_.reset(new float[n]);
      buf_size_ = n;
    }
    return buf_.get();
  }

  /// Reads bytes [lo, hi) of box b's data into `to`; returns the file's path.
  fs::path read_bytes(const tensor_entry& t, const saved_box& b, std::uint64_t lo, std::uint64_t hi, void* to) {
    const fs::path p = dir_ / b.file;
    std::ifstream& in = stream(p);
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec || size < b.end)
      throw error("checkpoint: '" + p.string() + "' is truncated: tensor '" + t.name + "' needs bytes " +
                  std::to_string(b.begin) + ".." + std::to_string(b.end) + " but the file has " +
                  std::to_string(ec ? 0 : size));
    in.clear();
    in.seekg(static_cast<std::streamoff>(b.begin + lo));
    in.read(static_cast<char*>(to), static_cast<std::streamsize>(hi - lo));
    if (!in) throw error("checkpoint: reading tensor '" + t.name + "' from '" + p.string() + "' failed");
    return p;
  }

  /// Verifies chunks [k0, k1) of box b, read into `box_data` (the whole box's buffer).
  static void verify_chunks(const tensor_entry& t, const saved_box& b, const fs::path& p, const void* box_data,
                            std::size_t k0, std::size_t k1) {
    const std::uint64_t n = b.end - b.begin, c = b.chunk_bytes;
    const auto* bytes = static_cast<const unsigned char*>(box_data);
    for (std::size_t k = k0; k < k1; ++k) {
      const std::uint64_t lo = k * c, len = std::min(c, n - lo);
      const std::uint64_t sum = checksum(bytes + lo, len);
      if (sum != b.chunk_sums[k])
        throw error("checkpoint: '" + p.string() + "' is corrupt: tensor '" + t.name + "' block " +
                    box_key(t.name, b.where) + ", bytes " + std::to_string(lo) + ".." + std::to_string(lo + len) +
                    " of it, has checksum " + hex64(sum) + ", the metadata says " + hex64(b.chunk_sums[k]));
    }
  }

  std::ifstream& stream(const fs::path& p) {
    auto& s = files_[p.string()];
    if (!s) {
      std::error_code ec;
      if (!fs::is_regular_file(p, ec))
        throw error("checkpoint: '" + p.string() + "' is missing (the metadata names it)");
      s = std::make_unique<std::ifstream>(p, std::ios::binary);
      if (!*s) throw error("checkpoint: cannot open '" + p.string() + "' for reading");
    }
    return *s;
  }
  static std::string shape_str(const shape_t& s) {
    return detail::ints(s.extent.data(), s.rank);
  }
};

}  // namespace tessera::io::checkpoint
