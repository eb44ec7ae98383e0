// tessera/io/safetensors.hpp: read and write the safetensors format.
//
// Format (huggingface/safetensors): 8-byte little-endian header length N, then N bytes of
// JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"k": "v"}}, then the raw little-endian data; offsets are relative to the
// end of the header. Readers here validate everything (header length, JSON, dtype, shape
// against byte size, offsets inside the file) and throw tessera::error naming the file and
// the tensor. Writers write through core/atomic_file.hpp (a temporary file renamed into
// place), so a crash never leaves a half-written file under the final name.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>


#include <tessera/core/atomic_file.hpp>
#include <tessera/core/dtype.hpp>
#include <tessera/core/error.hpp>
#include <tessera/core/json.hpp>

namespace tessera::io::safetensors {

/// safetensors data is little-endian; tessera copies it as is, so the host must be too.
inline void check_host_endianness() {
  check(std::endian::native == std::endian::little,
        "safetensors: tessera reads and writes safetensors on little-endian hosts only");
}

/// The library's one element-type enum (core/dtype.hpp). tessera reads F32, BF16 and F16
/// and writes F32 and BF16.
using dtype = ::tessera::dtype;

/// The safetensors spelling of `d` ("F32", "BF16", "F16", "F8_E4M3", ...).
inline std::string_view dtype_name(dtype d) {
  switch (d) {
    case dtype::u8: return "U8";
    case dtype::i32: return "I32";
    case dtype::i64: return "I64";
    case dtype::f32: return "F32";
    case dtype::f64: return "F64";
    case dtype::bf16: return "BF16";
    case dtype::f8e4m3: return "F8_E4M3";
    case dtype::f8e5m2: return "F8_E5M2";
    case dtype::f16: return "F16";
  }
  return "?";
}
inline std::size_t dtype_size(dtype d) { return size_of(d); }

namespace detail {
inline float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}
/// Round to nearest even; NaN stays a (quiet) NaN.
inline std::uint16_t f32_to_bf16(float f) {
  const auto u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  const std::uint32_t lsb = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7FFFu + lsb) >> 16);
}
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t man = h & 0x3FFu;
  if (exp == 0) {
    const float v = static_cast<float>(man) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}
}  // namespace detail

/// One tensor's entry in the header.
struct tensor_info {
  std::string name;
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  ///< byte offsets into the data section
  std::uint64_t end = 0;
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
};

/// "[a, b]" (or with `sep` ",": the header's JSON, "[a,b]").
inline std::string shape_string(std::span<const std::int64_t> s, std::string_view sep = ", ") {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += sep;
    out += std::to_string(s[i]);
  }
  out += "]";
  return out;
}

/// A safetensors file opened for reading: the header is parsed and checked at open time;
/// tensor data is read on demand, converted to f32.
class reader {
 public:
  explicit reader(const std::filesystem::path& path) : path_(path) {
    check_host_endianness();
    const std::string p = path.string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      throw error("safetensors: cannot open '" + p + "': no such file");
    file_size_ = std::filesystem::file_size(path, ec);
    in_.open(path, std::ios::binary);
    if (!in_) throw error("safetensors: cannot open '" + p + "' for reading");
    if (file_size_ < 8)
      throw error("safetensors: '" + p + "' is truncated: " + std::to_string(file_size_) +
                  " bytes, shorter than the 8-byte header length");
    unsigned char len_bytes[8];
    in_.read(reinterpret_cast<char*>(len_bytes), 8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
    if (n > file_size_ - 8)
      throw error("safetensors: '" + p + "' is truncated or not a safetensors file: header "
                  "length " + std::to_string(n) + " exceeds the " +
                  std::to_string(file_size_ - 8) + " bytes after it");
    if (n > (std::uint64_t{100} << 20))
      throw error("safetensors: '" + p + "': header length " + std::to_string(n) +
                  " is over 100 MiB; the file is corrupt");
    std::string header(n, '\0');
    in_.read(header.data(), static_cast<std::streamsize>(n));
    data_start_ = 8 + n;
    parse_header(header);
  }

  const std::filesystem::path& path() const { return path_; }
  const std::vector<tensor_info>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The byte offset of the data section in the file (8 + the header's length).
  std::uint64_t data_start() const { return data_start_; }

  const tensor_info* find(std::string_view name) const {
    for (const auto& t : tensors_)
      if (t.name == name) return &t;
    return nullptr;
  }

  /// Reads tensor `name` into `out` as f32, checking that it exists and has `shape`.
  void read_f32(std::string_view name, std::span<const std::int64_t> shape,
                std::span<float> out) {
    read_rows_f32(name, shape, 0, shape.empty() ? 1 : shape[0], out);
  }
  /// Reads rows [r0, r1) of tensor `name` -- along its first dimension; each row the product
  /// of the others, a 1-D tensor's rows single elements -- into `out` as f32, reading those
  /// rows' bytes only; checks that it exists and has `shape`, and that the rows are inside.
  void read_rows_f32(std::string_view name, std::span<const std::int64_t> shape, std::int64_t r0,
                     std::int64_t r1, std::span<float> out) {
    read_block_f32(name, shape, r0, r1, 0, -1, out);
  }
  /// The same for columns [c0, c1) of those rows (a row's elements; c1 = -1: to the row's
  /// end), row-major in `out`: one read when they are whole rows, else one a row.
  void read_block_f32(std::string_view name, std::span<const std::int64_t> shape, std::int64_t r0,
                      std::int64_t r1, std::int64_t c0, std::int64_t c1, std::span<float> out) {
    const tensor_info* t = find(name);
    if (!t)
      throw error("safetensors: '" + path_.string() + "' has no tensor named '" +
                  std::string(name) + "'");
    if (!std::equal(t->shape.begin(), t->shape.end(), shape.begin(), shape.end()))
      throw error("safetensors: '" + path_.string() + "': tensor '" + std::string(name) +
                  "' has shape " + shape_string(t->shape) + ", expected " +
                  shape_string(shape));
    const std::int64_t rows = t->shape.empty() ? 1 : t->shape[0];
    const std::int64_t row = rows == 0 ? 0 : t->numel() / rows;  // elements a row
    if (c1 < 0) c1 = row;
    check(0 <= r0 && r0 <= r1 && r1 <= rows && 0 <= c0 && c0 <= c1 && c1 <= row,
          "safetensors: rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ") and columns [" +
              std::to_string(c0) + ", " + std::to_string(c1) + ") outside tensor '" + std::string(name) +
              "' of shape " + shape_string(t->shape));
    const std::int64_t n = c1 - c0;
    check(static_cast<std::int64_t>(out.size()) == (r1 - r0) * n,
          "safetensors: output buffer size does not match the block of tensor '" + std::string(name) + "'");
    if (out.empty()) return;  // nothing to read
    const std::size_t size = dtype_size(t->type);
    const bool whole_rows = n == row;
    std::vector<std::uint16_t> tmp(t->type == dtype::f32 ? 0 : out.size());
    char* to = t->type == dtype::f32 ? reinterpret_cast<char*>(out.data()) : reinterpret_cast<char*>(tmp.data());
    in_.clear();
    for (std::int64_t r = r0; r < (whole_rows ? r0 + 1 : r1); ++r) {  // whole rows: one read
      const std::size_t bytes = static_cast<std::size_t>(whole_rows ? (r1 - r0) * n : n) * size;
      in_.seekg(static_cast<std::streamoff>(data_start_ + t->begin + static_cast<std::uint64_t>(r * row + c0) * size));
      in_.read(to, static_cast<std::streamsize>(bytes));
      to += bytes;
      bytes_read_ += bytes;
    }
    if (!in_)
      throw error("safetensors: '" + path_.string() + "': reading tensor '" +
                  std::string(name) + "' failed (file truncated?)");
    for (std::size_t i = 0; i < tmp.size(); ++i)
      out[i] = t->type == dtype::bf16 ? detail::bf16_to_f32(tmp[i]) : detail::f16_to_f32(tmp[i]);
  }
  /// Bytes of tensor data read so far.
  std::uint64_t bytes_read() const noexcept { return bytes_read_; }

 private:
  std::filesystem::path path_;
  std::ifstream in_;
  std::uint64_t file_size_ = 0;
  std::uint64_t data_start_ = 0;
  std::uint64_t bytes_read_ = 0;
  std::vector<tensor_info> tensors_;
  std::map<std::string, std::string> metadata_;

  /// Headers nest 3 levels (root, tensor, shape); a little room for metadata writers.
  static constexpr int max_header_depth = 8;

  [[noreturn]] void bad(const std::string& what) const {
    throw error("safetensors: '" + path_.string() + "' has a corrupt header: " + what);
  }

  void parse_header(const std::string& header) {
    json::value root;
    try {
      root = json::parse(header, "the JSON", max_header_depth);
    } catch (const error& e) {
      bad(e.what());
    }
    if (!root.is_object()) bad("the header is not a JSON object");
    const std::uint64_t data_size = file_size_ - data_start_;
    for (std::size_t i = 0; i < root.keys.size(); ++i) {
      const std::string& name = root.keys[i];
      const json::value& v = root.items[i];
      if (name == "__metadata__") {
        if (!v.is_object()) bad("__metadata__ is not an object");
        for (std::size_t j = 0; j < v.keys.size(); ++j) {
          if (!v.items[j].is_string())
            bad("__metadata__ value '" + v.keys[j] + "' is not a string");
          metadata_[v.keys[j]] = v.items[j].str;
        }
        continue;
      }
      if (!v.is_object()) bad("entry '" + name + "' is not an object");
      tensor_info t;
      t.name = name;
      const json::value* dt = v.get("dtype");
      const json::value* sh = v.get("shape");
      const json::value* off = v.get("data_offsets");
      if (!dt || !dt->is_string()) bad("tensor '" + name + "' has no dtype string");
      if (!sh || !sh->is_array()) bad("tensor '" + name + "' has no shape array");
      if (!off || !off->is_array() || off->items.size() != 2)
        bad("tensor '" + name + "' has no [begin, end] data_offsets");
      if (dt->str == "F32") t.type = dtype::f32;
      else if (dt->str == "BF16") t.type = dtype::bf16;
      else if (dt->str == "F16") t.type = dtype::f16;
      else
        throw error("safetensors: '" + path_.string() + "': tensor '" + name + "' has dtype " +
                    dt->str.substr(0, 40) + "; tessera reads F32, BF16 and F16");
      // Sizes in checked arithmetic: the byte size of the tensor must fit 63 bits.
      std::int64_t bytes = static_cast<std::int64_t>(dtype_size(t.type));
      for (const auto& d : sh->items) {
        const auto n = d.as_int64();
        if (!n || *n < 0) bad("tensor '" + name + "' has a dimension that is not an integer >= 0");
        t.shape.push_back(*n);
        if (bytes != 0 && *n > std::numeric_limits<std::int64_t>::max() / bytes)
          bad("tensor '" + name + "' of shape " + shape_string(t.shape) +
              "... has more elements than any file can hold (its byte size overflows 64 bits)");
        bytes *= *n;
      }
      const auto b = off->items[0].as_int64();
      const auto e = off->items[1].as_int64();
      if (!b || !e || *b < 0 || *e < 0)
        bad("tensor '" + name + "' has a data offset that is not an integer >= 0");
      t.begin = static_cast<std::uint64_t>(*b);
      t.end = static_cast<std::uint64_t>(*e);
      if (t.end < t.begin) bad("tensor '" + name + "' ends before it begins");
      const std::uint64_t want = static_cast<std::uint64_t>(bytes);
      if (t.end - t.begin != want)
        bad("tensor '" + name + "' of shape " + shape_string(t.shape) + " and dtype " +
            dt->str + " needs " + std::to_string(want) + " bytes but its offsets span " +
            std::to_string(t.end - t.begin));
      if (t.end > data_size)
        throw error("safetensors: '" + path_.string() + "' is truncated: tensor '" + name +
                    "' ends at byte " + std::to_string(t.end) + " of the data section, which "
                    "has only " + std::to_string(data_size) + " bytes");
      tensors_.push_back(std::move(t));
    }
  }
};

/// A tensor of a file to write: its name, shape and type (F32 or BF16).
struct tensor_decl {
  std::string name;
  std::vector<std::int64_t> shape;
  dtype type = dtype::f32;
};

namespace detail {
inline std::uint64_t byte_size(const tensor_decl& t) {
  std::uint64_t n = dtype_size(t.type);
  for (auto d : t.shape) n *= static_cast<std::uint64_t>(d);
  return n;
}
/// A file's header: the metadata, then each tensor at the offset after the one before,
/// padded with spaces so that the data section starts 8-byte aligned.
inline std::string header_text(const std::map<std::string, std::string>& meta, std::span<const tensor_decl> ts) {
  using json::quote;
  std::string h = "{";
  bool first = true;
  if (!meta.empty()) {
    h += "\"__metadata__\":{";
    bool f2 = true;
    for (const auto& [k, v] : meta) {
      if (!f2) h += ",";
      h += quote(k) + ":" + quote(v);
      f2 = false;
    }
    h += "}";
    first = false;
  }
  std::uint64_t off = 0;
  for (const tensor_decl& t : ts) {
    if (!first) h += ",";
    const std::uint64_t n = byte_size(t);
    h += quote(t.name) + ":{\"dtype\":\"" + std::string(dtype_name(t.type)) + "\",\"shape\":" + shape_string(t.shape, ",") +
         ",\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + n) + "]}";
    off += n;
    first = false;
  }
  h += "}";
  while ((8 + h.size()) % 8 != 0) h.push_back(' ');  // align the data section to 8 bytes
  return h;
}
/// The 8-byte little-endian length, then the header.
inline void write_header(std::ofstream& out, const std::string& h) {
  unsigned char len[8];
  const std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xFF);
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
}
}  // namespace detail

/// Writes a safetensors file at `path` (atomically; `sync`: fsync before the rename) holding
/// tensors `ts` in order, the k-th's f32 values from values(k) -- called once for each k in
/// order, each tensor written (BF16: rounded to nearest even, a chunk at a time) and flushed
/// before the next is asked for -- so that a caller holds one tensor at a time.
inline void write_streamed(const std::filesystem::path& path, std::span<const tensor_decl> ts,
                           const std::map<std::string, std::string>& meta,
                           const std::function<std::span<const float>(std::size_t)>& values, bool sync = false) {
  check_host_endianness();
  for (const tensor_decl& t : ts)
    check(t.type == dtype::f32 || t.type == dtype::bf16,
          "safetensors: writing " + std::string(dtype_name(t.type)) + " is not supported; use F32 or BF16");
  const std::string h = detail::header_text(meta, ts);
  write_file_atomically(path, [&](std::ofstream& out) {
    detail::write_header(out, h);
    std::vector<std::uint16_t> chunk;
    for (std::size_t k = 0; k < ts.size(); ++k) {
      const std::span<const float> v = values(k);
      check(v.size() * dtype_size(ts[k].type) == detail::byte_size(ts[k]),
            "safetensors: tensor '" + ts[k].name + "': data size does not match its shape");
      if (ts[k].type == dtype::f32) {
        out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size_bytes()));
      } else {
        for (std::size_t i = 0; i < v.size(); i += std::size_t{1} << 20) {
          chunk.resize(std::min(v.size() - i, std::size_t{1} << 20));
          for (std::size_t j = 0; j < chunk.size(); ++j) chunk[j] = detail::f32_to_bf16(v[i + j]);
          out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(2 * chunk.size()));
        }
      }
      out.flush();
    }
  }, "safetensors", sync);
}

/// Collects tensors and writes one safetensors file (atomically: temp file, then rename).
class writer {
 public:
  /// Adds a tensor from f32 data, stored as `type` (F32, or BF16 rounded to nearest even).
  void add(std::string name, std::vector<std::int64_t> shape, std::span<const float> data,
           dtype type = dtype::f32) {
    check(type == dtype::f32 || type == dtype::bf16,
          "safetensors: writing " + std::string(dtype_name(type)) + " is not supported; use F32 or BF16");
    entry e{std::move(name), type, std::move(shape), {}, {}};
    check_size(e, data.size());
    e.owned.resize(data.size() * dtype_size(type));
    if (data.empty()) {
      // nothing to copy (and memcpy from the null data() of an empty span is undefined)
    } else if (type == dtype::f32) {
      std::memcpy(e.owned.data(), data.data(), e.owned.size());
    } else {
      for (std::size_t i = 0; i < data.size(); ++i) {
        const std::uint16_t h = detail::f32_to_bf16(data[i]);
        std::memcpy(e.owned.data() + 2 * i, &h, 2);
      }
    }
    e.bytes = e.owned;  // the vector's heap buffer: stays put when the entry moves
    entries_.push_back(std::move(e));
  }
  /// Adds an F32 tensor without copying it: `data` must stay alive and unchanged until
  /// write() returns (a caller's staging buffer, reused from one file to the next).
  void add_view(std::string name, std::vector<std::int64_t> shape, std::span<const float> data) {
    entry e{std::move(name), dtype::f32, std::move(shape), {}, {}};
    check_size(e, data.size());
    e.bytes = std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(data.data()), data.size_bytes());
    entries_.push_back(std::move(e));
  }
  void add_metadata(std::string key, std::string value) { meta_[std::move(key)] = std::move(value); }
  /// The bytes of the k-th tensor added, as they will be written.
  std::span<const unsigned char> bytes(std::size_t k) const { return entries_[k].bytes; }

  /// Writes the file (atomically; `sync`: fsync before the rename) and returns the byte
  /// offset at which the data section begins (tensor k's bytes follow those of 0..k-1).
  std::uint64_t write(const std::filesystem::path& path, bool sync = false) const {
    check_host_endianness();
    std::vector<tensor_decl> ts;
    for (const auto& e : entries_) ts.push_back({e.name, e.shape, e.type});
    const std::string h = detail::header_text(meta_, ts);
    write_file_atomically(path, [&, this](std::ofstream& out) {
      detail::write_header(out, h);
      for (const auto& e : entries_)
        out.write(reinterpret_cast<const char*>(e.bytes.data()),
                  static_cast<std::streamsize>(e.bytes.size()));
    }, "safetensors", sync);
    return 8 + h.size();
  }

 private:
  struct entry {
    std::string name;
    dtype type;
    std::vector<std::int64_t> shape;
    std::vector<unsigned char> owned;         ///< add()'s copy (empty for add_view())
    std::span<const unsigned char> bytes;     ///< what is written: owned, or the caller's data
  };
  std::vector<entry> entries_;

  static void check_size(const entry& e, std::size_t count) {
    std::int64_t n = 1;
    for (auto s : e.shape) n *= s;
    check(n == static_cast<std::int64_t>(count), "safetensors: tensor '" + e.name + "': data size does not match its shape");
  }
  std::map<std::string, std::string> meta_;

};

}  // namespace tessera::io::safetensors
