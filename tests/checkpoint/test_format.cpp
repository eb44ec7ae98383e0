// The checkpoint format (io/checkpoint_*.hpp): shards written by two "ranks", committed,
// read back into other blocks; and every bad input a clear error naming the file.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <tessera/io/checkpoint_format.hpp>
#include <tessera/io/checkpoint_io.hpp>
#include <tessera/io/safetensors.hpp>

#include <failure.hpp>

#include "scratch.hpp"

using namespace tessera;
namespace ck = tessera::io::checkpoint;
namespace fs = std::filesystem;

namespace {
using checkpoint_test::scratch;
using testing_support::has;

box make_box(std::int64_t r0, std::int64_t rows, std::int64_t c0, std::int64_t cols) {
  box b;
  b.rank = 2;
  b.offset[0] = r0, b.offset[1] = c0, b.size[0] = rows, b.size[1] = cols;
  return b;
}
box make_box1(std::int64_t o, std::int64_t n) {
  box b;
  b.rank = 1;
  b.offset[0] = o, b.size[0] = n;
  return b;
}

/// A 6x4 tensor "w" (value = 10 * row + col) split in rows over 2 ranks, and a replicated
/// vector "n" written by rank 0; committed as step `step`.
fs::path save(const fs::path& folder, std::int64_t step, const std::string& contents = "full") {
  const shape_t g{6, 4};
  std::vector<float> full(24);
  for (int i = 0; i < 24; ++i) full[static_cast<std::size_t>(i)] = static_cast<float>(10 * (i / 4) + i % 4);
  const fs::path tmp = ck::begin_save(folder, step);
  for (int r = 0; r < 2; ++r) {
    ck::shard_writer w;
    w.add("w", g, make_box(3 * r, 3, 0, 4), full.data() + 12 * r);
    if (r == 0) {
      const std::vector<float> n{1, 2, 3};
      box b;
      b.rank = 1;
      b.size[0] = 3;
      w.add("n", shape_t{3}, b, n.data());
    }
    w.write(tmp, r);
  }
  ck::wait_for_ranks(tmp, 2, 5);
  return ck::commit(folder, step, 2, {{"k", "v"}, {"contents", contents}});
}

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("save two ranks' blocks, commit, read any block back") {
  scratch s("roundtrip");
  const fs::path dir = save(s.dir, 5);
  CHECK(dir == ck::step_folder(s.dir, 5));
  CHECK(!fs::exists(ck::temp_folder(s.dir, 5)));
  CHECK(ck::latest(s.dir) == dir);
  ck::box_reader r(dir);
  CHECK(r.meta().step == 5);
  CHECK(r.meta().state.at("k") == "v");
  CHECK(r.meta().bytes() == (24 + 3) * 4);
  // a column block across both ranks' row blocks (FSDP rows saved, TP columns loaded)
  const box want = make_box(1, 4, 2, 2);
  std::vector<float> out(8, -1);
  CHECK(r.read("w", shape_t{6, 4}, want, out.data()) == 2 * 48);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) CHECK(out[static_cast<std::size_t>(2 * i + j)] == static_cast<float>(10 * (i + 1) + j + 2));
  // every shard opens with an ordinary safetensors reader
  io::safetensors::reader st(dir / "shard-1.safetensors");
  CHECK(st.find("w@3,0") != nullptr);
}

TEST_CASE("latest ignores unfinished saves; keep_latest_k prunes; a complete checkpoint is never overwritten") {
  scratch s("folders");
  save(s.dir, 10);
  save(s.dir, 20);
  fs::create_directories(ck::temp_folder(s.dir, 30));  // a save that crashed
  CHECK(ck::latest(s.dir) == ck::step_folder(s.dir, 20));
  CHECK(error_of([&] { ck::begin_save(s.dir, 20); }).find("not overwritten") != std::string::npos);
  save(s.dir, 30);  // replaces the crashed leftover
  CHECK(ck::prune(s.dir, 2) == 1);
  CHECK(ck::complete_steps(s.dir) == std::vector<std::int64_t>{20, 30});
  // a model-only last save does not take the newest full checkpoint with it
  save(s.dir, 40, "model");
  CHECK(ck::holds_weights_alone(ck::step_folder(s.dir, 40)));
  CHECK(!ck::holds_weights_alone(ck::step_folder(s.dir, 30)));
  CHECK(ck::prune(s.dir, 1) == 1);
  CHECK(ck::complete_steps(s.dir) == std::vector<std::int64_t>{30, 40});
  save(s.dir, 50, "model");
  CHECK(ck::prune(s.dir, 1) == 1);  // 40 goes, 30 (full) stays
  CHECK(ck::complete_steps(s.dir) == std::vector<std::int64_t>{30, 50});
  CHECK(ck::prune(s.dir, 2) == 0);
}

TEST_CASE("bad checkpoints: errors name the file and the tensor") {
  scratch s("bad");
  const fs::path dir = save(s.dir, 1);
  const std::vector<float> keep(12);
  auto read_w = [&] {
    ck::box_reader r(dir);
    std::vector<float> out(24);
    r.read("w", shape_t{6, 4}, make_box(0, 6, 0, 4), out.data());
  };
  SUBCASE("corrupt shard") {
    {
      std::fstream f(dir / "shard-1.safetensors", std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-5, std::ios::end);
      f.put('\x7f');
    }
    const std::string e = error_of(read_w);
    CHECK(e.find("shard-1.safetensors' is corrupt") != std::string::npos);
    CHECK(e.find("tensor 'w'") != std::string::npos);
  }
  SUBCASE("truncated shard") {
    fs::resize_file(dir / "shard-1.safetensors", fs::file_size(dir / "shard-1.safetensors") - 8);
    const std::string e = error_of(read_w);
    CHECK(e.find("shard-1.safetensors' is truncated") != std::string::npos);
    CHECK(e.find("'w'") != std::string::npos);
  }
  SUBCASE("missing shard") {
    fs::remove(dir / "shard-0.safetensors");
    CHECK(error_of(read_w).find("shard-0.safetensors' is missing") != std::string::npos);
  }
  SUBCASE("another model: other shape, unknown name") {
    ck::box_reader r(dir);
    std::vector<float> out(32);
    CHECK(error_of([&] { r.read("w", shape_t{8, 4}, make_box(0, 8, 0, 4), out.data()); }).find("another model") !=
          std::string::npos);
    CHECK(error_of([&] { r.read("v", shape_t{6, 4}, make_box(0, 6, 0, 4), out.data()); }).find("no tensor 'v'") !=
          std::string::npos);
  }
  SUBCASE("corrupt metadata") {
    {
      std::ofstream f(dir / "metadata.json", std::ios::trunc);
      f << "{\"format\":\"tessera-checkpoint\",\"version\":1,\"step\":1,\"world\":1,\"state\":{},\"tensors\":{\"w\":"
           "{\"dtype\":\"F32\",\"shape\":[6,4],\"boxes\":[]}}}";
    }
    const std::string e = error_of([&] { ck::box_reader r(dir); });
    CHECK(e.find("metadata.json") != std::string::npos);
    CHECK(e.find("tensor 'w''s boxes hold 0 of its 24") != std::string::npos);
    std::ofstream(dir / "metadata.json", std::ios::trunc) << "{\"format\": 1";
    CHECK(error_of([&] { ck::box_reader r(dir); }).find("metadata.json: invalid JSON") != std::string::npos);
  }
}

TEST_CASE("a rank that does not arrive: the timeout names it, nothing is committed") {
  scratch s("timeout");
  save(s.dir, 1);
  const fs::path tmp = ck::begin_save(s.dir, 2);
  ck::shard_writer w;
  const float x = 1;
  box b;
  b.rank = 1;
  b.size[0] = 1;
  w.add("x", shape_t{1}, b, &x);
  w.write(tmp, 0);
  const std::string e = error_of([&] { ck::wait_for_ranks(tmp, 3, 0.05); });
  CHECK(e.find("ranks 1, 2 of 3 did not finish") != std::string::npos);
  CHECK(error_of([&] { ck::commit(s.dir, 2, 3, {}); }).find("rank 1 wrote no") != std::string::npos);
  CHECK(ck::latest(s.dir) == ck::step_folder(s.dir, 1));
}

TEST_CASE("check_writable: a folder that cannot be created is reported before any training") {
  const std::string e = error_of([] { ck::check_writable("/proc/tessera_no_such_folder", 0); });
  CHECK(e.find("cannot create the folder '/proc/tessera_no_such_folder'") != std::string::npos);
  scratch s("probe");
  ck::check_writable(s.dir, 3);
  CHECK(fs::is_directory(s.dir));
  CHECK(fs::is_empty(s.dir));  // the probe is gone
}

TEST_CASE("an unwritable folder: a clear error, and the previous checkpoint stays") {
  if (::geteuid() == 0) return;  // root writes anywhere; the permission check cannot fail
  scratch s("unwritable");
  save(s.dir, 1);
  fs::permissions(s.dir, fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  const std::string e = error_of([&] { ck::begin_save(s.dir, 2); });
  CHECK(e.find("cannot create") != std::string::npos);
  CHECK(e.find(s.dir.string()) != std::string::npos);
  fs::permissions(s.dir, fs::perms::owner_all, fs::perm_options::add);
  CHECK(ck::latest(s.dir) == ck::step_folder(s.dir, 1));
}

namespace {
/// Step 1 of one rank holding matrix "w" (shape g, values `full`) whole, with chunks of `chunk` bytes.
fs::path save_whole(const fs::path& folder, const shape_t& g, const std::vector<float>& full, std::uint64_t chunk) {
  const fs::path tmp = ck::begin_save(folder, 1);
  ck::shard_writer w(chunk);
  w.add("w", g, make_box(0, g[0], 0, g[1]), full.data());
  w.write(tmp, 0);
  return ck::commit(folder, 1, 1, {});
}
}  // namespace

// A box of more than chunk_bytes carries each chunk's checksum: a reader that needs part of it
// (a rank of another mesh) reads and verifies only the chunks holding that part.
TEST_CASE("chunk checksums: a part of a box reads only its chunks, each verified") {
  scratch s("chunks");
  const shape_t g{64, 16};  // 4 KiB; chunks of 512 bytes: 8 rows each
  std::vector<float> full(64 * 16);
  for (std::size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i);
  const fs::path dir = save_whole(s.dir, g, full, 512);
  const ck::saved_box b = ck::read_metadata(dir).tensors.at(0).boxes.at(0);
  REQUIRE(b.chunk_bytes == 512);
  REQUIRE(b.chunk_sums.size() == 8);
  std::uint64_t whole = 0;
  std::vector<std::uint64_t> sums;
  ck::checksums(full.data(), 4096, 512, whole, sums);  // one pass gives the box's and each chunk's
  CHECK(whole == ck::checksum(full.data(), 4096));
  CHECK(sums[3] == ck::checksum(full.data() + 3 * 128, 512));
  auto read = [&](const box& want, std::uint64_t* bytes = nullptr) {
    ck::box_reader r(dir);
    std::vector<float> out(static_cast<std::size_t>(want.numel()));
    const std::uint64_t n = r.read("w", g, want, out.data());
    if (bytes) *bytes = n;
    for (std::int64_t i = 0; i < want.size[0]; ++i)
      for (std::int64_t j = 0; j < want.size[1]; ++j)
        REQUIRE(out[static_cast<std::size_t>(i * want.size[1] + j)] ==
                full[static_cast<std::size_t>((want.offset[0] + i) * 16 + want.offset[1] + j)]);
  };
  std::uint64_t n = 0;
  read(make_box(20, 8, 0, 16), &n);  // rows 20..27: chunks 2 and 3
  CHECK(n == 1024);
  read(make_box(16, 8, 0, 16), &n);  // rows 16..23: chunk 2 alone
  CHECK(n == 512);
  read(make_box(60, 4, 4, 4), &n);  // a corner: the last chunk
  CHECK(n == 512);
  read(make_box(0, 64, 4, 4), &n);  // columns: every chunk
  CHECK(n == 4096);
  read(make_box(0, 64, 0, 16), &n);
  CHECK(n == 4096);
  // a corrupt byte in chunk 0: what does not read it loads; what does names the chunk
  {
    std::fstream f(dir / "shard-0.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(b.begin + 100));
    f.put('\x7f');
  }
  read(make_box(20, 8, 0, 16));
  CHECK(error_of([&] { read(make_box(0, 4, 0, 16)); }).find("bytes 0..512 of it, has checksum") != std::string::npos);
  CHECK(error_of([&] { read(make_box(0, 64, 0, 16)); }).find("is corrupt: tensor 'w' block w@0,0 has checksum") !=
        std::string::npos);
  // the metadata's chunk fields are checked
  const std::string meta = ck::to_json(ck::read_metadata(dir));
  CHECK(ck::parse_metadata(meta, "m").tensors.at(0).boxes.at(0).chunk_sums == b.chunk_sums);  // round trip
  auto bad = [&](const std::string& from, const std::string& to) {
    std::string t = meta;
    const auto at = t.find(from);
    REQUIRE(at != std::string::npos);
    t.replace(at, from.size(), to);
    return error_of([&] { ck::parse_metadata(t, "m.json"); });
  };
  CHECK(bad("\"chunk_bytes\":512", "\"chunk_bytes\":500").find("not a positive multiple of 8") != std::string::npos);
  CHECK(bad("\"chunk_bytes\":512", "\"chunk_bytes\":1024").find("one checksum per 1024 of its 4096 bytes") !=
        std::string::npos);
  CHECK(bad("\"chunk_bytes\":512,", "").find("\"chunk_checksums\" without \"chunk_bytes\"") != std::string::npos);
  CHECK(bad("\"chunk_checksums\":[\"", "\"chunk_checksums\":[\"x").find("no 16-digit checksum") != std::string::npos);
}

TEST_CASE("chunk checksums: a block of more than 256 chunks gets larger chunks, 256 at most") {
  scratch s("many_chunks");
  const shape_t g{1000, 10};  // 40,000 bytes: 625 chunks of 64 would be too many; 250 of 160 (40,000 / 256 up to 8)
  std::vector<float> full(10000, 1.5f);
  const fs::path dir = save_whole(s.dir, g, full, 64);
  const ck::saved_box b = ck::read_metadata(dir).tensors.at(0).boxes.at(0);
  CHECK(b.chunk_bytes == 160);
  CHECK(b.chunk_sums.size() == 250);
  ck::box_reader r(dir);
  std::vector<float> out(40);
  CHECK(r.read("w", g, make_box(500, 4, 0, 10), out.data()) == 160);  // rows 500..503: bytes 20000..20160, one chunk
  CHECK(out[39] == 1.5f);
}

// fuzz_checkpoint's first finding (tests/fuzz/reproducers/checkpoint/shape_bytes_overflow): a
// shape whose element count overflowed 64 bits reached the box arithmetic; the parser refuses
// it, and boxes holding more than the tensor (they overlap) with it.
TEST_CASE("bad metadata: a shape beyond 64 bits of bytes, and overlapping boxes, are refused by name") {
  const std::string head = R"({"format":"tessera-checkpoint","version":1,"step":1,"world":1,"state":{},"tensors":{"w":)";
  const std::string box = R"({"offsets":[0,0],"sizes":[2,2],"file":"shard-0.safetensors","begin":0,"end":16,"checksum":"0000000000000000"})";
  CHECK(has(error_of([&] {
              ck::parse_metadata(head + R"({"dtype":"F32","shape":[40,499979999997999999],"boxes":[)" + box + "]}}}", "m.json");
            }),
            "m.json' is not valid checkpoint metadata: tensor 'w' has more elements than any file can hold"));
  CHECK(has(error_of([&] {
              ck::parse_metadata(head + R"({"dtype":"F32","shape":[2,2],"boxes":[)" + box + "," + box + "]}}}", "m.json");
            }),
            "tensor 'w''s boxes hold more than its 4 elements (boxes overlap)"));
}

// BF16 boxes (a model-only last save with export_dtype bf16): 2 bytes a value, rounded to
// nearest even when written, widened when read, in whole and in part (chunks of 256 bytes:
// 8 rows of 16 values), with the metadata saying so.
TEST_CASE("BF16 boxes: written rounded, read back widened, whole and in chunks") {
  scratch s("bf16");
  const shape_t g{64, 16};
  std::vector<float> full(64 * 16);
  for (std::size_t i = 0; i < full.size(); ++i) full[i] = 1.0f + static_cast<float>(i) / 3.0f;  // not bf16 values
  const fs::path tmp = ck::begin_save(s.dir, 1);
  ck::shard_writer w(256);
  w.add("w", g, make_box(0, 64, 0, 16), full.data(), dtype::bf16);
  w.add("v", shape_t{16}, make_box1(0, 16), full.data());  // an F32 tensor beside it
  CHECK(w.bytes() == 64 * 16 * 2 + 16 * 4);
  w.write(tmp, 0);
  const fs::path dir = ck::commit(s.dir, 1, 1, {});
  const ck::metadata m = ck::read_metadata(dir);
  const ck::tensor_entry& t = *m.find("w");
  CHECK(t.dtype == "BF16");
  CHECK(m.find("v")->dtype == "F32");
  CHECK(t.boxes.at(0).end - t.boxes.at(0).begin == 64 * 16 * 2);
  CHECK(t.boxes.at(0).chunk_sums.size() == 8);
  auto rounded = [](float x) { return io::safetensors::detail::bf16_to_f32(io::safetensors::detail::f32_to_bf16(x)); };
  auto read = [&](const box& want) {
    ck::box_reader r(dir);
    std::vector<float> out(static_cast<std::size_t>(want.numel()));
    const std::uint64_t n = r.read("w", g, want, out.data());
    std::int64_t rounded_off = 0;
    for (std::int64_t i = 0; i < want.size[0]; ++i)
      for (std::int64_t j = 0; j < want.size[1]; ++j) {
        const float f = full[static_cast<std::size_t>((want.offset[0] + i) * 16 + want.offset[1] + j)];
        REQUIRE(out[static_cast<std::size_t>(i * want.size[1] + j)] == rounded(f));
        rounded_off += rounded(f) != f;
      }
    CHECK(rounded_off * 2 > want.numel());  // most values did round (i / 3 is exact for a third of them)
    return n;
  };
  CHECK(read(make_box(0, 64, 0, 16)) == 2048);
  CHECK(read(make_box(20, 8, 2, 3)) == 512);  // rows 20..27: chunks 2 and 3
  CHECK(read(make_box(56, 8, 0, 16)) == 256);  // the last chunk alone
  std::vector<float> v(16);
  ck::box_reader r(dir);
  r.read("v", shape_t{16}, make_box1(0, 16), v.data());
  CHECK(std::equal(v.begin(), v.end(), full.begin()));
  // the metadata's dtype is checked: neither another name nor a byte range of f32 values
  const std::string meta = ck::to_json(m);
  CHECK(error_of([&] {
          std::string x = meta;
          x.replace(x.find("\"BF16\""), 6, "\"F16\"");
          ck::parse_metadata(x, "m.json");
        }).find("tensor 'w' has a dtype other than \"F32\" and \"BF16\"") != std::string::npos);
  CHECK(error_of([&] {
          std::string x = meta;
          x.replace(x.find("\"BF16\""), 6, "\"F32\"");
          ck::parse_metadata(x, "m.json");
        }).find("does not hold its 1024 F32 values") != std::string::npos);
}
