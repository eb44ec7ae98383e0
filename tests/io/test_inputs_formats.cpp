// Issue 22's findings 8-10 and issue 18's stray '}': safetensors files, Hugging Face index
// files, token files and schedule CSV on the minimal inputs that were misread.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <tessera/io/hf_checkpoint.hpp>
#include <tessera/io/safetensors.hpp>
#include <tessera/io/token_file.hpp>
#include <tessera/pipeline/pipeline.hpp>
#include <vector>

namespace fs = std::filesystem;
namespace st = tessera::io::safetensors;
using tessera::error;

namespace {
fs::path scratch(const std::string& name) {
  fs::create_directories(TESSERA_TEST_SCRATCH);
  return fs::path(TESSERA_TEST_SCRATCH) / name;
}
/// A safetensors file of `header` (padded as the format allows) and `data_bytes` zero bytes.
fs::path safetensors_file(const std::string& name, std::string header, std::size_t data_bytes) {
  while (header.size() % 8) header.push_back(' ');
  const fs::path p = scratch(name);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xFF));
  out << header << std::string(data_bytes, '\0');
  return p;
}
std::string open_error(const fs::path& p) {
  try {
    st::reader r(p);
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("safetensors: sizes in checked arithmetic (finding 8)") {
  // The product of the shape overflows int64_t.
  const auto a = safetensors_file("overflow_shape.safetensors",
                                  R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
  CHECK(open_error(a) == "safetensors: '" + a.string() + "' has a corrupt header: tensor 'w' of shape "
                         "[4294967296, 4294967296]... has more elements than any file can hold (its byte size "
                         "overflows 64 bits)");
  // 2^62 F32 elements: numel fits, numel * 4 wrapped to 0 and matched empty offsets.
  const auto b = safetensors_file("wrap_bytes.safetensors",
                                  R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0);
  CHECK(open_error(b).find("tensor 'w' of shape [4611686018427387904]... has more elements than any file can hold") !=
        std::string::npos);
  // The largest that does not overflow is checked against the offsets as before.
  const auto c = safetensors_file("big.safetensors",
                                  R"({"w":{"dtype":"BF16","shape":[2,2305843009213693951],"data_offsets":[0,0]}})", 0);
  CHECK(open_error(c).find("needs 9223372036854775804 bytes but its offsets span 0") != std::string::npos);
  // Numbers out of range and non-integers are a corrupt header too (finding 1 through this reader).
  const auto d = safetensors_file("huge_number.safetensors",
                                  R"({"w":{"dtype":"F32","shape":[2e666],"data_offsets":[0,4]}})", 4);
  CHECK(open_error(d) == "safetensors: '" + d.string() + "' has a corrupt header: the JSON: invalid JSON at byte 34: "
                         "number 2e666 is out of the range of a double");
  const auto e = safetensors_file("float_dim.safetensors",
                                  R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4);
  CHECK(open_error(e).find("tensor 'w' has a dimension that is not an integer >= 0") != std::string::npos);
}

TEST_CASE("safetensors: a stray '}' makes a corrupt header, not a shorter one (issue 18)") {
  const auto p = safetensors_file("stray_brace.safetensors",
                                  R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}},)"
                                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  CHECK(open_error(p) == "safetensors: '" + p.string() + "' has a corrupt header: the JSON: invalid JSON at byte 54: "
                         "unexpected text after the JSON value");
  const auto q = safetensors_file("deep.safetensors", std::string(100000, '['), 0);
  CHECK(open_error(q).find("has a corrupt header: the JSON: invalid JSON at byte 8: nesting deeper than 8 levels") !=
        std::string::npos);
}

TEST_CASE("safetensors: what the writer writes reads back equal") {
  st::writer w;
  const std::vector<float> a = {1.f, -2.5f, 3.f, 0.f, 1e-3f, 7.f};
  w.add("a \"quoted\"\n name", {2, 3}, a);
  w.add("b", {3}, std::vector<float>{1.f, 2.f, 3.f}, st::dtype::bf16);
  w.add("empty", {0, 4}, std::vector<float>{});
  w.add_metadata("format", "pt");
  const auto p = scratch("roundtrip.safetensors");
  w.write(p);
  st::reader r(p);
  REQUIRE(r.tensors().size() == 3);
  CHECK(r.metadata().at("format") == "pt");
  std::vector<float> back(6);
  const std::int64_t shape[] = {2, 3};
  r.read_f32("a \"quoted\"\n name", shape, back);
  CHECK(back == a);
  CHECK(r.find("empty")->numel() == 0);
}

TEST_CASE("hf index: the weight map's file names are checked") {
  const fs::path idx = scratch("model.safetensors.index.json");
  using tessera::io::detail::index_files;
  CHECK_THROWS_WITH_AS(index_files(R"({"weight_map":{"w":"../../etc/passwd"}})", idx),
                       doctest::Contains("weight_map[\"w\"] names '../../etc/passwd', a file outside the index's folder"),
                       tessera::error);
  CHECK_THROWS_WITH_AS(index_files(R"({"weight_map":{"w":"/abs.safetensors"}})", idx),
                       doctest::Contains("a file outside the index's folder"), tessera::error);
  CHECK_THROWS_WITH_AS(index_files(R"({"weight_map":{"w":3}})", idx),
                       doctest::Contains(("checkpoint: '" + idx.string() + "': weight_map[\"w\"] is a number, not a file name").c_str()), tessera::error);
  CHECK_THROWS_WITH_AS(index_files(R"({"weight_map":{"w":"a.safetensors"}}})", idx),
                       doctest::Contains("is not valid JSON: JSON: invalid JSON at byte 36: unexpected text after"), tessera::error);
  CHECK_THROWS_WITH_AS(index_files(R"({"weight_map":{"w":"a.safetensors"},"n":2e666})", idx),
                       doctest::Contains("out of the range of a double"), tessera::error);
  const auto m = index_files(R"({"metadata":{"total_size":8},"weight_map":{"w":"a.safetensors","v":"sub/b.safetensors"}})", idx);
  CHECK(m.at("w") == idx.parent_path() / "a.safetensors");
  CHECK(m.at("v") == idx.parent_path() / "sub/b.safetensors");
}

TEST_CASE("token files: errors name the file; write and read are each other's reverse") {
  const std::vector<std::int32_t> t = {0, 5, 2, 7};
  const auto p = scratch("tokens.bin");
  tessera::io::write_token_file(p, t);
  CHECK(tessera::io::read_token_file(p, 8) == t);
  CHECK_THROWS_WITH_AS(tessera::io::read_token_file(p, 7),
                       doctest::Contains(("tokens: '" + p.string() + "': token 3 is 7, outside the vocabulary [0, 7)").c_str()), tessera::error);
  std::ofstream(scratch("odd.bin"), std::ios::binary) << "abcde";
  CHECK_THROWS_WITH_AS(tessera::io::read_token_file(scratch("odd.bin")), doctest::Contains("has 5 bytes, not a multiple of 4"),
                       tessera::error);
}

TEST_CASE("schedule CSV: a few bytes cannot make verify allocate gigabytes (finding 9)") {
  using namespace tessera::pipeline;
  std::string csv;
  for (int s = 0; s < 100; ++s) csv += std::to_string(s) + "F0,";
  csv += "0F999999\n";
  CHECK(csv.size() < 500);
  CHECK_THROWS_WITH_AS((void)read_csv(csv),
                       "schedule CSV names 100 stages and 1000000 microbatches (100000000 pairs) but holds only 101 "
                       "actions; a schedule has an F action for every stage and microbatch, so at most 10560 pairs "
                       "are accepted from this table; check the numbers in its cells",
                       schedule_error);
  CHECK(verify(read_csv("0F0,0B0,0F5\n")).what == problem::missing);  // tables that miss a few still verify
}

TEST_CASE("schedule CSV: read_csv(to_csv(s)) keeps idle trailing ranks (finding 10)") {
  using namespace tessera::pipeline;
  schedule s = read_csv("0F0,0B0\n\n\n");
  CHECK(s.ranks == 3);
  CHECK(s.actions[1].empty());
  CHECK(s.actions[2].empty());
  const schedule back = read_csv(to_csv(s));
  CHECK(back.ranks == 3);
  CHECK(back.actions == s.actions);
  CHECK(back.stage_rank == s.stage_rank);
  CHECK(read_csv("0F0,0B0\r\n").ranks == 1);  // the line end of the last row is no rank
  CHECK_THROWS_WITH_AS((void)read_csv("\n\n"), doctest::Contains("schedule CSV has no actions"), schedule_error);
}

// ---- one vocabulary (issue 20): one dtype enum and one reduce enum for every layer ----
#include <tessera/layout/placement.hpp>
#include <tessera/tensor/dtype.hpp>
#include <type_traits>

TEST_CASE("one dtype and one reduce op for comm, tensor, layouts and safetensors") {
  static_assert(std::is_same_v<tessera::comm::dtype, tessera::dtype>);
  static_assert(std::is_same_v<st::dtype, tessera::dtype>);
  static_assert(std::is_same_v<tessera::comm::reduce_op, tessera::reduce>);
  static_assert(tessera::comm::dtype_of<tessera::bf16> == tessera::dtype_of<tessera::bf16>);
  static_assert(tessera::comm::dtype_of<tessera::f8_e4m3fn> == tessera::dtype_of<tessera::f8_e4m3fn>);
  static_assert(tessera::dtype::f8_e5m2 == tessera::dtype::f8e5m2);
  static_assert(tessera::partial<tessera::reduce::max>::item.op == tessera::comm::reduce_op::max);
  CHECK(tessera::name_of(tessera::dtype::bf16) == "bfloat16");
  CHECK(tessera::short_name(tessera::dtype::bf16) == "bf16");
  CHECK(st::dtype_name(tessera::dtype::f16) == "F16");
  CHECK(tessera::to_string(tessera::reduce::avg) == "avg");
  CHECK_THROWS_WITH_AS(st::writer().add("h", {1}, std::vector<float>{1}, tessera::dtype::f16),
                       "safetensors: writing F16 is not supported; use F32 or BF16", tessera::error);
}
