// tessera-requires: tomlplusplus
// tessera/train/config.hpp: a training run's options, from defaults, a TOML file and the
// command line, in TorchTitan's sections and key names.
//
//   run_config c;
//   train::option_set cli("train_llama");
//   train::bind(cli, c);                 // training.steps, --steps, job.config_file, ...
//   if (!cli.parse(argc, argv)) ...      // --config FILE first, then the other flags
//   train::validate(c);
//
// Precedence: defaults < the TOML file (`--job.config_file FILE` or `--config FILE`, read
// before every other flag wherever it stands) < the other flags. What a recipe compiles
// in (mesh axes, parallel policies) is no option: the keys of `compiled_in_keys` fail with
// a message saying so, from TOML and from the command line alike. docs/training.md has
// the table of keys. Needs toml++ (Debian libtomlplusplus-dev): link tessera::tomlplusplus.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/core/toml_text.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/train/cli.hpp>

namespace tessera::train {

/// The options of a training run, one member struct per TorchTitan section
/// (torchtitan/config/job_config.py). Defaults are train_llama's (TorchTitan's debug model
/// where it has one).
struct run_config {
  struct job_section {
    std::string config_file;  ///< job.config_file: the TOML file read (see load_toml)
    std::string dump_folder;  ///< job.dump_folder: relative output paths go under it
    std::string description;  ///< job.description: a line printed at start-up
    int threads = 0;          ///< job.threads: CPU threads (0: TESSERA_NUM_THREADS or all)
    std::string device = "cpu";  ///< job.device: cpu, or cuda (one GPU; docs/cuda.md)
  } job;
  struct model_section {
    std::string flavor = "debugmodel";  ///< model.flavor: a name of named_configs
    std::string tokenizer_path;         ///< model.tokenizer_path: SentencePiece .model
    std::string tokenizer_cache_dir;    ///< model.tokenizer_cache_dir: trained BPEs cached here
  } model;
  struct optimizer_section {
    std::string name = "AdamW";  ///< optimizer.name: AdamW only
    double lr = 8e-4;            ///< optimizer.lr: peak learning rate
    double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
    double weight_decay = 0.1;   ///< optimizer.weight_decay: decoupled (AdamW)
  } optimizer;
  struct lr_scheduler_section {
    std::int64_t warmup_steps = 2;   ///< lr_scheduler.warmup_steps: linear warmup
    std::string decay_type = "linear";  ///< lr_scheduler.decay_type: constant|linear|cosine
  } lr_scheduler;
  struct training_section {
    std::int64_t steps = 20;                       ///< training.steps: optimizer steps
    std::int64_t local_batch_size = 8;             ///< training.local_batch_size: B per data-parallel rank
    std::int64_t global_batch_size = -1;           ///< training.global_batch_size: -1 = local x dp degree
    std::int64_t seq_len = 256;                    ///< training.seq_len: T
    std::int64_t gradient_accumulation_steps = 1;  ///< micro-batches per optimizer step
    double max_norm = 1.0;                         ///< training.max_norm: clip (0 = off)
    std::uint64_t seed = 0;                        ///< training.seed: init and data order
    std::string dataset = "fortunes";              ///< training.dataset: the built-in corpus
    std::string dataset_path;                      ///< training.dataset_path: a text file
    std::string tokens_file;                       ///< training.tokens_file: int32 ids
    std::string save_tokens_file;                  ///< training.save_tokens_file
    bool no_shuffle = false;                       ///< training.no_shuffle: file order
    std::string compute_dtype = "f32";  ///< training.compute_dtype: f32|bf16 (GEMM and attention operands, on a GPU)
    /// training.attention: tessera|cudnn, the kernels of bf16's attention on a GPU ("": the
    /// environment's TESSERA_ATTENTION, else tessera; kernels/cuda/attention_library.hpp)
    std::string attention;
  } training;
  struct checkpoint_section {
    std::string initial_load_path;     ///< checkpoint.initial_load_path: HF safetensors or a tessera checkpoint
    std::string save_weights;          ///< checkpoint.save_weights: HF safetensors at the end
    std::string export_dtype = "f32";  ///< checkpoint.export_dtype: f32|bf16 (or TorchTitan's float32|bfloat16)
    /// export_dtype as f32 or bf16.
    std::string export_short() const { return export_dtype == "float32" ? "f32" : export_dtype == "bfloat16" ? "bf16" : export_dtype; }
    std::string folder;                ///< checkpoint.folder: distributed checkpoints (under job.dump_folder)
    std::int64_t interval = 0;         ///< checkpoint.interval: save every N steps (0: at the end only)
    int keep_latest_k = 0;             ///< checkpoint.keep_latest_k: 0 keeps all
    std::string async_mode = "disabled";  ///< checkpoint.async_mode: disabled|async
    std::int64_t load_step = -1;       ///< checkpoint.load_step: resume from this step's checkpoint (-1: the latest)
    std::vector<std::string> exclude_from_loading;  ///< checkpoint.exclude_from_loading: parts a resume leaves fresh
    bool last_save_model_only = false;  ///< checkpoint.last_save_model_only: the last save holds the weights alone
  } checkpoint;
  struct metrics_section {
    std::string file;  ///< metrics.file: JSONL, one object per step
  } metrics;
  struct profiling_section {
    bool enable_profiling = false;                    ///< profiling.enable_profiling: trace the run
    std::string save_traces_folder = "profile_traces";  ///< profiling.save_traces_folder
    std::string trace_file;  ///< profiling.trace_file: the Chrome/Perfetto trace (sets tracing on)
  } profiling;

  /// The trace file of the run, or "" when tracing is off: profiling.trace_file when set,
  /// else save_traces_folder/trace.json when enable_profiling is; under job.dump_folder
  /// when relative (output_path).
  std::string trace_path() const {
    if (!profiling.trace_file.empty()) return output_path(profiling.trace_file);
    if (!profiling.enable_profiling) return "";
    const std::string& d = profiling.save_traces_folder;
    return output_path(d.empty() ? "trace.json" : d + (d.back() == '/' ? "" : "/") + "trace.json");
  }

  /// `path` under job.dump_folder when it is relative and a dump folder is set, else `path`.
  std::string output_path(const std::string& path) const {
    if (path.empty() || job.dump_folder.empty() || path.front() == '/') return path;
    return job.dump_folder + (job.dump_folder.back() == '/' ? "" : "/") + path;
  }
};

/// A key that names what a recipe compiles in, and what it is.
struct compiled_in_key {
  std::string_view key;  ///< a dotted key, or "section.*" for the rest of a section
  std::string_view what;
};

/// Keys no config file or flag may set: the mesh, the policies and their options are
/// types of the recipe. TorchTitan's names (job_config.py, [parallelism] and [training]).
inline constexpr compiled_in_key compiled_in_keys[] = {
    {"parallelism.data_parallel_shard_degree", "the size of the FSDP mesh axis"},
    {"parallelism.data_parallel_replicate_degree", "the size of the HSDP replica mesh axis"},
    {"parallelism.tensor_parallel_degree", "the size of the tensor-parallel mesh axis"},
    {"parallelism.pipeline_parallel_degree", "the size of the pipeline mesh axis"},
    {"parallelism.context_parallel_degree", "the size of the context-parallel mesh axis"},
    {"parallelism.expert_parallel_degree", "the size of the expert-parallel mesh axis"},
    {"parallelism.enable_async_tensor_parallel", "the async_tp option of the tensor_parallel policy, as in debug_2d_async"},
    {"parallelism.disable_loss_parallel", "the loss-parallel option of the tensor_parallel policy"},
    {"parallelism.enable_sequence_parallel", "the sequence-parallel option of the tensor_parallel policy"},
    {"parallelism.fsdp_reshard_after_forward", "the resharding option of the fsdp policy"},
    {"parallelism.pipeline_parallel_schedule", "the pipeline schedule type"},
    {"parallelism.pipeline_parallel_split_points", "the pipeline stages"},
    {"parallelism.*", "a parallelism setting"},
    {"activation_checkpoint.mode", "the activation_checkpointing policy's mode"},
    {"activation_checkpoint.selective_ac_option", "the activation_checkpointing policy's mode"},
    {"activation_checkpoint.*", "an option of the activation_checkpointing policy"},
    {"float8.recipe_name", "the float8 policy's scaling"},
    {"float8.enable_fsdp_float8_all_gather", "the float8 policy's fp8::all_gather option"},
    {"float8.filter_fqns", "the linears the float8 policy converts"},
    {"float8.*", "an option of the float8 policy"},
    {"quantize.*", "a quantization setting (the float8 policy)"},
    {"training.mixed_precision_param", "the parameter dtype of the fsdp policy"},
    {"training.mixed_precision_reduce", "the reduce dtype of the fsdp policy"},
    {"model.name", "the model template (Llama 3)"},
};

/// What follows a compiled-in key in its error (`what`: its table entry's).
inline std::string compiled_in_message(std::string_view what) {
  return std::string("(").append(what).append(
      ") is compiled into the recipe (mesh axes and policies are types); choose another recipe "
      "with --recipe, or write one (docs/recipes.md)");
}

inline void load_toml(const std::string& path, option_set& options);

/// Registers every key of run_config on `options`, with help, train_llama's short flags as
/// aliases, `job.config_file` (alias `config`) as an early option that loads a TOML file,
/// and the compiled-in keys as forbidden. `c` must outlive `options`.
inline void bind(option_set& options, run_config& c) {
  std::string models;
  for (const llama_config* m : named_configs) {
    if (!models.empty()) models += '|';
    models += m->name;
  }
  options
      .add_early("job.config_file", &c.job.config_file, "TOML file of these keys, read before the other flags",
                 [](option_set& o, const std::string& path) { load_toml(path, o); })
      .add("job.dump_folder", &c.job.dump_folder, "folder for relative output paths (metrics, weights)")
      .add("job.description", &c.job.description, "a line printed at start-up")
      .add("job.threads", &c.job.threads, "CPU threads (0: TESSERA_NUM_THREADS or all cores)")
      .add_choice("job.device", &c.job.device, {"cpu", "cuda"},
                  "where training runs: the CPU, or CUDA devices (one GPU per rank; docs/cuda.md)")
      .add("model.flavor", &c.model.flavor, "model configuration: " + models)
      .add("model.tokenizer_path", &c.model.tokenizer_path, "SentencePiece .model file (default: train a BPE once)")
      .add("model.tokenizer_cache_dir", &c.model.tokenizer_cache_dir,
           "where trained tokenizers are cached (default ~/.cache/tessera)")
      .add_choice("optimizer.name", &c.optimizer.name, {"AdamW"}, "optimizer")
      .add("optimizer.lr", &c.optimizer.lr, "peak learning rate")
      .add("optimizer.beta1", &c.optimizer.beta1, "AdamW first-moment decay")
      .add("optimizer.beta2", &c.optimizer.beta2, "AdamW second-moment decay")
      .add("optimizer.eps", &c.optimizer.eps, "AdamW epsilon")
      .add("optimizer.weight_decay", &c.optimizer.weight_decay, "AdamW decoupled weight decay")
      .add("lr_scheduler.warmup_steps", &c.lr_scheduler.warmup_steps, "linear warmup steps")
      .add_choice("lr_scheduler.decay_type", &c.lr_scheduler.decay_type, {"constant", "linear", "cosine"},
                  "decay after warmup")
      .add("training.steps", &c.training.steps, "optimizer steps")
      .add("training.local_batch_size", &c.training.local_batch_size,
           "sequences per micro-batch per data-parallel rank (B)")
      .add("training.global_batch_size", &c.training.global_batch_size,
           "sequences per micro-batch over all data-parallel ranks (-1: local_batch_size x dp degree)")
      .add("training.seq_len", &c.training.seq_len, "tokens per sequence (T)")
      .add("training.gradient_accumulation_steps", &c.training.gradient_accumulation_steps,
           "micro-batches per optimizer step")
      .add("training.max_norm", &c.training.max_norm, "clip the global gradient norm to this (0 = off)")
      .add("training.seed", &c.training.seed, "seed of the initialization and of the data order")
      .add_choice("training.dataset", &c.training.dataset, {"fortunes"},
                  "built-in corpus when neither dataset_path nor tokens_file is set")
      .add("training.dataset_path", &c.training.dataset_path, "text file to train on (default: the dataset)")
      .add("training.tokens_file", &c.training.tokens_file, "pre-tokenized file of raw little-endian int32 ids")
      .add("training.save_tokens_file", &c.training.save_tokens_file,
           "write the tokenized corpus as int32 .bin and continue")
      .add_flag("training.no_shuffle", &c.training.no_shuffle, "visit the data windows in file order")
      .add_choice("training.compute_dtype", &c.training.compute_dtype, {"f32", "bf16"},
                  "operands of the GEMMs and the attention on --device cuda (one GPU, or a recipe's ranks): f32, or bf16 "
                  "(rounded to bf16 on the tensor cores, f32 accumulation, f32 master weights and optimizer)")
      .add_choice("training.attention", &c.training.attention, {"tessera", "cudnn"},
                  "kernels of the attention with --compute-dtype bf16 on --device cuda: tessera's tensor-core kernels, "
                  "or cuDNN's fused attention (a train_llama built with cuDNN; default: the environment's "
                  "TESSERA_ATTENTION, else tessera)")
      .add("checkpoint.initial_load_path", &c.checkpoint.initial_load_path,
           "weights to start from: Hugging Face safetensors (a file or a folder with its index), or a tessera "
           "checkpoint (a step-<N> folder, or a folder of them: the newest; its weights alone, when "
           "checkpoint.folder holds nothing to resume)")
      .add("checkpoint.save_weights", &c.checkpoint.save_weights, "write the trained weights as HF safetensors")
      .add_choice("checkpoint.export_dtype", &c.checkpoint.export_dtype, {"f32", "bf16", "float32", "bfloat16"},
                  "dtype of checkpoint.save_weights and of the model-only last save (checkpoint.last_save_model_only); "
                  "float32 and bfloat16 are TorchTitan's names")
      .add("checkpoint.folder", &c.checkpoint.folder,
           "folder of distributed checkpoints (under job.dump_folder when relative); a run resumes from the "
           "latest complete one there")
      .add("checkpoint.interval", &c.checkpoint.interval, "save a checkpoint every N steps (0: after the last step only)")
      .add("checkpoint.keep_latest_k", &c.checkpoint.keep_latest_k, "keep the newest K checkpoints (0: all)")
      .add_choice("checkpoint.async_mode", &c.checkpoint.async_mode, {"disabled", "async"},
                  "async: write checkpoints in a background thread while training goes on")
      .add("checkpoint.load_step", &c.checkpoint.load_step,
           "resume from the checkpoint of this step in checkpoint.folder (-1: the latest)")
      .add_list("checkpoint.exclude_from_loading", &c.checkpoint.exclude_from_loading,
                {"model", "optimizer", "lr_scheduler", "dataloader", "train_state"},
                "what a resume does not load: the weights, AdamW's moments, the LR schedule's progress (it "
                "starts over), the data position (any global batch then), the step (training starts at 0)")
      .add_flag("checkpoint.last_save_model_only", &c.checkpoint.last_save_model_only,
                "the run's last checkpoint holds the weights alone, a third of the bytes (no AdamW moments): to "
                "export or start a new run from, not to resume; TorchTitan's default is true, tessera's false")
      .add("metrics.file", &c.metrics.file, "JSONL file, one object per step")
      .add_flag("profiling.enable_profiling", &c.profiling.enable_profiling,
                "write a Chrome/Perfetto trace of the run to save_traces_folder/trace.json")
      .add("profiling.save_traces_folder", &c.profiling.save_traces_folder,
           "folder of the trace (under job.dump_folder when relative)")
      .add("profiling.trace_file", &c.profiling.trace_file,
           "Chrome/Perfetto JSON trace of the run: steps, forward, backward, optimizer, collectives");
  // train_llama's flags before config files existed.
  options.alias("config", "job.config_file")
      .alias("threads", "job.threads")
      .alias("device", "job.device")
      .alias("model", "model.flavor")
      .alias("tokenizer", "model.tokenizer_path")
      .alias("cache-dir", "model.tokenizer_cache_dir")
      .alias("lr", "optimizer.lr")
      .alias("weight-decay", "optimizer.weight_decay")
      .alias("warmup", "lr_scheduler.warmup_steps")
      .alias("lr-schedule", "lr_scheduler.decay_type")
      .alias("steps", "training.steps")
      .alias("batch", "training.local_batch_size")
      .alias("seq-len", "training.seq_len")
      .alias("grad-accum", "training.gradient_accumulation_steps")
      .alias("max-norm", "training.max_norm")
      .alias("seed", "training.seed")
      .alias("data", "training.dataset_path")
      .alias("tokens", "training.tokens_file")
      .alias("save-tokens", "training.save_tokens_file")
      .alias("no-shuffle", "training.no_shuffle")
      .alias("compute-dtype", "training.compute_dtype")
      .alias("attention", "training.attention")
      .alias("init-from", "checkpoint.initial_load_path")
      .alias("save-weights", "checkpoint.save_weights")
      .alias("save-dtype", "checkpoint.export_dtype")
      .alias("metrics", "metrics.file")
      .alias("trace", "profiling.trace_file");
  for (const auto& k : compiled_in_keys) options.forbid(std::string(k.key), compiled_in_message(k.what));
}

/// Checks the ranges train_llama requires; the message names the key and its flag.
inline void validate(const run_config& c) {
  // Non-finite values first (a program may set the fields itself; option_set refuses them
  // as text already): `lr > 0` holds for inf, and inf or nan diverges at step 2.
  const struct {
    const char* name;
    double value;
  } numbers[] = {{"optimizer.lr (--lr)", c.optimizer.lr},
                 {"optimizer.beta1", c.optimizer.beta1},
                 {"optimizer.beta2", c.optimizer.beta2},
                 {"optimizer.eps", c.optimizer.eps},
                 {"optimizer.weight_decay (--weight-decay)", c.optimizer.weight_decay},
                 {"training.max_norm (--max-norm)", c.training.max_norm}};
  for (const auto& n : numbers)
    check(std::isfinite(n.value), std::string(n.name) + " is " +
                                      (std::isnan(n.value) ? "nan" : n.value > 0 ? "inf" : "-inf") +
                                      "; it must be a finite number");
  check(c.training.steps > 0, "training.steps (--steps) must be positive");
  check(c.training.local_batch_size > 0 && c.training.seq_len > 0,
        "training.local_batch_size (--batch) and training.seq_len (--seq-len) must be positive");
  check(c.training.gradient_accumulation_steps > 0, "training.gradient_accumulation_steps (--grad-accum) must be positive");
  check(c.lr_scheduler.warmup_steps >= 0, "lr_scheduler.warmup_steps (--warmup) must be >= 0");
  check(c.optimizer.lr > 0, "optimizer.lr (--lr) must be positive");
  check(c.optimizer.beta1 >= 0 && c.optimizer.beta1 < 1 && c.optimizer.beta2 >= 0 && c.optimizer.beta2 < 1,
        "optimizer.beta1 and optimizer.beta2 must be in [0, 1)");
  check(c.optimizer.eps > 0, "optimizer.eps must be positive");
  check(c.checkpoint.interval >= 0, "checkpoint.interval (--checkpoint.interval) must be >= 0 (0: at the end only)");
  check(c.checkpoint.keep_latest_k >= 0, "checkpoint.keep_latest_k (--checkpoint.keep_latest_k) must be >= 0 (0: all)");
  check(c.checkpoint.load_step >= -1,
        "checkpoint.load_step (--checkpoint.load_step) must be a step >= 0, or -1 for the latest checkpoint");
  check(c.checkpoint.load_step == -1 && c.checkpoint.exclude_from_loading.empty() ? true : !c.checkpoint.folder.empty(),
        "checkpoint.load_step and checkpoint.exclude_from_loading choose what a resume loads from checkpoint.folder "
        "(--checkpoint.folder); give the folder");
  check(c.optimizer.weight_decay >= 0, "optimizer.weight_decay (--weight-decay) must be >= 0");
  check(c.training.max_norm >= 0, "training.max_norm (--max-norm) must be >= 0 (0 turns clipping off)");
  check(c.job.threads >= 0, "job.threads (--threads) must be >= 0");
  check(c.training.dataset_path.empty() || c.training.tokens_file.empty(),
        "give either training.dataset_path (--data) or training.tokens_file (--tokens), not both");
}

namespace detail {

using tessera::detail::toml_where;  // (core/toml_text.hpp)

inline std::string toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

/// The text option_set::set takes for TOML value `n` of an option of kind `k`, or throws.
inline std::string toml_value_text(const toml::node& n, value_kind k, const std::string& where, const std::string& key) {
  const char* want = k == value_kind::integer  ? "an integer"
                     : k == value_kind::number ? "a number"
                     : k == value_kind::flag   ? "a boolean (true or false)"
                     : k == value_kind::list   ? "an array of strings"
                                               : "a string";
  if (k == value_kind::integer && n.is_integer()) return std::to_string(n.as_integer()->get());
  if (k == value_kind::number && n.is_integer()) return std::to_string(n.as_integer()->get());
  if (k == value_kind::number && n.is_floating_point()) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, n.as_floating_point()->get());
    return std::string(buf, r.ptr);
  }
  if (k == value_kind::flag && n.is_boolean()) return n.as_boolean()->get() ? "true" : "false";
  if (k == value_kind::text && n.is_string()) return n.as_string()->get();
  if (k == value_kind::list && n.is_string()) return n.as_string()->get();  // one name (or "a,b", as on the command line)
  if (k == value_kind::list && n.is_array()) {  // the comma-separated text option_set::set reads
    std::string joined;
    for (const auto& item : *n.as_array()) {
      if (!item.is_string() || item.as_string()->get().find(',') != std::string::npos)
        throw error(where + ": " + key + " must be an array of strings, each one name");
      joined += (joined.empty() ? "" : ",") + item.as_string()->get();
    }
    return joined;
  }
  throw error(where + ": " + key + " must be " + want + ", not " + toml_type_name(n));
}

struct toml_leaf {
  std::string key;
  toml::source_region key_source;  ///< where the key's last part stands
  const toml::node* node;
};

inline void flatten(const toml::table& t, const std::string& prefix, std::vector<toml_leaf>& out) {
  for (const auto& [k, v] : t) {
    std::string key = prefix + std::string(k.str());
    if (const auto* sub = v.as_table()) flatten(*sub, key + ".", out);
    else out.push_back({std::move(key), k.source(), &v});
  }
}

}  // namespace detail

/// Reads TOML file `path` and sets every key of it on `options` (tables flatten to dotted
/// keys: `[training] steps = 10` is training.steps). Values may be integers, floats,
/// strings and booleans, as the option's type requires. Errors name the file, line and
/// column and the key: unreadable file, TOML syntax, unknown key (with the nearest known
/// one), an alias used as a key, wrong type, bad value, compiled-in key.
inline void load_toml(const std::string& path, option_set& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error("cannot read config file '" + path + "' (no such file, or not readable)");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw error("cannot read config file '" + path + "'");
  toml::table root = parse_toml_text(text.str(), path);  // toml++ 3.3.0's defects: see core/toml_text.hpp
  std::vector<detail::toml_leaf> leaves;
  detail::flatten(root, "", leaves);
  std::stable_sort(leaves.begin(), leaves.end(), [](const auto& a, const auto& b) {
    const auto& x = a.key_source.begin;
    const auto& y = b.key_source.begin;
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  for (const auto& [key, key_source, node] : leaves) {
    const std::string where = detail::toml_where(path, key_source);
    const auto kind = options.kind_of(key);
    if (!kind || !options.alias_target(key).empty()) {
      if (auto m = options.forbidden(key)) throw error(where + ": " + *m);
      if (const std::string t = options.alias_target(key); !t.empty())
        throw error(where + ": '" + key + "' is a command-line alias; in a config file write " + t);
      const std::string near = options.nearest(key, /*keys_only=*/true);
      throw error(where + ": unknown key " + key + (near.empty() ? "" : " (did you mean " + near + "?)"));
    }
    if (key == "job.config_file")
      throw error(where + ": job.config_file names the file to read; a config file cannot name another");
    const std::string at_value = detail::toml_where(path, node->source());
    const std::string value = detail::toml_value_text(*node, *kind, at_value, key);
    try {
      options.set(key, value);
    } catch (const error& e) {
      throw error(at_value + ": " + e.what());
    }
  }
}

}  // namespace tessera::train
