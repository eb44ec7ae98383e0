// tessera-ckpt: look into a distributed checkpoint (docs/checkpoints.md).
//
//   tessera-ckpt list   DIR               tensors, their boxes, files, sizes and the saved state
//   tessera-ckpt verify DIR               reads every box and checks its checksum
//   tessera-ckpt export DIR OUT [--dtype f32|bf16] [--shard-mib N]
//                                         the weights as Hugging Face safetensors: one file
//                                         OUT, or with --shard-mib a folder OUT of files of at
//                                         most N MiB and model.safetensors.index.json
// DIR is a checkpoint ("step-<N>") or a --checkpoint.folder (its latest complete one).
// OUT's folder is created when missing. --help prints the usage (exit 0).
// Exit status: 0 ok, 1 a bad checkpoint (or an OUT that cannot be written), 2 bad usage.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <tessera/core/atomic_file.hpp>
#include <tessera/core/json.hpp>
#include <tessera/io/checkpoint_format.hpp>
#include <tessera/io/checkpoint_io.hpp>
#include <tessera/io/hf_checkpoint.hpp>
#include <tessera/io/safetensors.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_params.hpp>

namespace fs = std::filesystem;
namespace ck = tessera::io::checkpoint;
using tessera::error;

namespace {

constexpr const char* usage_text =
    "usage: tessera-ckpt list DIR | verify DIR | export DIR OUT [--dtype f32|bf16] [--shard-mib N]\n"
    "DIR: a checkpoint folder step-<N>, or a --checkpoint.folder (its latest complete checkpoint)\n";

/// Bad usage: the usage on stderr, exit 2 (--help prints it on stdout and exits 0).
int usage() {
  std::cerr << usage_text;
  return 2;
}

fs::path resolve(const fs::path& dir) {
  if (auto c = ck::checkpoint_in(dir)) return *c;
  throw error("'" + dir.string() + "' holds no complete checkpoint (no metadata.json in it or in a step-<N> folder)");
}

std::string ints(const std::int64_t* v, int n) { return ck::detail::ints(v, n); }

int list(const fs::path& dir) {
  const ck::metadata m = ck::read_metadata(dir);
  std::printf("checkpoint %s: step %lld, saved by %lld ranks, %zu tensors, %.2f MiB\n", dir.string().c_str(),
              static_cast<long long>(m.step), static_cast<long long>(m.world), m.tensors.size(),
              static_cast<double>(m.bytes()) / (1 << 20));
  for (const auto& [k, v] : m.state) std::printf("  state %s = %s\n", k.c_str(), v.c_str());
  for (const auto& t : m.tensors) {
    std::printf("%s %s %s: %zu box%s\n", t.name.c_str(), t.dtype.c_str(), ints(t.shape.extent.data(), t.shape.rank).c_str(),
                t.boxes.size(), t.boxes.size() == 1 ? "" : "es");
    for (const auto& b : t.boxes)
      std::printf("  offsets %s sizes %s  %s bytes %llu..%llu  checksum %s\n",
                  ints(b.where.offset.data(), b.where.rank).c_str(), ints(b.where.size.data(), b.where.rank).c_str(),
                  b.file.c_str(), static_cast<unsigned long long>(b.begin), static_cast<unsigned long long>(b.end),
                  ck::hex64(b.sum).c_str());
  }
  return 0;
}

int verify(const fs::path& dir) {
  ck::box_reader r(dir);
  std::vector<float> buf;
  std::uint64_t n = 0, bytes = 0, chunks = 0;
  for (const auto& t : r.meta().tensors)
    for (const auto& b : t.boxes) {
      buf.resize(static_cast<std::size_t>(b.where.numel()));
      r.read_box(t, b, buf.data(), true);  // (and each chunk's checksum)
      ++n, bytes += b.end - b.begin, chunks += b.chunk_sums.size();
    }
  std::printf("%s: OK, %llu boxes of %zu tensors, %.2f MiB, every checksum matches (and %llu of chunks)\n",
              dir.string().c_str(), static_cast<unsigned long long>(n), r.meta().tensors.size(),
              static_cast<double>(bytes) / (1 << 20), static_cast<unsigned long long>(chunks));
  return 0;
}

int export_hf(const fs::path& dir, const fs::path& out, const std::string& dtype, double shard_mib) {
  ck::box_reader r(dir);
  const auto it = r.meta().state.find("model");
  if (it == r.meta().state.end()) throw error("'" + dir.string() + "/metadata.json' names no model (state \"model\")");
  const tessera::llama_config* c = tessera::find_config(it->second);
  if (!c) throw error("'" + dir.string() + "/metadata.json': model '" + it->second + "' is not one tessera knows");
  const std::int64_t n = tessera::param_tensor_count(*c);
  // one tensor in memory at a time: each read whole from the checkpoint's boxes as it is written
  const auto read_tensor = [&](std::int64_t i) {
    const tessera::param_entry e = tessera::param_at(*c, i);
    const tessera::shape_t g = tessera::param_global_shape(e);
    std::vector<float> v(static_cast<std::size_t>(g.numel()));
    r.read(tessera::titan_name(e), g, tessera::whole_box(g), v.data());
    return v;
  };
  const auto type = dtype == "bf16" ? tessera::io::safetensors::dtype::bf16 : tessera::io::safetensors::dtype::f32;
  if (shard_mib <= 0) {
    if (const fs::path parent = out.parent_path(); !parent.empty()) {  // created when missing, as --shard-mib's OUT is
      std::error_code made, ec;
      fs::create_directories(parent, made);
      if (!fs::is_directory(parent, ec))
        throw error("cannot create the folder '" + parent.string() + "' of '" + out.string() + "'" +
                    (made ? " (" + made.message() + ")" : std::string()) + "; name another OUT");
    }
    tessera::io::save_hf_checkpoint_streamed(*c, read_tensor, out, type);
    std::printf("wrote %s (%s, %lld tensors of %s)\n", out.string().c_str(), dtype.c_str(), static_cast<long long>(n),
                c->name.data());
    return 0;
  }
  // sharded: files of at most shard_mib MiB (a tensor larger than that gets a file of its own)
  fs::create_directories(out);
  const std::size_t elt = type == tessera::io::safetensors::dtype::bf16 ? 2 : 4;
  const auto limit = static_cast<std::uint64_t>(shard_mib * (1 << 20));
  std::vector<std::vector<std::int64_t>> groups(1);
  std::uint64_t in_group = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t b = static_cast<std::uint64_t>(tessera::param_at(*c, i).shape.numel()) * elt;
    if (!groups.back().empty() && in_group + b > limit) groups.emplace_back(), in_group = 0;
    groups.back().push_back(i);
    in_group += b;
  }
  auto file_name = [&](std::size_t g) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", g + 1, groups.size());
    return std::string(buf);
  };
  std::string index = "{\"metadata\":{\"format\":\"pt\"},\"weight_map\":{";
  bool first = true;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<tessera::io::safetensors::tensor_decl> ts;
    for (std::int64_t i : groups[g]) {
      const tessera::param_entry e = tessera::param_at(*c, i);
      ts.push_back({tessera::io::hf_name(e), tessera::io::hf_shape(e), type});
      if (!first) index += ",";
      index += tessera::json::quote(tessera::io::hf_name(e)) + ":" + tessera::json::quote(file_name(g));
      first = false;
    }
    std::vector<float> buf;
    tessera::io::safetensors::write_streamed(out / file_name(g), ts, {{"format", "pt"}}, [&](std::size_t k) {
      const std::int64_t i = groups[g][k];
      buf = read_tensor(i);
      tessera::io::hf_row_order(*c, tessera::param_at(*c, i), buf, true);
      return std::span<const float>(buf);
    });
  }
  index += "}}\n";
  tessera::write_text_atomically(out / "model.safetensors.index.json", index, "tessera-ckpt");
  std::printf("wrote %s: %zu files and model.safetensors.index.json (%s, %lld tensors of %s)\n", out.string().c_str(),
              groups.size(), dtype.c_str(), static_cast<long long>(n), c->name.data());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a)
    if (std::string(argv[a]) == "--help" || std::string(argv[a]) == "-h") {
      std::cout << usage_text;
      return 0;
    }
  if (argc < 3) return usage();
  const std::string cmd = argv[1];
  try {
    if (cmd == "list" && argc == 3) return list(resolve(argv[2]));
    if (cmd == "verify" && argc == 3) return verify(resolve(argv[2]));
    if (cmd == "export" && argc >= 4) {
      std::string dtype = "f32";
      double shard_mib = 0;
      for (int a = 4; a < argc; ++a) {
        const std::string f = argv[a];
        if (f == "--dtype") {
          if (a + 1 == argc) {
            std::cerr << "tessera-ckpt: error: --dtype needs a value: f32 or bf16\n";
            return 2;
          }
          dtype = argv[++a];
          if (dtype != "f32" && dtype != "bf16") {
            std::cerr << "tessera-ckpt: error: --dtype '" << dtype << "' is not one of f32, bf16\n";
            return 2;
          }
        } else if (f == "--shard-mib" && a + 1 < argc) {
          char* end = nullptr;
          shard_mib = std::strtod(argv[++a], &end);
          if (*end != '\0' || !(shard_mib > 0)) {
            std::cerr << "tessera-ckpt: error: --shard-mib expects a positive number, got '" << argv[a] << "'\n";
            return 2;
          }
        } else {
          std::cerr << "tessera-ckpt: error: unknown or incomplete option '" << f << "' (--dtype f32|bf16, --shard-mib N)\n";
          return 2;
        }
      }
      return export_hf(resolve(argv[2]), argv[3], dtype, shard_mib);
    }
    return usage();
  } catch (const error& e) {
    std::cerr << "tessera-ckpt: error: " << e.what() << "\n";
    return 1;
  }
}
