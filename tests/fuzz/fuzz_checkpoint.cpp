// Checkpoint metadata (metadata.json of a distributed checkpoint, io/checkpoint_format.hpp;
// what a resume and tessera-ckpt read): any text gives metadata whose every box lies inside
// its tensor with a byte range of its values (F32 or BF16), a plain file name and, where it has chunk
// checksums, one per chunk -- the chunks a reader of any part of the box reads lie among
// them -- and which writes and reads back the same; or tessera::error naming the file.
#include <tessera/io/checkpoint_format.hpp>

#include "fuzz_support.hpp"

namespace ck = tessera::io::checkpoint;

namespace {
/// Box b's parts a reader may need: its first and last row, its first half of rows, a corner.
std::vector<tessera::box> parts_of(const tessera::box& b) {
  std::vector<tessera::box> v;
  if (b.numel() == 0) return v;
  tessera::box first = b, last = b, half = b, corner = b;
  first.size[0] = 1;
  last.offset[0] = b.offset[0] + b.size[0] - 1, last.size[0] = 1;
  half.size[0] = (b.size[0] + 1) / 2;
  for (int d = 0; d < b.rank; ++d) {
    const auto u = static_cast<std::size_t>(d);
    corner.offset[u] = b.offset[u] + b.size[u] - 1, corner.size[u] = 1;
  }
  return {first, last, half, corner, b};
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string source = "/ckpt/step-1/metadata.json";
  ck::metadata m;
  if (!fuzz_support::value_or_error([&] { m = ck::parse_metadata(text, source); }, source)) return 0;
  for (const auto& t : m.tensors) {
    std::int64_t covered = 0;
    for (const auto& b : t.boxes) {
      for (int d = 0; d < t.shape.rank; ++d) {
        const auto u = static_cast<std::size_t>(d);
        fuzz_support::require(b.where.offset[u] >= 0 && b.where.size[u] >= 0 &&
                                  b.where.offset[u] + b.where.size[u] <= t.shape.extent[u],
                              "a box outside its tensor was accepted: " + t.name);
      }
      fuzz_support::require((t.dtype == "F32" || t.dtype == "BF16") &&
                                b.end - b.begin == static_cast<std::uint64_t>(b.where.numel()) * t.value(),
                            "a byte range that does not hold the box (or a dtype not read) was accepted");
      fuzz_support::require(!b.file.empty() && b.file.find('/') == std::string::npos, "a file path was accepted");
      covered += b.where.numel();
      if (b.chunk_sums.empty()) continue;
      const std::uint64_t n = b.end - b.begin;
      fuzz_support::require(b.chunk_bytes > 0 && b.chunk_bytes % 8 == 0 &&
                                b.chunk_sums.size() == (n + b.chunk_bytes - 1) / b.chunk_bytes,
                            "chunk checksums that do not count the chunks were accepted");
      for (const tessera::box& x : parts_of(b.where)) {
        const ck::chunk_range k = ck::chunks_holding(b, x, t.value());
        fuzz_support::require(k.first < k.last && k.last <= b.chunk_sums.size(),
                              "a part's chunks lie outside the box's: " + t.name);
      }
    }
    fuzz_support::require(covered == t.numel(), "boxes that do not hold the tensor were accepted: " + t.name);
  }
  const std::string again = ck::to_json(m);
  ck::metadata back;
  fuzz_support::require(fuzz_support::value_or_error([&] { back = ck::parse_metadata(again, "again"); }),
                        "the metadata written back does not read");
  fuzz_support::require(ck::to_json(back) == again, "the metadata does not read back the same");
  return 0;
}
