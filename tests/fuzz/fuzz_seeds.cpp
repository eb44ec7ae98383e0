// Writes the seed corpora of the harnesses with the project's own writers:
//   fuzz_seeds <dir>   ->  <dir>/<harness>/<n>  for json, safetensors, flight, layout,
//                          schedule_csv, token_file, checkpoint (hf_index, toml_config and link_profile
//                          seeds are checked in under tests/fuzz/seeds/; their folders are
//                          made).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <tessera/comm/flight_analyzer.hpp>
#include <tessera/core/json.hpp>
#include <tessera/io/checkpoint_format.hpp>
#include <tessera/io/safetensors.hpp>
#include <tessera/io/token_file.hpp>
#include <tessera/layout/parse.hpp>
#include <tessera/layout/print.hpp>
#include <tessera/pipeline/pipeline.hpp>

namespace fs = std::filesystem;

namespace {
fs::path root;
int counter = 0;
fs::path next(const std::string& harness) {
  fs::create_directories(root / harness);
  return root / harness / ("seed" + std::to_string(counter++));
}
void put(const std::string& harness, const std::string& bytes) {
  std::ofstream(next(harness), std::ios::binary) << bytes;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  root = argv[1];
  try {
    for (const char* h : {"json", "safetensors", "hf_index", "token_file", "flight", "layout", "schedule_csv",
                          "checkpoint", "toml_config", "link_profile"})
      fs::create_directories(root / h);  // every harness's corpus folder, seeded here or not
    // safetensors: f32, bf16, an empty tensor, metadata (the writer's own files)
    {
      tessera::io::safetensors::writer w;
      w.add("a", {2, 2}, std::vector<float>{1, 2, 3, 4});
      w.add("b.weight", {3}, std::vector<float>{-1, 0.5f, 8}, tessera::io::safetensors::dtype::bf16);
      w.add("empty", {0}, std::vector<float>{});
      w.add_metadata("format", "pt");
      w.write(next("safetensors"));
      tessera::io::safetensors::writer one;
      one.add("x", {1}, std::vector<float>{3});
      one.write(next("safetensors"));
    }
    // checkpoint metadata: two ranks' row blocks of a matrix (one with chunk checksums, as
    // the shard writer computes them), a vector written by rank 0, the state; the matrix in
    // BF16 (a model-only last save)
    {
      namespace ck = tessera::io::checkpoint;
      ck::metadata m;
      m.step = 7, m.world = 2;
      m.state = {{"step", "7"}, {"model", "debugmodel"}, {"loader.cursor", "12"}};
      ck::tensor_entry& w = m.add("layers.0.attention.wq.weight", tessera::shape_t{40, 4});
      std::vector<float> rows(80, 0.5f);
      for (int r = 0; r < 2; ++r) {
        ck::saved_box b;
        b.where.rank = 2;
        b.where.offset[0] = 20 * r, b.where.size[0] = 20, b.where.size[1] = 4;
        b.file = "shard-" + std::to_string(r) + ".safetensors";
        b.begin = 64, b.end = 64 + 320;
        ck::checksums(rows.data(), 320, r == 0 ? 64 : 0, b.sum, b.chunk_sums);
        b.chunk_bytes = b.chunk_sums.empty() ? 0 : 64;
        w.boxes.push_back(b);
      }
      ck::tensor_entry& n = m.add("norm.weight", tessera::shape_t{4});
      ck::saved_box v;
      v.where.rank = 1;
      v.where.size[0] = 4;
      v.file = "shard-0.safetensors", v.begin = 384, v.end = 400, v.sum = ck::checksum(rows.data(), 16);
      n.boxes.push_back(v);
      put("checkpoint", ck::to_json(m));
      m.tensors.pop_back();  // and one tensor alone
      put("checkpoint", ck::to_json(m));
      // a model-only save in bf16 (export_dtype): 2 bytes a value, with chunk checksums
      m.state["contents"] = "model";
      ck::tensor_entry& h = m.tensors.front();
      h.dtype = "BF16";
      for (auto& b : h.boxes) {
        b.end = b.begin + 160;
        ck::checksums(rows.data(), 160, b.chunk_sums.empty() ? 0 : 64, b.sum, b.chunk_sums);
      }
      put("checkpoint", ck::to_json(m));
    }
    // JSON: what the safetensors header and the flight recorder write, and dumps of values
    put("json", tessera::json::dump(tessera::json::parse(
                    R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"__metadata__":{"format":"pt"}})", "seed")));
    put("json", tessera::json::dump(tessera::json::parse(R"([1,-2.5,1e300,"\u00e9\n",true,false,null,{}])", "seed")));
    // flight dumps: two ranks of a small job (one dump, and two separated by NUL)
    {
      using namespace tessera::comm;
      flight_dump d;
      d.rank = 0;
      d.world_size = 2;
      d.backend = "threads";
      d.capacity = 8;
      d.recorded = 3;
      for (std::uint64_t k = 0; k < 3; ++k) {
        flight_entry e;
        e.id = k;
        e.group = {0, 1};
        e.seq = k;
        e.desc = call_desc{k == 2 ? call_kind::send : call_kind::all_reduce, 16, dtype::f32, reduce_op::sum,
                           k == 2 ? 1 : -1, 0};
        if (k == 2) e.seq = 0;
        e.state = "completed";
        e.file = "train.cpp";
        e.line = static_cast<std::uint32_t>(10 + k);
        e.function = "step";
        d.entries.push_back(e);
      }
      flight_dump r1 = d;
      r1.rank = 1;
      r1.entries[2].desc.kind = call_kind::recv;
      r1.entries[2].desc.peer = 0;
      put("flight", to_json(d));
      put("flight", to_json(d) + std::string(1, '\0') + to_json(r1));
    }
    // layouts: printed by the library in both notations (first byte: rank + 9 * (axes - 1))
    {
      const std::string_view names[] = {"dp", "tp", "pp", "cp"};
      const char* texts[] = {"S(0),R", "{0: (dp, tp), partial: sum(pp)}", "[S(1), S(0), P(max)]", "S(0)#1,S(0)#0", "{}"};
      for (const char* t : texts)
        for (int axes = 2; axes <= 4; ++axes)
          for (int rank : {2, 3}) {
            const std::span<const std::string_view> n(names, static_cast<std::size_t>(axes));
            try {
              const auto s = tessera::parse_layout(t, n, rank);
              const char first = static_cast<char>(rank + 9 * (axes - 1));
              put("layout", std::string(1, first) + tessera::to_canonical_string(s, n));
              put("layout", std::string(1, first) + tessera::to_dtensor_string(s));
            } catch (const tessera::error&) {
            }
          }
    }
    // schedule CSV: every generator's schedule, plain and lowered with FSDP
    for (auto k : tessera::pipeline::all_schedule_kinds) {
      const int v = tessera::pipeline::check_arguments(k, 2, 1, 4).empty() ? 1 : 2;
      const auto s = tessera::pipeline::generate(k, 2, v, 4);
      put("schedule_csv", tessera::pipeline::to_csv(s));
      put("schedule_csv", tessera::pipeline::to_csv(tessera::pipeline::lower(s, {.fsdp = true})));
    }
    // token files (first byte: vocabulary size)
    {
      const std::vector<std::int32_t> t = {1, 2, 3, 200, 0, 7};
      const fs::path p = root / "tokens.tmp";
      tessera::io::write_token_file(p, t);
      std::ifstream in(p, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      put("token_file", std::string(1, '\xff') + bytes);
      put("token_file", std::string(1, '\0') + bytes);
      fs::remove(p);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
