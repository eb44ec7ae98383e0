// safetensors and Hugging Face checkpoints: round trips and every kind of bad file.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <tessera/model/llama.hpp>
#include <tessera/train/hf_checkpoint.hpp>
#include <tessera/train/safetensors.hpp>

// A namespace of its own: CI compiles this program as one translation unit (TESSERA_UNITY_TESTS).
namespace model_checkpoint_tests {
namespace {
using namespace tessera;
namespace st = tessera::train::safetensors;
namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path d = fs::path(TESSERA_TEST_SCRATCH) / "checkpoint";
  fs::create_directories(d);
  return d / name;
}
void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}
std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
/// A file with the given header text and `data_bytes` zero bytes of data.
std::string make_file(const std::string& header, std::size_t data_bytes) {
  std::string out(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[std::size_t(i)] = char((n >> (8 * i)) & 0xFF);
  return out + header + std::string(data_bytes, '\0');
}
struct tiny {
  static constexpr llama_config config{.name = "tiny", .dim = 32, .n_layers = 2, .n_heads = 4,
                                       .n_kv_heads = 2, .vocab_size = 96, .multiple_of = 16};
};
struct other {
  static constexpr llama_config config{.name = "other", .dim = 32, .n_layers = 2, .n_heads = 4,
                                       .n_kv_heads = 4, .vocab_size = 96, .multiple_of = 16};
};
train::param_access params_of(llama_model& m) {
  return [&m](std::int64_t i) { return m.param(i); };
}
}  // namespace

TEST_CASE("safetensors: f32 and bf16 round trip with metadata") {
  std::vector<float> a{1.0f, -2.5f, 3.14159f, 1e-20f, 65504.0f, -0.0f};
  std::vector<float> b{0.1f, 0.2f};
  st::writer w;
  w.add("a", {2, 3}, a);
  w.add("b", {2}, b, st::dtype::bf16);
  w.add_metadata("format", "pt");
  w.write(scratch("rt.safetensors"));
  CHECK(!fs::exists(scratch("rt.safetensors").string() + ".tmp." + std::to_string(::getpid())));
  const std::string raw = read_bytes(scratch("rt.safetensors"));
  std::uint64_t hlen = 0;
  std::memcpy(&hlen, raw.data(), 8);
  CHECK((8 + hlen) % 8 == 0);
  CHECK(raw.size() == 8 + hlen + 6 * 4 + 2 * 2);
  st::reader r(scratch("rt.safetensors"));
  CHECK(r.metadata().at("format") == "pt");
  REQUIRE(r.tensors().size() == 2);
  std::vector<float> a2(6), b2(2);
  r.read_f32("a", std::vector<std::int64_t>{2, 3}, a2);
  CHECK(a2 == a);
  r.read_f32("b", std::vector<std::int64_t>{2}, b2);
  CHECK(b2[0] == doctest::Approx(0.1f).epsilon(1.0 / 128));  // bf16 keeps 8 bits
  CHECK(b2[0] == st::detail::bf16_to_f32(st::detail::f32_to_bf16(0.1f)));
  // a block of rows, of columns, of a vector's elements: its bytes only
  std::vector<float> row1(3), cols12(4), b1(1);
  const std::uint64_t before = r.bytes_read();
  r.read_rows_f32("a", std::vector<std::int64_t>{2, 3}, 1, 2, row1);
  CHECK(row1 == std::vector<float>(a.begin() + 3, a.end()));
  r.read_block_f32("a", std::vector<std::int64_t>{2, 3}, 0, 2, 1, 3, cols12);
  CHECK(cols12 == std::vector<float>{a[1], a[2], a[4], a[5]});
  r.read_rows_f32("b", std::vector<std::int64_t>{2}, 1, 2, b1);
  CHECK(b1[0] == st::detail::bf16_to_f32(st::detail::f32_to_bf16(0.2f)));
  CHECK(r.bytes_read() - before == 3 * 4 + 4 * 4 + 2);
  CHECK_THROWS_WITH_AS(r.read_block_f32("a", std::vector<std::int64_t>{2, 3}, 1, 3, 0, 3, cols12),
                       doctest::Contains("rows [1, 3) and columns [0, 3) outside tensor 'a' of shape [2, 3]"),
                       tessera::error);
  CHECK(st::detail::f32_to_bf16(1.0f + 0x1p-8f) == 0x3F80);   // tie rounds to even
  CHECK(st::detail::f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f) == 0x3F82);
}

TEST_CASE("safetensors: bad files give errors naming the problem") {
  auto err = [](const fs::path& p) {
    try {
      st::reader r(p);
      std::vector<float> x(4);
      r.read_f32("x", std::vector<std::int64_t>{4}, x);
    } catch (const tessera::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(err(scratch("missing.safetensors")).find("no such file") != std::string::npos);
  write_bytes(scratch("short.safetensors"), "abc");
  CHECK(err(scratch("short.safetensors")).find("truncated") != std::string::npos);
  const std::string good = R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  write_bytes(scratch("ok.safetensors"), make_file(good, 16));
  CHECK(err(scratch("ok.safetensors")) == "no error");
  write_bytes(scratch("trunc.safetensors"), make_file(good, 10));
  CHECK(err(scratch("trunc.safetensors")).find("truncated") != std::string::npos);
  write_bytes(scratch("hdr.safetensors"), make_file(good, 16).substr(0, 30));
  CHECK(err(scratch("hdr.safetensors")).find("truncated") != std::string::npos);
  write_bytes(scratch("json.safetensors"), make_file(R"({"x":{"dtype":"F32",)", 16));
  CHECK(err(scratch("json.safetensors")).find("corrupt header") != std::string::npos);
  write_bytes(scratch("span.safetensors"),
              make_file(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 16));
  CHECK(err(scratch("span.safetensors")).find("needs 16 bytes") != std::string::npos);
  write_bytes(scratch("i8.safetensors"),
              make_file(R"({"x":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", 4));
  CHECK(err(scratch("i8.safetensors")).find("dtype I8") != std::string::npos);
  write_bytes(scratch("shape.safetensors"),
              make_file(R"({"x":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 16));
  CHECK(err(scratch("shape.safetensors")).find("has shape [2, 2], expected [4]") != std::string::npos);
  write_bytes(scratch("name.safetensors"),
              make_file(R"({"y":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 16));
  CHECK(err(scratch("name.safetensors")).find("no tensor named 'x'") != std::string::npos);
}

TEST_CASE("RoPE row permutation: HF half-rotated <-> interleaved") {
  // One head of dim 4, one column: HF rows (r0 r1 | r2 r3) pair (r0, r2) and (r1, r3);
  // interleaved pairs are adjacent: (r0, r2, r1, r3).
  std::vector<float> w{0, 1, 2, 3};
  train::permute_rope_rows(w, 1, 4, 1, true);
  CHECK(w == std::vector<float>{0, 2, 1, 3});
  train::permute_rope_rows(w, 1, 4, 1, false);
  CHECK(w == std::vector<float>{0, 1, 2, 3});
}

TEST_CASE("HF checkpoint: save then load gives the same parameters, f32 exactly") {
  llama<tiny> a, b;
  a.init_weights(3);
  train::save_hf_checkpoint(a.config(), params_of(a), scratch("tiny.safetensors"));
  train::load_hf_checkpoint(b.config(), params_of(b), scratch("tiny.safetensors"));
  for (std::int64_t i = 0; i < a.n_tensors(); ++i)
    CHECK(std::equal(a.param(i), a.param(i) + a.entry(i).shape.numel(), b.param(i)));
  // bf16: every value rounded once.
  train::save_hf_checkpoint(a.config(), params_of(a), scratch("tiny_bf16.safetensors"), st::dtype::bf16);
  CHECK(fs::file_size(scratch("tiny_bf16.safetensors")) < fs::file_size(scratch("tiny.safetensors")));
  train::load_hf_checkpoint(b.config(), params_of(b), scratch("tiny_bf16.safetensors"));
  for (std::int64_t i = 0; i < a.n_tensors(); ++i)
    for (std::int64_t j = 0; j < a.entry(i).shape.numel(); ++j)
      REQUIRE(b.param(i)[j] == st::detail::bf16_to_f32(st::detail::f32_to_bf16(a.param(i)[j])));
}

TEST_CASE("HF checkpoint: saved a tensor at a time, the writer's bytes exactly") {
  llama<tiny> a;
  a.init_weights(11);
  for (const st::dtype type : {st::dtype::f32, st::dtype::bf16}) {
    CAPTURE(static_cast<int>(type));
    // the reference: every tensor collected by safetensors::writer, then written
    st::writer w;
    w.add_metadata("format", "pt");
    w.add_metadata("tessera_config", "tiny");
    for (std::int64_t i = 0; i < a.n_tensors(); ++i) {
      const auto e = a.entry(i);
      std::vector<float> v(a.param(i), a.param(i) + e.shape.numel());
      if (e.role == param_role::attention_q) train::permute_rope_rows(v, 4, 8, 32, false);
      if (e.role == param_role::attention_k) train::permute_rope_rows(v, 2, 8, 32, false);
      w.add(train::hf_name(e), train::hf_shape(e), v, type);
    }
    const std::uint64_t data_start = w.write(scratch("collected.safetensors"));
    // streamed: when tensor i is asked for, the file being written holds tensors 0 .. i-1
    const fs::path path = scratch("streamed.safetensors");
    std::int64_t asked = 0;
    std::uint64_t before = data_start;  // bytes tensors 0 .. asked-1 end at
    bool in_order = true, written_before = true;
    train::save_hf_checkpoint_streamed(a.config(), [&](std::int64_t i) {
      in_order = in_order && i == asked;
      written_before = written_before && fs::file_size(tessera::atomic_temp_path(path)) == before;
      before += static_cast<std::uint64_t>(a.entry(i).shape.numel()) * (type == st::dtype::bf16 ? 2 : 4);
      ++asked;
      return std::vector<float>(a.param(i), a.param(i) + a.entry(i).shape.numel());
    }, path, type);
    CHECK(asked == a.n_tensors());
    CHECK(in_order);
    CHECK(written_before);
    CHECK(read_bytes(path) == read_bytes(scratch("collected.safetensors")));
  }
  // a file that cannot be written: every tensor is still asked for (a parallel run's gathers
  // are collectives), then the error
  std::int64_t asked = 0;
  CHECK_THROWS_WITH_AS(train::save_hf_checkpoint_streamed(a.config(), [&](std::int64_t i) {
    ++asked;
    return std::vector<float>(a.param(i), a.param(i) + a.entry(i).shape.numel());
  }, scratch("no/such/dir/x.safetensors")), doctest::Contains("cannot create"), tessera::error);
  CHECK(asked == a.n_tensors());
  // a tensor of the wrong size names the parameter, and the rest are still asked for
  asked = 0;
  CHECK_THROWS_WITH_AS(train::save_hf_checkpoint_streamed(a.config(), [&](std::int64_t) {
    ++asked;
    return std::vector<float>(3);
  }, scratch("wrong_size.safetensors")), doctest::Contains("parameter 0 has 3 values"), tessera::error);
  CHECK(asked == a.n_tensors());
  CHECK(!fs::exists(scratch("wrong_size.safetensors")));
}

TEST_CASE("HF checkpoint: sharded checkpoints load through their index.json") {
  llama<tiny> a, b;
  a.init_weights(5);
  const fs::path dir = scratch("sharded");
  fs::create_directories(dir);
  // Two shards: the embedding alone, everything else.
  st::writer s1, s2;
  std::string map = "{\"metadata\":{},\"weight_map\":{";
  for (std::int64_t i = 0; i < a.n_tensors(); ++i) {
    const auto e = a.entry(i);
    std::vector<float> v(a.param(i), a.param(i) + e.shape.numel());
    if (e.role == param_role::attention_q) train::permute_rope_rows(v, 4, 8, 32, false);
    if (e.role == param_role::attention_k) train::permute_rope_rows(v, 2, 8, 32, false);
    (i == 0 ? s1 : s2).add(train::hf_name(e), train::hf_shape(e), v);
    map += std::string(i ? "," : "") + "\"" + train::hf_name(e) + "\":\"" +
           (i == 0 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors") + "\"";
  }
  s1.write(dir / "model-00001-of-00002.safetensors");
  s2.write(dir / "model-00002-of-00002.safetensors");
  write_bytes(dir / "model.safetensors.index.json", map + "}}");
  train::load_hf_checkpoint(b.config(), params_of(b), dir);
  for (std::int64_t i = 0; i < a.n_tensors(); ++i)
    CHECK(std::equal(a.param(i), a.param(i) + a.entry(i).shape.numel(), b.param(i)));
}

TEST_CASE("HF checkpoint: a rank's blocks alone, reading only them") {
  llama<tiny> a, whole;
  a.init_weights(7);
  for (const st::dtype type : {st::dtype::f32, st::dtype::bf16}) {
    const bool bf16 = type == st::dtype::bf16;
    const fs::path file = scratch(bf16 ? "blocks_bf16.safetensors" : "blocks.safetensors");
    train::save_hf_checkpoint(a.config(), params_of(a), file, type);
    train::load_hf_checkpoint(whole.config(), params_of(whole), file);
    std::uint64_t data = 0;  // the file's tensor bytes
    const st::reader r(file);
    for (const auto& t : r.tensors()) data += t.end - t.begin;
    // blocks as a sharded run stores them: rows in 3 uneven parts (q's and k's 32 and 16 rows
    // cut inside heads of 8), columns in 2, both, and every other tensor on another stage
    struct layout {
      const char* name;
      int row_parts, col_parts;
      bool skip_odd;
    };
    for (const layout l : {layout{"rows", 3, 1, false}, layout{"columns", 1, 2, false}, layout{"both", 3, 2, false},
                           layout{"stages", 1, 1, true}})
      for (int part = 0; part < l.row_parts * l.col_parts; ++part) {
        CAPTURE(l.name);
        CAPTURE(part);
        const int rp = part / l.col_parts, cp = part % l.col_parts;
        const auto block_of = [&](std::int64_t i) {
          box b = whole_box(param_global_shape(a.entry(i)));
          if (l.skip_odd && i % 2 == 1) b.size[0] = 0;
          const auto cut = [&](std::size_t d, int k, int n) {
            const std::int64_t len = b.size[d], lo = len * k / n, hi = len * (k + 1) / n;
            b.offset[d] = lo, b.size[d] = hi - lo;
          };
          cut(0, rp, l.row_parts);
          if (b.rank == 2) cut(1, cp, l.col_parts);
          return b;
        };
        std::uint64_t want_bytes = 0;  // the block's elements, whole heads' rows for q and k
        std::int64_t checked = 0;
        const auto read = io::load_hf_checkpoint_blocks(
            a.config(), block_of,
            [&](std::int64_t i, const float* v) {
              const box b = block_of(i);
              const param_entry e = a.entry(i);
              const bool v1 = b.rank == 1;
              const std::int64_t cols = v1 ? 1 : e.shape.cols, c0 = v1 ? 0 : b.offset[1], nc = v1 ? 1 : b.size[1];
              bool same = true;
              for (std::int64_t r = 0; r < b.size[0]; ++r)
                for (std::int64_t c = 0; c < nc; ++c)
                  same = same && v[r * nc + c] == whole.param(i)[(b.offset[0] + r) * cols + c0 + c];
              CHECK(same);
              const bool qk = e.role == param_role::attention_q || e.role == param_role::attention_k;
              const std::int64_t hd = qk ? 8 : 1, lo = b.offset[0] / hd * hd;
              const std::int64_t hi = (b.offset[0] + b.size[0] + hd - 1) / hd * hd;
              want_bytes += static_cast<std::uint64_t>((hi - lo) * nc * (bf16 ? 2 : 4));
              ++checked;
            },
            file);
        CHECK(checked == (l.skip_odd ? (a.n_tensors() + 1) / 2 : a.n_tensors()));
        CHECK(read == want_bytes);
        if (l.row_parts * l.col_parts > 1 || l.skip_odd) CHECK(read < data);  // a share of the file, not all
      }
  }
  const auto beyond = [&](std::int64_t i) {
    box b = whole_box(param_global_shape(a.entry(i)));
    b.offset[0] = 1;
    return b;
  };
  CHECK_THROWS_WITH_AS(io::load_hf_checkpoint_blocks(a.config(), beyond, [](std::int64_t, const float*) {},
                                                     scratch("blocks.safetensors")),
                       doctest::Contains("a block beyond parameter 0"), tessera::error);
}

TEST_CASE("HF checkpoint: shape and name mismatches are errors naming the tensor") {
  llama<tiny> a;
  llama<other> o;
  a.init_weights(3);
  train::save_hf_checkpoint(a.config(), params_of(a), scratch("tiny2.safetensors"));
  // other has 4 KV heads: k_proj is [32, 32] where the file has [16, 32].
  CHECK_THROWS_WITH_AS(train::load_hf_checkpoint(o.config(), params_of(o), scratch("tiny2.safetensors")),
                       doctest::Contains("model.layers.0.self_attn.k_proj.weight' has shape [16, 32], expected [32, 32]"),
                       tessera::error);
  // A file lacking a tensor, and a file with one the model does not have.
  st::writer w;
  w.add("model.embed_tokens.weight", {96, 32}, std::vector<float>(96 * 32));
  w.write(scratch("partial.safetensors"));
  CHECK_THROWS_WITH_AS(train::load_hf_checkpoint(a.config(), params_of(a), scratch("partial.safetensors")),
                       doctest::Contains("no tensor named 'model.layers.0.input_layernorm.weight'"),
                       tessera::error);
  st::reader full(scratch("tiny2.safetensors"));
  st::writer extra;
  for (const auto& t : full.tensors()) {
    std::vector<float> v(std::size_t(t.numel()));
    full.read_f32(t.name, t.shape, v);
    extra.add(t.name, t.shape, v);
  }
  extra.add("model.layers.2.input_layernorm.weight", {32}, std::vector<float>(32, 1.0f));
  extra.write(scratch("extra.safetensors"));
  CHECK_THROWS_WITH_AS(train::load_hf_checkpoint(a.config(), params_of(a), scratch("extra.safetensors")),
                       doctest::Contains("model.layers.2.input_layernorm.weight"), tessera::error);
  CHECK_THROWS_WITH_AS(train::load_hf_checkpoint(a.config(), params_of(a), scratch("nope.safetensors")),
                       doctest::Contains("no such file"), tessera::error);
  CHECK_THROWS_AS(train::save_hf_checkpoint(a.config(), params_of(a), scratch("no/such/dir/x.safetensors")),
                  tessera::error);
}
}  // namespace model_checkpoint_tests
