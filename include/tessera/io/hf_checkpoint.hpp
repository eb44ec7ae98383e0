// tessera/io/hf_checkpoint.hpp: Llama weights as Hugging Face safetensors.
//
// Names and layouts are those of transformers' LlamaForCausalLM (model.embed_tokens.weight,
// model.layers.N.self_attn.{q,k,v,o}_proj.weight, model.layers.N.mlp.{gate,up,down}_proj
// .weight, model.layers.N.{input,post_attention}_layernorm.weight, model.norm.weight,
// lm_head.weight), so a checkpoint downloaded from the Hub loads as is: one .safetensors
// file, or a sharded one through its model.safetensors.index.json. Linear weights are
// [out, in] in both. The rows of q_proj and k_proj differ: HF rotates the two halves of each
// head (rotate_half) while Meta's and TorchTitan's RoPE (and tessera's kernel) rotate
// interleaved pairs, so within each head HF row s*hd/2 + i is tessera row 2i + s (the
// permutation of Meta's convert_llama_weights_to_hf.py, undone on load, redone on save).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/core/json.hpp>
#include <tessera/io/safetensors.hpp>
#include <tessera/layout/local_shape.hpp>

namespace tessera::io {

/// The Hugging Face name of a parameter.
inline std::string hf_name(const param_entry& e) {
  const std::string p = "model.layers." + std::to_string(e.layer) + ".";
  switch (e.role) {
    case param_role::embedding: return "model.embed_tokens.weight";
    case param_role::attention_norm: return p + "input_layernorm.weight";
    case param_role::attention_q: return p + "self_attn.q_proj.weight";
    case param_role::attention_k: return p + "self_attn.k_proj.weight";
    case param_role::attention_v: return p + "self_attn.v_proj.weight";
    case param_role::attention_o: return p + "self_attn.o_proj.weight";
    case param_role::ffn_norm: return p + "post_attention_layernorm.weight";
    case param_role::ffn_w1: return p + "mlp.gate_proj.weight";
    case param_role::ffn_w2: return p + "mlp.down_proj.weight";
    case param_role::ffn_w3: return p + "mlp.up_proj.weight";
    case param_role::final_norm: return "model.norm.weight";
    case param_role::output: return "lm_head.weight";
  }
  return {};
}

/// The safetensors shape of a parameter (norm weights are 1-D).
inline std::vector<std::int64_t> hf_shape(const param_entry& e) {
  if (e.shape.is_vector()) return {e.shape.cols};
  return {e.shape.rows, e.shape.cols};
}

/// Reorders the rows of a q or k projection [heads*hd, dim] between the two RoPE
/// conventions: to_interleaved (HF -> tessera) or back (tessera -> HF).
inline void permute_rope_rows(std::span<float> w, std::int64_t heads, std::int64_t hd,
                              std::int64_t cols, bool to_interleaved) {
  check(hd % 2 == 0, "RoPE needs an even head dimension");
  check(static_cast<std::int64_t>(w.size()) == heads * hd * cols,
        "permute_rope_rows: size mismatch");
  std::vector<float> src(w.begin(), w.end());
  const std::int64_t half = hd / 2;
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t s = 0; s < 2; ++s)
      for (std::int64_t i = 0; i < half; ++i) {
        const std::int64_t hf_row = h * hd + s * half + i;
        const std::int64_t il_row = h * hd + 2 * i + s;
        const std::int64_t from = to_interleaved ? hf_row : il_row;
        const std::int64_t to = to_interleaved ? il_row : hf_row;
        std::copy(src.begin() + from * cols, src.begin() + (from + 1) * cols,
                  w.begin() + to * cols);
      }
}

/// Parameter e's values [rows, cols] of config c between tessera's row order and HF's (only
/// wq's and wk's differ: permute_rope_rows), to_hf or back.
inline void hf_row_order(const llama_config& c, const param_entry& e, std::span<float> w, bool to_hf) {
  if (e.role == param_role::attention_q) permute_rope_rows(w, c.n_heads, head_dim(c), c.dim, !to_hf);
  if (e.role == param_role::attention_k) permute_rope_rows(w, c.n_kv_heads, head_dim(c), c.dim, !to_hf);
}

/// Access to a model's parameter tensors by index (in param_at order).
using param_access = std::function<float*(std::int64_t)>;

namespace detail {
/// Reads the text of a model.safetensors.index.json: its "weight_map" maps each tensor
/// name to a file name in the index's folder. Throws tessera::error naming `index` on
/// invalid JSON, a missing weight_map, a file name that is not a string or that leaves the
/// folder (absolute, or with a `..` part).
inline std::map<std::string, std::filesystem::path> index_files(std::string_view text,
                                                                const std::filesystem::path& index) {
  const std::string where = "checkpoint: '" + index.string() + "'";
  json::value root;
  try {
    root = json::parse(text, "JSON");
  } catch (const error& e) {
    throw error(where + " is not valid JSON: " + e.what());
  }
  const json::value* wm = root.get("weight_map");
  if (!wm || !wm->is_object()) throw error(where + " has no \"weight_map\" object");
  std::map<std::string, std::filesystem::path> out;
  for (std::size_t i = 0; i < wm->keys.size(); ++i) {
    const json::value& f = wm->items[i];
    if (wm->keys[i].empty()) throw error(where + ": weight_map has an empty tensor name");
    if (!f.is_string() || f.str.empty())
      throw error(where + ": weight_map[\"" + wm->keys[i] + "\"] is " +
                  std::string(f.is_string() ? "an empty string" : json::kind_name(f.k)) +
                  ", not a file name");
    const std::filesystem::path rel(f.str);
    bool escapes = rel.is_absolute() || rel.has_root_name() || f.str.find('\0') != std::string::npos;
    for (const auto& part : rel) escapes = escapes || part == "..";
    if (escapes)
      throw error(where + ": weight_map[\"" + wm->keys[i] + "\"] names '" + f.str +
                  "', a file outside the index's folder; give a file name in that folder");
    out[wm->keys[i]] = index.parent_path() / rel;
  }
  return out;
}

/// Maps tensor names to files for a single file or a sharded checkpoint's index.json.
inline std::map<std::string, std::filesystem::path> checkpoint_files(
    const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path index;
  if (std::filesystem::is_directory(path, ec)) {
    if (std::filesystem::is_regular_file(path / "model.safetensors", ec))
      return {{"", path / "model.safetensors"}};
    index = path / "model.safetensors.index.json";
  } else if (path.string().ends_with(".index.json")) {
    index = path;
  } else {
    return {{"", path}};
  }
  if (!std::filesystem::is_regular_file(index, ec))
    throw error("checkpoint: '" + path.string() + "' has neither model.safetensors nor "
                "model.safetensors.index.json");
  std::ifstream in(index, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return index_files(text, index);
}
inline bool ignorable_tensor(const std::string& name) {
  return name.ends_with("rotary_emb.inv_freq");  // a buffer some old checkpoints carry
}
}  // namespace detail

namespace detail {
/// The readers of a checkpoint's files (a file, a directory, or an index.json), opened as
/// their tensors are first asked for, and the checks both loaders make.
class hf_readers {
 public:
  hf_readers(const llama_config& c, const std::filesystem::path& path)
      : c_(c), path_(path), files_(checkpoint_files(path)) {}

  /// The reader of parameter e's file, checked to hold it with its shape (the header only).
  safetensors::reader& of(const param_entry& e) {
    const std::string name = hf_name(e);
    expected_.insert(name);
    std::filesystem::path f;
    if (auto it = files_.find(""); it != files_.end()) f = it->second;
    else if (auto jt = files_.find(name); jt != files_.end()) f = jt->second;
    else
      throw error("checkpoint: '" + path_.string() + "' has no tensor named '" + name + "' (expected for " +
                  std::string(c_.name) + ")");
    auto& r = readers_[f];
    if (!r) r = std::make_unique<safetensors::reader>(f);
    const safetensors::tensor_info* t = r->find(name);
    if (!t)
      throw error("checkpoint: '" + r->path().string() + "' has no tensor named '" + name +
                  "'; is it a checkpoint of " + std::string(c_.name) + "?");
    const auto shape = hf_shape(e);
    if (!std::equal(t->shape.begin(), t->shape.end(), shape.begin(), shape.end()))
      throw error("safetensors: '" + r->path().string() + "': tensor '" + name + "' has shape " +
                  safetensors::shape_string(t->shape) + ", expected " + safetensors::shape_string(shape));
    return *r;
  }
  /// Throws on a tensor of the opened files that the model does not have.
  void check_no_others() const {
    for (const auto& [f, r] : readers_)
      for (const auto& t : r->tensors())
        if (!expected_.count(t.name) && !ignorable_tensor(t.name) &&
            !(c_.tied_embeddings && t.name == "lm_head.weight"))
          throw error("checkpoint: '" + f.string() + "' has tensor '" + t.name + "' of shape " +
                      safetensors::shape_string(t.shape) + " that " + std::string(c_.name) +
                      " does not have; is it a checkpoint of another model?");
  }
  /// Bytes of tensor data read from every file.
  std::uint64_t bytes_read() const {
    std::uint64_t n = 0;
    for (const auto& [f, r] : readers_) n += r->bytes_read();
    return n;
  }

 private:
  const llama_config& c_;
  std::filesystem::path path_;
  std::map<std::string, std::filesystem::path> files_;
  std::map<std::filesystem::path, std::unique_ptr<safetensors::reader>> readers_;
  std::set<std::string> expected_;
};
}  // namespace detail

/// Loads every parameter of config `c` from a Hugging Face safetensors checkpoint (a file,
/// a directory, or a model.safetensors.index.json) into `param(i)`, called once for each
/// tensor in param_at order after the tensor before it is read (so one buffer may serve them
/// all, each used before the next call). F32, BF16 and F16 are converted to f32. Throws on a
/// missing file, a corrupt file, a missing tensor, a tensor of the wrong shape, or a tensor
/// the model does not have.
inline void load_hf_checkpoint(const llama_config& c, const param_access& param,
                               const std::filesystem::path& path) {
  detail::hf_readers files(c, path);
  for (std::int64_t i = 0; i < param_tensor_count(c); ++i) {
    const param_entry e = param_at(c, i);
    auto& r = files.of(e);
    std::span<float> out(param(i), static_cast<std::size_t>(e.shape.numel()));
    r.read_f32(hf_name(e), hf_shape(e), out);
    hf_row_order(c, e, out, false);
  }
  files.check_no_others();
}

/// Loads of every parameter i of config `c` only the block block_of(i) -- in the parameter's
/// global coordinates (param_global_shape: rank 1 for norms, else 2), as a sharded run
/// stores it; an empty block is skipped -- from a Hugging Face checkpoint (as
/// load_hf_checkpoint: the same files, conversions and checks), handing its values, row-major
/// in the block, to put(i, values) in param_at order. Only the block is read from the file
/// (safetensors::reader::read_block_f32: its rows in one read, or where it has some of the
/// columns, a row-parallel TP shard's, its part of each row), for q_proj and k_proj the whole
/// heads around its rows (the RoPE permutation moves rows within a head): a rank of a sharded
/// run reads its share of the checkpoint instead of all of it. Returns the bytes read.
inline std::uint64_t load_hf_checkpoint_blocks(const llama_config& c, const std::function<box(std::int64_t)>& block_of,
                                               const std::function<void(std::int64_t, const float*)>& put,
                                               const std::filesystem::path& path) {
  detail::hf_readers files(c, path);
  std::vector<float> buf;
  for (std::int64_t i = 0; i < param_tensor_count(c); ++i) {
    const param_entry e = param_at(c, i);
    auto& r = files.of(e);
    const box b = block_of(i);
    if (b.numel() == 0) continue;
    const bool v = e.shape.is_vector();
    check(b.rank == (v ? 1 : 2), "load_hf_checkpoint_blocks: a block of " + std::to_string(b.rank) +
                                     " dimensions for parameter " + std::to_string(i));
    const std::int64_t r0 = b.offset[0], nr = b.size[0], c0 = v ? 0 : b.offset[1], nc = v ? 1 : b.size[1];
    check(r0 >= 0 && nr >= 0 && r0 + nr <= (v ? e.shape.cols : e.shape.rows) && c0 >= 0 &&
              c0 + nc <= (v ? 1 : e.shape.cols),
          "load_hf_checkpoint_blocks: a block beyond parameter " + std::to_string(i));
    const bool q = e.role == param_role::attention_q, k = e.role == param_role::attention_k;
    const std::int64_t hd = q || k ? head_dim(c) : 1;  // rows are read in whole groups of hd
    const std::int64_t lo = r0 / hd * hd, hi = (r0 + nr + hd - 1) / hd * hd;
    buf.resize(static_cast<std::size_t>((hi - lo) * nc));
    r.read_block_f32(hf_name(e), hf_shape(e), lo, hi, c0, c0 + nc, buf);
    if (q || k) permute_rope_rows(buf, (hi - lo) / hd, hd, nc, true);
    put(i, buf.data() + (r0 - lo) * nc);
  }
  files.check_no_others();
  return files.bytes_read();
}

/// Saves every parameter of config `c` as one Hugging Face safetensors file, in `type` (F32 or
/// BF16), atomically, a tensor at a time: tensor(i) gives parameter i's values (param_at
/// order, once each), each written before the next is asked for, so that the caller holds one
/// tensor at a time (a parallel run's rank 0, gathering them). Every tensor is asked for even
/// when the file cannot be written -- a parallel run's gathers are collectives, which every
/// rank must make -- and the error is thrown after.
inline void save_hf_checkpoint_streamed(const llama_config& c,
                                        const std::function<std::vector<float>(std::int64_t)>& tensor,
                                        const std::filesystem::path& path,
                                        safetensors::dtype type = safetensors::dtype::f32) {
  const std::int64_t n = param_tensor_count(c);
  std::vector<safetensors::tensor_decl> ts;
  for (std::int64_t i = 0; i < n; ++i) ts.push_back({hf_name(param_at(c, i)), hf_shape(param_at(c, i)), type});
  std::int64_t next = 0;  // the tensors asked for
  std::vector<float> buf;
  try {
    safetensors::write_streamed(
        path, ts, {{"format", "pt"}, {"tessera_config", std::string(c.name)}},  // "pt": what transformers expects
        [&](std::size_t) -> std::span<const float> {
          const param_entry e = param_at(c, next);
          buf = tensor(next++);
          check(static_cast<std::int64_t>(buf.size()) == e.shape.numel(),
                "save_hf_checkpoint: parameter " + std::to_string(next - 1) + " has " + std::to_string(buf.size()) +
                    " values, not " + std::to_string(e.shape.numel()));
          hf_row_order(c, e, buf, true);
          return buf;
        });
  } catch (...) {
    for (; next < n; ++next) {
      try {
        (void)tensor(next);
      } catch (...) {  // the first error is the one to report
      }
    }
    throw;
  }
}
/// Saves every parameter (or gradient: any accessor) of config `c` as one Hugging Face
/// safetensors file, in `type` (F32 or BF16), atomically (save_hf_checkpoint_streamed: one
/// tensor copied at a time).
inline void save_hf_checkpoint(const llama_config& c, const param_access& param,
                               const std::filesystem::path& path,
                               safetensors::dtype type = safetensors::dtype::f32) {
  save_hf_checkpoint_streamed(c, [&](std::int64_t i) {
    const float* p = param(i);
    return std::vector<float>(p, p + param_at(c, i).shape.numel());
  }, path, type);
}

}  // namespace tessera::io
