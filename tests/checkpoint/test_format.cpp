// The checkpoint format (io/checkpoint_*.hpp): shards written by two "ranks", committed,
// read back into other blocks; and every bad input a clear error naming the file.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <tessera/io/checkpoint_format.hpp>
#include <tessera/io/checkpoint_io.hpp>
#include <tessera/io/safetensors.hpp>

#include "scratch.hpp"

using namespace tessera;
namespace ck = tessera::io::checkpoint;
namespace fs = std::filesystem;

namespace {
using checkpoint_test::scratch;

box make_box(std::int64_t r0, std::int64_t rows, std::int64_t c0, std::int64_t cols) {
  box b;
  b.rank = 2;
  b.offset[0] = r0, b.offset[1] = c0, b.size[0] = rows, b.size[1] = cols;
  return b;
}

/// A 6x4 tensor "w" (value = 10 * row + col) split in rows over 2 ranks, and a replicated
/// vector "n" written by rank 0; committed as step `step`.
fs::path save(const fs::path& folder, std::int64_t step) {
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
  return ck::commit(folder, step, 2, {{"k", "v"}});
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
