// tessera/io/checkpoint_format.hpp: the metadata of a distributed checkpoint (docs/checkpoints.md).
//
// A checkpoint is a folder "step-<N>" holding one safetensors file per rank that wrote
// anything ("shard-<rank>.safetensors", each tensor named "<name>@<offset>,<offset>,...",
// shaped as its box) and one "metadata.json":
//   {"format": "tessera-checkpoint", "version": 1, "step": N, "world": W,
//    "state": {"key": "value", ...},              // step, LR schedule, data loader, RNG
//    "tensors": {"<name>": {"dtype": "F32" or "BF16", "shape": [..],
//       "boxes": [{"offsets": [..], "sizes": [..], "file": "shard-0.safetensors",
//                  "begin": B, "end": E, "checksum": "<16 hex digits>",
//                  "chunk_bytes": C, "chunk_checksums": ["<16 hex digits>", ...]}, ...]}, ...}}
// Boxes are in global coordinates and disjoint (replicated blocks are written once), and
// together cover the tensor. begin/end are byte offsets in the file (the data, not the
// safetensors header); the checksum is FNV-1a 64 of those bytes, taken 8 at a time. A box of
// more than C bytes also has the checksum of each C bytes of it (the last chunk shorter), so a
// reader that needs part of the box -- a rank of another mesh -- reads and verifies only the
// chunks that hold its part. The chunk fields are optional (a reader reads such a box
// whole). A tensor's values are F32 (weights, AdamW's moments), or BF16 (rounded to nearest
// even: a model-only last save with export_dtype bf16, which a reader widens to f32).
// parse_metadata checks every field and throws tessera::error naming the file and the tensor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/core/extents.hpp>
#include <tessera/core/json.hpp>
#include <tessera/layout/local_shape.hpp>

namespace tessera::io::checkpoint {

inline constexpr std::string_view format_name = "tessera-checkpoint";
inline constexpr std::int64_t format_version = 1;
inline constexpr std::string_view metadata_file = "metadata.json";

/// The checksum of `n` bytes: FNV-1a 64 over little-endian 64-bit words (then the last
/// n mod 8 bytes one by one), about 8x the speed of byte-wise FNV-1a.
inline constexpr std::uint64_t checksum_seed = 0xcbf29ce484222325ull;
/// One FNV-1a step: hash `h` takes in `w` (a word, or a byte).
constexpr std::uint64_t fnv_step(std::uint64_t h, std::uint64_t w) noexcept { return (h ^ w) * 0x100000001b3ull; }
inline std::uint64_t checksum(const void* data, std::size_t n, std::uint64_t h = checksum_seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = fnv_step(h, w);
  }
  for (; i < n; ++i) h = fnv_step(h, p[i]);
  return h;
}
inline std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// The checksums of a box's chunks: a reader of part of a box verifies only what it reads.
/// The default chunk: 1 MiB (a 2 GiB block of a rank of another mesh reads at most 2 MiB it
/// does not need, and its metadata grows by 19 bytes a MiB). A multiple of 8 bytes, so that
/// each chunk starts on a checksum word.
inline constexpr std::uint64_t default_chunk_bytes = std::uint64_t{1} << 20;

/// One saved block of a tensor.
struct saved_box {
  box where;               ///< global offsets and sizes
  std::string file;        ///< relative to the checkpoint folder
  std::uint64_t begin = 0, end = 0;  ///< byte range in the file
  std::uint64_t sum = 0;   ///< checksum of those bytes
  std::uint64_t chunk_bytes = 0;           ///< 0: no chunk checksums (read the box whole)
  std::vector<std::uint64_t> chunk_sums;   ///< checksum of bytes [k C, min((k+1) C, end - begin))
};

/// Bytes of one value of a tensor of dtype `name` ("F32": 4, "BF16": 2); 0 for any other.
inline std::uint64_t value_bytes(std::string_view name) { return name == "F32" ? 4 : name == "BF16" ? 2 : 0; }

/// The elements [first, last) of box `b`, row-major in it, from the first of its part `x`
/// (intersect(b.where, x) == x, x not empty) to the last.
struct element_range {
  std::uint64_t first = 0, last = 0;
};
inline element_range elements_holding(const saved_box& b, const box& x) {
  std::uint64_t first = 0, last = 0;
  for (int d = 0; d < b.where.rank; ++d) {
    const auto u = static_cast<std::size_t>(d);
    const auto lo = static_cast<std::uint64_t>(x.offset[u] - b.where.offset[u]);
    first = first * static_cast<std::uint64_t>(b.where.size[u]) + lo;
    last = last * static_cast<std::uint64_t>(b.where.size[u]) + lo + static_cast<std::uint64_t>(x.size[u]) - 1;
  }
  return {first, last + 1};
}
/// The chunks [first, last) of box `b` (one with chunk checksums, values of `value` bytes)
/// that hold its part `x`: from the chunk of x's first element to the chunk of its last.
struct chunk_range {
  std::size_t first = 0, last = 0;
};
inline chunk_range chunks_holding(const saved_box& b, const box& x, std::uint64_t value = 4) {
  const element_range e = elements_holding(b, x);
  return {static_cast<std::size_t>(e.first * value / b.chunk_bytes),
          static_cast<std::size_t>((e.last - 1) * value / b.chunk_bytes + 1)};
}

/// The checksum of `n` bytes and, when `chunk` > 0 and n > chunk, of each `chunk` bytes of
/// them, in one pass (two independent hash chains per word).
inline void checksums(const void* data, std::size_t n, std::uint64_t chunk, std::uint64_t& whole,
                      std::vector<std::uint64_t>& chunks) {
  chunks.clear();
  if (chunk == 0 || n <= chunk) {
    whole = checksum(data, n);
    return;
  }
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = checksum_seed;
  for (std::size_t at = 0; at < n; at += chunk) {
    const std::size_t len = std::min<std::size_t>(chunk, n - at);
    std::uint64_t c = checksum_seed;
    std::size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, p + at + i, 8);
      h = fnv_step(h, w), c = fnv_step(c, w);
    }
    for (; i < len; ++i) h = fnv_step(h, p[at + i]), c = fnv_step(c, p[at + i]);
    chunks.push_back(c);
  }
  whole = h;
}

struct tensor_entry {
  std::string name;
  shape_t shape;  ///< global shape
  std::vector<saved_box> boxes;
  std::string dtype = "F32";  ///< "F32" or "BF16"
  std::int64_t numel() const { return shape.numel(); }
  std::uint64_t value() const { return value_bytes(dtype); }  ///< bytes of one value
};

struct metadata {
  std::int64_t step = 0;
  std::int64_t world = 1;
  std::map<std::string, std::string> state;
  std::vector<tensor_entry> tensors;

  const tensor_entry* find(std::string_view name) const {
    for (const auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
  tensor_entry& add(const std::string& name, const shape_t& shape, const std::string& dtype = "F32") {
    for (auto& t : tensors)
      if (t.name == name) return t;
    tensors.push_back({name, shape, {}, dtype});
    return tensors.back();
  }
  /// Bytes of tensor data the checkpoint holds.
  std::uint64_t bytes() const {
    std::uint64_t n = 0;
    for (const auto& t : tensors)
      for (const auto& b : t.boxes) n += b.end - b.begin;
    return n;
  }
};

/// "name@o0,o1": a block's tensor name in a shard file.
inline std::string box_key(const std::string& name, const box& b) {
  std::string k = name + "@";
  for (int d = 0; d < b.rank; ++d) {
    if (d) k += ',';
    k += std::to_string(b.offset[static_cast<std::size_t>(d)]);
  }
  return k;
}

namespace detail {
inline std::string ints(const std::int64_t* v, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}
}  // namespace detail

/// The metadata as JSON text (one box per line, so that it diffs and greps).
inline std::string to_json(const metadata& m) {
  using json::quote;
  std::string s = "{\"format\":" + quote(format_name) + ",\"version\":" + std::to_string(format_version) +
                  ",\"step\":" + std::to_string(m.step) + ",\"world\":" + std::to_string(m.world) + ",\n\"state\":{";
  bool first = true;
  for (const auto& [k, v] : m.state) {
    if (!first) s += ',';
    s += quote(k) + ":" + quote(v);
    first = false;
  }
  s += "},\n\"tensors\":{";
  for (std::size_t t = 0; t < m.tensors.size(); ++t) {
    const auto& e = m.tensors[t];
    s += t ? ",\n" : "\n";
    s += quote(e.name) + ":{\"dtype\":" + quote(e.dtype) + ",\"shape\":" +
         detail::ints(e.shape.extent.data(), e.shape.rank) + ",\"boxes\":[";
    for (std::size_t i = 0; i < e.boxes.size(); ++i) {
      const auto& b = e.boxes[i];
      s += i ? ",\n  " : "\n  ";
      s += std::string("{\"offsets\":") + detail::ints(b.where.offset.data(), b.where.rank) +
           ",\"sizes\":" + detail::ints(b.where.size.data(), b.where.rank) + ",\"file\":" + quote(b.file) +
           ",\"begin\":" + std::to_string(b.begin) + ",\"end\":" + std::to_string(b.end) + ",\"checksum\":\"" +
           hex64(b.sum) + "\"";
      if (!b.chunk_sums.empty()) {
        s += ",\"chunk_bytes\":" + std::to_string(b.chunk_bytes) + ",\"chunk_checksums\":[";
        for (std::size_t k = 0; k < b.chunk_sums.size(); ++k) s += (k ? ",\"" : "\"") + hex64(b.chunk_sums[k]) + "\"";
        s += "]";
      }
      s += "}";
    }
    s += "]}";
  }
  return s + "}}\n";
}

/// Parses metadata text; `source` (the file) starts every error. `whole`: every tensor's
/// boxes must hold all its elements (false for one rank's box list).
inline metadata parse_metadata(std::string_view text, const std::string& source, bool whole = true) {
  const json::value root = json::parse(text, source, 8);
  auto bad = [&](const std::string& what) -> error {
    return error("checkpoint: '" + source + "' is not valid checkpoint metadata: " + what);
  };
  auto integer = [&](const json::value* v, const std::string& what) {
    if (!v || !v->as_int64() || *v->as_int64() < 0) throw bad(what + " is not an integer >= 0");
    return *v->as_int64();
  };
  if (!root.is_object()) throw bad("not a JSON object");
  const json::value* f = root.get("format");
  if (!f || !f->is_string() || f->str != format_name) throw bad("\"format\" is not \"tessera-checkpoint\"");
  if (integer(root.get("version"), "\"version\"") != format_version)
    throw bad("version " + std::to_string(*root.get("version")->as_int64()) + " (this tessera reads version " +
              std::to_string(format_version) + ")");
  metadata m;
  m.step = integer(root.get("step"), "\"step\"");
  m.world = integer(root.get("world"), "\"world\"");
  const json::value* st = root.get("state");
  if (!st || !st->is_object()) throw bad("\"state\" is not an object");
  for (std::size_t i = 0; i < st->keys.size(); ++i) {
    if (!st->items[i].is_string()) throw bad("state '" + st->keys[i] + "' is not a string");
    m.state[st->keys[i]] = st->items[i].str;
  }
  const json::value* ts = root.get("tensors");
  if (!ts || !ts->is_object()) throw bad("\"tensors\" is not an object");
  for (std::size_t t = 0; t < ts->keys.size(); ++t) {
    const std::string& name = ts->keys[t];
    const json::value& v = ts->items[t];
    const std::string where = "tensor '" + name + "'";
    if (!v.is_object()) throw bad(where + " is not an object");
    const json::value* dt = v.get("dtype");
    if (!dt || !dt->is_string() || value_bytes(dt->str) == 0) throw bad(where + " has a dtype other than \"F32\" and \"BF16\"");
    const json::value* sh = v.get("shape");
    if (!sh || !sh->is_array() || sh->items.size() > static_cast<std::size_t>(max_tensor_rank))
      throw bad(where + " has no shape of at most " + std::to_string(max_tensor_rank) + " dimensions");
    tensor_entry e;
    e.name = name;
    e.dtype = dt->str;
    auto bytes = static_cast<std::int64_t>(e.value());  // in checked arithmetic: the tensor's bytes must fit 63 bits
    for (const auto& d : sh->items) {
      const std::int64_t n = integer(&d, where + "'s shape");
      if (bytes != 0 && n > std::numeric_limits<std::int64_t>::max() / bytes)
        throw bad(where + " has more elements than any file can hold (its byte size overflows 64 bits)");
      bytes *= n;
      e.shape.extent[static_cast<std::size_t>(e.shape.rank++)] = n;
    }
    const json::value* bs = v.get("boxes");
    if (!bs || !bs->is_array()) throw bad(where + " has no \"boxes\" array");
    std::int64_t covered = 0;
    for (const auto& bv : bs->items) {
      if (!bv.is_object()) throw bad(where + ": a box is not an object");
      saved_box b;
      b.where.rank = e.shape.rank;
      const json::value* off = bv.get("offsets");
      const json::value* sz = bv.get("sizes");
      if (!off || !sz || !off->is_array() || !sz->is_array() || off->items.size() != sh->items.size() ||
          sz->items.size() != sh->items.size())
        throw bad(where + ": a box's offsets and sizes do not match the tensor's rank");
      for (std::size_t d = 0; d < sh->items.size(); ++d) {
        b.where.offset[d] = integer(&off->items[d], where + "'s box offset");
        b.where.size[d] = integer(&sz->items[d], where + "'s box size");
        if (b.where.offset[d] + b.where.size[d] > e.shape.extent[d]) throw bad(where + ": a box lies outside the tensor");
      }
      const json::value* file = bv.get("file");
      if (!file || !file->is_string() || file->str.empty() || file->str.find('/') != std::string::npos ||
          file->str.find("..") != std::string::npos)
        throw bad(where + ": a box has no plain file name");
      b.file = file->str;
      b.begin = static_cast<std::uint64_t>(integer(bv.get("begin"), where + "'s \"begin\""));
      b.end = static_cast<std::uint64_t>(integer(bv.get("end"), where + "'s \"end\""));
      if (b.end < b.begin || b.end - b.begin != static_cast<std::uint64_t>(b.where.numel()) * e.value())
        throw bad(where + ": a box's byte range does not hold its " + std::to_string(b.where.numel()) + " " + e.dtype +
                  " values");
      auto hex = [&](const json::value* cs) -> std::uint64_t {
        if (!cs || !cs->is_string() || cs->str.size() != 16) throw bad(where + ": a box has no 16-digit checksum");
        try {
          std::size_t used = 0;
          const std::uint64_t v = std::stoull(cs->str, &used, 16);
          if (used == 16) return v;
        } catch (const std::logic_error&) {
        }
        throw bad(where + ": a checksum is not hexadecimal");
      };
      b.sum = hex(bv.get("checksum"));
      if (const json::value* cb = bv.get("chunk_bytes")) {
        b.chunk_bytes = static_cast<std::uint64_t>(integer(cb, where + "'s \"chunk_bytes\""));
        const json::value* cl = bv.get("chunk_checksums");
        const std::uint64_t n = b.end - b.begin;
        if (b.chunk_bytes == 0 || b.chunk_bytes % 8 != 0)
          throw bad(where + ": a box's \"chunk_bytes\" is not a positive multiple of 8");
        if (!cl || !cl->is_array() || cl->items.size() != (n + b.chunk_bytes - 1) / b.chunk_bytes)
          throw bad(where + ": a box's \"chunk_checksums\" is not an array of one checksum per " +
                    std::to_string(b.chunk_bytes) + " of its " + std::to_string(n) + " bytes");
        for (const auto& c : cl->items) b.chunk_sums.push_back(hex(&c));
      } else if (bv.get("chunk_checksums")) {
        throw bad(where + ": a box has \"chunk_checksums\" without \"chunk_bytes\"");
      }
      if (b.where.numel() > e.numel() - covered)  // (covered stays within the tensor's count: no overflow)
        throw bad(where + "'s boxes hold more than its " + std::to_string(e.numel()) + " elements (boxes overlap)");
      covered += b.where.numel();
      e.boxes.push_back(std::move(b));
    }
    if (whole && covered != e.numel())
      throw bad(where + "'s boxes hold " + std::to_string(covered) + " of its " + std::to_string(e.numel()) +
                " elements");
    m.tensors.push_back(std::move(e));
  }
  return m;
}

/// Reads and parses "<folder>/metadata.json".
inline metadata read_metadata(const std::filesystem::path& folder) {
  const std::filesystem::path p = folder / metadata_file;
  std::ifstream in(p, std::ios::binary);
  if (!in) throw error("checkpoint: cannot open '" + p.string() + "' (no complete checkpoint there)");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_metadata(ss.str(), p.string());
}

}  // namespace tessera::io::checkpoint
