// train_llama: train a Llama 3 model, as TorchTitan's train.py does: on one rank (the CPU),
// or with a recipe's parallelism on in-process ranks (threads) or MPI ranks; one rank on a
// GPU with --device cuda (built when the CUDA toolkit is found: train_llama_cuda.cu).
//
//   train_llama --model debugmodel --steps 20 --batch 8 --seq-len 256 --metrics m.jsonl
//   train_llama --recipe debug_2d --ranks 4 --steps 20          (4 threads: FSDP x TP)
//   mpirun -np 4 train_llama --recipe debug_2d --backend mpi    (4 processes)
//
// As in TorchTitan, --batch (training.local_batch_size) is per data-parallel rank and the
// global batch is local x the recipe's dp degree unless training.global_batch_size is set;
// a recipe and one rank given the same global batch see the same data and give the same
// loss curve (e.g. --recipe debug_2d --batch 4 and a single rank with --batch 8).
//
// Data: --tokens FILE.bin (raw little-endian int32), or text (--data FILE, default: the
// English fortunes of Debian's `fortunes` package) tokenized with a SentencePiece model
// (--tokenizer FILE.model, or a byte-fallback BPE of the model's vocabulary size trained
// once on the corpus and cached under --cache-dir). Prints one line per step and writes
// one JSON object per step to --metrics. Exit status: 0 on success, 2 on bad flags, 1 on
// any other error (bad files, diverged training), always with a message on stderr.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <tessera/core/trace.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/kernels/cuda/attention_library.hpp>
#include <tessera/model/llama.hpp>
#include <tessera/train/cli.hpp>
#include <tessera/train/config.hpp>
#include <tessera/train/data.hpp>
#include <tessera/train/hf_checkpoint.hpp>
#include <tessera/train/memory_check.hpp>
#include <tessera/train/metrics.hpp>
#include <tessera/train/sgemm_peak.hpp>
#include <tessera/train/tokenizer.hpp>
#include <tessera/train/trainer.hpp>

#include "cpu_recipe_half.hpp"
#include "cuda_run.hpp"
#include "parallel_run.hpp"
#include "startup_checks.hpp"
#ifdef TESSERA_HAS_MPI
#include <tessera/comm/mpi.hpp>
#endif

namespace {
namespace fs = std::filesystem;
using namespace tessera;
using train_llama_cli::check_gpu_memory;
using train_llama_cli::check_save_weights_path;
using train_llama_cli::check_trace_path;
using train_llama_cli::stopped_by_launcher;

struct options {
  std::string model = "debugmodel";
  std::int64_t steps = 20;
  std::uint64_t seed = 0;
  std::int64_t batch = 8;
  std::int64_t seq_len = 256;
  std::int64_t accum = 1;
  std::int64_t global_batch = -1;
  double lr = 8e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  std::int64_t warmup = 2;
  std::string lr_schedule = "linear";
  double weight_decay = 0.1;
  double max_norm = 1.0;
  std::string data, tokens, tokenizer, cache_dir, init_from, save_weights, metrics, save_tokens;
  std::string save_dtype = "f32";
  std::string ckpt_folder, ckpt_async = "disabled";  // --checkpoint.folder, --checkpoint.async_mode
  std::int64_t ckpt_interval = 0, ckpt_load_step = -1;  // --checkpoint.interval, --checkpoint.load_step
  int ckpt_keep = 0;
  std::vector<std::string> ckpt_exclude;  // --checkpoint.exclude_from_loading
  bool ckpt_model_only = false;           // --checkpoint.last_save_model_only
  std::string trace;  // the Chrome/Perfetto trace file ("" when off)
  int threads = 0;
  bool no_shuffle = false;
  std::string recipe, backend = "threads";
  std::string device = "cpu";  // --device / job.device
  std::string compute_dtype = "f32";  // --compute-dtype / training.compute_dtype
  std::string attention;  // --attention / training.attention ("": TESSERA_ATTENTION's)
  std::int64_t ranks = 0;
};

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/tessera";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/tessera";
  return ".tessera-cache";
}

/// FNV-1a of the corpus, so that a cached tokenizer belongs to the text it was trained on.
std::string corpus_hash(const std::vector<std::string>& docs) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& d : docs)
    for (unsigned char c : d) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string with_commas(std::int64_t n) { return train::group_thousands(std::to_string(n)); }

/// The vocabulary of Llama 3's tiktoken tokenizer, which every released Llama 3 flavor
/// uses: its ids must come from that tokenizer (--tokens), not from a BPE trained here.
constexpr std::int64_t llama3_vocab_size = 128256;

/// False, after saying why on stderr, when the model's vocabulary is Llama 3's and no
/// token ids (--tokens) or SentencePiece model (--tokenizer) are given: training a BPE of
/// 128,256 pieces on a text corpus fails inside SentencePiece ("Vocabulary size too high")
/// and would not give Llama 3's ids if it succeeded.
bool has_token_source(const options& o, const llama_config& c) {
  if (!o.tokens.empty() || !o.tokenizer.empty() || c.vocab_size != llama3_vocab_size) return true;
  std::cerr << "train_llama: error: --model " << c.name << " has Llama 3's vocabulary ("
            << with_commas(c.vocab_size) << " ids of its tiktoken tokenizer), which tessera cannot train "
            << "or read: tokenize the corpus with Llama 3's own tokenizer and pass the ids with --tokens "
            << "FILE.bin (raw little-endian int32; docs/training.md, \"Data\"), or train --model debugmodel "
            << "on text\n";
  return false;
}

train::token_data load_tokens(const options& o, const llama_config& c) {
  if (!o.tokens.empty()) {  // mapped: the ranks of a node share one copy
    return train::mapped_token_file(o.tokens, c.vocab_size);
  }
  const auto docs = o.data.empty() ? train::read_fortunes() : train::read_text_documents(o.data);
  fs::path model_file = o.tokenizer;
  if (model_file.empty()) {
    const fs::path dir = o.cache_dir.empty() ? fs::path(default_cache_dir()) : fs::path(o.cache_dir);
    model_file = dir / ("bpe" + std::to_string(c.vocab_size) + "-" + corpus_hash(docs) + ".model");
    if (!fs::exists(model_file))
      std::cerr << "training a " << c.vocab_size << "-piece BPE tokenizer on the corpus (once; cached as "
                << model_file.string() << ")\n";
    try {
      train::train_bpe_once(docs, c.vocab_size, model_file);
    } catch (const error& e) {  // SentencePiece's words, in train_llama's terms
      const std::string what = e.what();
      const auto at = what.find("Vocabulary size too high");
      if (at == std::string::npos) throw;
      throw error("the corpus " + (o.data.empty() ? std::string("(the fortunes)") : "'" + o.data + "'") +
                  " is too small to train the " + std::to_string(c.vocab_size) + "-piece tokenizer of --model " +
                  std::string(c.name) + "; give more text with --data, or an existing SentencePiece model of at "
                  "most " + std::to_string(c.vocab_size) + " pieces with --tokenizer FILE.model (SentencePiece: " +
                  what.substr(at) + ")");
    }
  }
  train::tokenizer tk(model_file);
  if (tk.vocab_size() > c.vocab_size)
    throw error("tokenizer '" + model_file.string() + "' has " + std::to_string(tk.vocab_size()) +
                " pieces, more than the vocabulary of " + std::string(c.name) + " (" +
                std::to_string(c.vocab_size) + ")");
  auto toks = tk.encode_documents(docs);
  if (toks.empty()) throw error("the corpus gave no tokens");
  return toks;
}

int run_recipe(const options& o, int& argc, char**& argv);
train::optimizer_options optimizer_of(const options& o);
train::checkpoint_options checkpoint_of(const options& o);

/// --device cuda: the tokens as for the CPU, the run in train_llama_cuda.cu.
int run_cuda(options& o, const llama_config& cfg) {
#ifdef TESSERA_HAS_CUDA_TRAINER
  {
    mesh_shape one;
    one.ndim = 1, one.size[0] = 1;
    check_gpu_memory(cfg, parallel_spec{}, "model " + std::string(cfg.name), one,
                     o.global_batch > 0 ? o.global_batch : o.batch, o.seq_len, {0},
                     o.compute_dtype == "bf16");  // device_llama: it keeps its rounded weights, as the estimate counts
  }
  const auto tokens = load_tokens(o, cfg);
  if (!o.save_tokens.empty()) train::write_token_file(o.save_tokens, tokens);
  train_llama_cli::cuda_inputs in;
  in.cfg = &cfg, in.tokens = tokens;
  in.steps = o.steps, in.batch = o.global_batch > 0 ? o.global_batch : o.batch, in.seq_len = o.seq_len;
  in.accum = o.accum, in.seed = o.seed, in.shuffle = !o.no_shuffle, in.opt = optimizer_of(o);
  in.init_from = o.init_from, in.save_weights = o.save_weights, in.save_dtype = o.save_dtype;
  in.metrics = o.metrics, in.trace_file = o.trace, in.bf16 = o.compute_dtype == "bf16";
  in.checkpoint = checkpoint_of(o);
  return train_llama_cli::run_on_cuda(in);
#else
  (void)o, (void)cfg;
  throw error("--device cuda: this train_llama was built without CUDA");
#endif
}

/// The run's options from the configuration (defaults < TOML file < command line).
void from_config(options& o, const train::run_config& c) {
  o.model = c.model.flavor, o.steps = c.training.steps, o.seed = c.training.seed;
  o.batch = c.training.local_batch_size, o.global_batch = c.training.global_batch_size;
  o.seq_len = c.training.seq_len, o.accum = c.training.gradient_accumulation_steps;
  o.lr = c.optimizer.lr, o.beta1 = c.optimizer.beta1, o.beta2 = c.optimizer.beta2, o.eps = c.optimizer.eps;
  o.warmup = c.lr_scheduler.warmup_steps, o.lr_schedule = c.lr_scheduler.decay_type;
  o.weight_decay = c.optimizer.weight_decay, o.max_norm = c.training.max_norm;
  o.data = c.training.dataset_path, o.tokens = c.training.tokens_file, o.tokenizer = c.model.tokenizer_path;
  o.cache_dir = c.model.tokenizer_cache_dir, o.init_from = c.checkpoint.initial_load_path;
  o.save_weights = c.output_path(c.checkpoint.save_weights), o.metrics = c.output_path(c.metrics.file);
  o.save_tokens = c.output_path(c.training.save_tokens_file), o.save_dtype = c.checkpoint.export_short();
  o.threads = c.job.threads, o.no_shuffle = c.training.no_shuffle, o.device = c.job.device;
  o.compute_dtype = c.training.compute_dtype, o.attention = c.training.attention;
  o.trace = c.trace_path();
  o.ckpt_folder = c.output_path(c.checkpoint.folder), o.ckpt_interval = c.checkpoint.interval;
  o.ckpt_keep = c.checkpoint.keep_latest_k, o.ckpt_async = c.checkpoint.async_mode;
  o.ckpt_load_step = c.checkpoint.load_step, o.ckpt_exclude = c.checkpoint.exclude_from_loading;
  o.ckpt_model_only = c.checkpoint.last_save_model_only;
}

int run(int argc, char** argv) {
  options o;
  train::option_set cli("train_llama", "Train a Llama 3 model on one rank (CPU) or with a recipe on many.");
  std::string models;
  for (const llama_config* c : named_configs) {
    if (!models.empty()) models += '|';
    models += c->name;
  }
  train::run_config rc;
  train::bind(cli, rc);
  cli.add("recipe", &o.recipe, "train with a shipped recipe's parallelism: " + recipes::names())
      .add("ranks", &o.ranks, "ranks of a --recipe run (threads backend; default: the recipe's mesh size)")
      .add_choice("backend", &o.backend, {"threads", "mpi"},
                  "ranks as threads of this process, or MPI processes (mpirun)");
  try {
    if (!cli.parse(argc, argv)) {
      std::cout << cli.help();
      return 0;
    }
    train::validate(rc);  // ranges of every configured value, in "key (--flag)" words
    from_config(o, rc);
    check_trace_path(o.trace, rc.profiling.trace_file.empty());
    check(o.ranks >= 0, "--ranks must be >= 0");
    check(!o.recipe.empty() || (o.ranks == 0 && o.backend == "threads"),
          "--ranks and --backend need --recipe (a single-rank run has no ranks to choose)");
    check(o.compute_dtype == "f32" || o.device == "cuda",
          "training.compute_dtype (--compute-dtype) bf16 runs on GPUs (--device cuda); the CPU trains with f32 "
          "operands");
    check(o.attention.empty() || (o.device == "cuda" && o.compute_dtype == "bf16"),
          "training.attention (--attention) chooses the kernels of the attention with bf16 operands on GPUs: give "
          "--device cuda --compute-dtype bf16 with it, or leave it out");
#ifdef TESSERA_HAS_CUDA_TRAINER
    if (o.device == "cuda")
      if (const std::string why = train_llama_cli::cuda_unavailable(); !why.empty()) throw error(why);
    if (!o.attention.empty())  // (cudnn in a train_llama that does not link it: refused, naming how to build it)
      cuda::set_default_attention_library(
          cuda::attention_library_from("training.attention (--attention)", o.attention.c_str()));
    else if (o.device == "cuda" && o.compute_dtype == "bf16")
      (void)cuda::default_attention_library();  // TESSERA_ATTENTION's, refused now if it cannot run
#else
    check(o.device == "cpu", "--device cuda: this train_llama was built without CUDA (nvcc was not found when it "
                             "was configured, or TESSERA_BUILD_CUDA_UNITS=OFF, which .ci/main.sh sets where no GPU "
                             "is visible); rebuild with the CUDA toolkit and TESSERA_BUILD_CUDA_UNITS=ON "
                             "(TESSERA_MAIN_CUDA=ON bash .ci/main.sh) or train on --device cpu");
#endif
    // several processes of mpirun, srun or torchrun, each of which would train the job alone
    if (stopped_by_launcher(o.backend)) return 2;
    check_save_weights_path(o.save_weights);  // last: creates the folder once the flags are known to be good
  } catch (const error& e) {
    std::cerr << "train_llama: error: " << e.what() << "\n";
    return 2;
  }
  const llama_config* cfg = find_config(o.model);
  if (!cfg) {
    std::cerr << "train_llama: error: unknown --model '" << o.model << "'; choose one of " << models << "\n";
    return 2;
  }
  if (o.threads > 0) cpu::set_num_threads(o.threads);
  if (!o.recipe.empty()) return run_recipe(o, argc, argv);
  if (!has_token_source(o, *cfg)) return 2;
  if (o.device == "cuda") return run_cuda(o, *cfg);

  // Parameters, gradients and two AdamW moments in f32: 16 bytes per parameter; an async
  // checkpoint's staging arena (weights and both moments) 12 more.
  const bool staged = !o.ckpt_folder.empty() && o.ckpt_async == "async";
  const double state_bytes = (staged ? 28.0 : 16.0) * static_cast<double>(param_count(*cfg));
  const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (state_bytes > ram) {
    char msg[384];
    std::snprintf(msg, sizeof msg,
                  "%s needs %.1f GiB for f32 parameters, gradients and AdamW moments%s alone; this "
                  "machine has %.1f GiB (shard it with the parallel policies)",
                  std::string(cfg->name).c_str(), state_bytes / (1 << 30),
                  staged ? " and the async checkpoint's staging copy" : "", ram / (1 << 30));
    throw error(msg);
  }

  auto tokens = load_tokens(o, *cfg);
  if (!o.save_tokens.empty()) train::write_token_file(o.save_tokens, tokens);
  if (o.global_batch > 0) o.batch = o.global_batch;
  train::batch_loader loader(tokens, o.batch, o.seq_len, o.seed, !o.no_shuffle);

  llama_model model(*cfg);
  if (o.init_from.empty() || train_llama_cli::names_checkpoint(o.init_from)) {  // (a checkpoint: the checkpointer's)
    model.init_weights(o.seed);
  } else {
    train::load_hf_checkpoint(*cfg, [&](std::int64_t i) { return model.param(i); }, o.init_from);
  }
  train::jsonl_writer jsonl;
  if (!o.metrics.empty()) jsonl = train::jsonl_writer(o.metrics);

  const double peak = train::host_peak_flops();
  std::printf("model %s: %s parameters, %lld layers, dim %lld; %lld threads\n", std::string(cfg->name).c_str(),
              with_commas(model.num_params()).c_str(), static_cast<long long>(cfg->n_layers),
              static_cast<long long>(cfg->dim), static_cast<long long>(cpu::num_threads()));
  std::printf("data: %s tokens, %lld steps per epoch of batch %lld x seq %lld x accum %lld\n",
              with_commas(static_cast<std::int64_t>(tokens.size())).c_str(),
              static_cast<long long>(loader.steps_per_epoch() / o.accum), static_cast<long long>(o.batch),
              static_cast<long long>(o.seq_len), static_cast<long long>(o.accum));
  std::printf("measured sgemm peak: %.1f GFLOP/s with OpenBLAS '%s' kernels on %d cores (MFU denominator); "
              "%.1f MFLOP per token\n",
              peak / 1e9, cpu::blas_core().c_str(), train::usable_cores(), flops_per_token(*cfg, o.seq_len) / 1e6);

  train::trainer tr(model, loader, o.steps, o.accum, optimizer_of(o), peak);
  train_llama_cli::run_steps(model, tr, loader, checkpoint_of(o), jsonl, o.trace);
  if (!o.save_weights.empty()) {
    train::save_hf_checkpoint(*cfg, [&](std::int64_t i) { return model.param(i); }, o.save_weights,
                              o.save_dtype == "bf16" ? train::safetensors::dtype::bf16
                                                     : train::safetensors::dtype::f32);
    std::printf("saved weights to %s\n", o.save_weights.c_str());
  }
  return 0;
}
train::optimizer_options optimizer_of(const options& o) {
  train::optimizer_options opt;
  opt.lr = o.lr;
  opt.beta1 = o.beta1, opt.beta2 = o.beta2, opt.eps = o.eps;
  opt.weight_decay = o.weight_decay;
  opt.max_norm = o.max_norm;
  opt.warmup = o.warmup;
  opt.schedule = o.lr_schedule;
  return opt;
}

train_llama_cli::run_inputs inputs_of(const options& o, std::span<const std::int32_t> tokens) {
  train_llama_cli::run_inputs in;
  in.steps = o.steps, in.batch = o.batch, in.seq_len = o.seq_len, in.accum = o.accum, in.seed = o.seed;
  in.shuffle = !o.no_shuffle;
  in.opt = optimizer_of(o);
  in.init_from = o.init_from, in.save_weights = o.save_weights, in.metrics = o.metrics, in.save_dtype = o.save_dtype;
  in.tokens = tokens;
  in.trace_file = o.trace;
  in.checkpoint = checkpoint_of(o);
  in.bf16 = o.compute_dtype == "bf16";  // (--device cuda only: refused on the CPU)
  return in;
}

/// --checkpoint.*: distributed checkpoints, of a recipe's ranks or of the single rank.
train::checkpoint_options checkpoint_of(const options& o) {
  train::checkpoint_options c;
  c.folder = o.ckpt_folder, c.interval = o.ckpt_interval, c.keep_latest_k = o.ckpt_keep;
  c.mode = train::parse_async_mode(o.ckpt_async);
  c.load_step = o.ckpt_load_step, c.exclude = train::parse_exclusions(o.ckpt_exclude);
  c.last_save_model_only = o.ckpt_model_only;
  c.export_dtype = o.save_dtype == "bf16" ? dtype::bf16 : dtype::f32;
  if (train_llama_cli::names_checkpoint(o.init_from)) c.initial_load_path = o.init_from;
  return c;
}

/// --device cuda --recipe: the recipe's ranks on GPUs (train_llama_cuda.cu).
int run_recipe_cuda(const std::string& name, comm::any_communicator* mpi, std::int64_t ranks,
                    const train_llama_cli::run_inputs& in) {
#ifdef TESSERA_HAS_CUDA_TRAINER
  return train_llama_cli::run_recipe_on_cuda(name, mpi, ranks, in);
#else
  (void)name, (void)mpi, (void)ranks, (void)in;
  throw error("--device cuda: this train_llama was built without CUDA");
#endif
}

int run_recipe(const options& o, [[maybe_unused]] int& argc, [[maybe_unused]] char**& argv) {  // MPI's, when built with it
  int status = 2;
  const bool known = recipes::visit(o.recipe, [&]<class R>() {
    constexpr llama_config rc = recipe_traits<R>::config;
    if (o.model != rc.name) {
      std::cerr << "train_llama: error: recipe " << R::name << " compiles in model " << rc.name << ", not --model "
                << o.model << "; drop --model or write a recipe for it (docs/recipes.md)\n";
      return;
    }
    if (!has_token_source(o, rc)) return;
    if (o.backend == "mpi") {
#ifdef TESSERA_HAS_MPI
      comm::mpi_environment env(argc, argv);
      comm::mpi_communicator world;
      train_llama_cli::check_mpi_world(world.size());
      if (o.ranks != 0 && o.ranks != world.size())
        throw error("--ranks " + std::to_string(o.ranks) + " differs from the " + std::to_string(world.size()) +
                    " MPI processes; under mpirun the rank count is mpirun's -np");
      // a mesh problem every process finds; then, before anything large is allocated, each
      // process checks its node (the CPU: the node's ranks share its memory) or its GPU (and
      // the node's other processes on it). The lowest rank with a problem says it, once
      using train_llama_cli::passes_on_every_process;
      if (!passes_on_every_process(world, [&] { train_llama_cli::bind_mesh<R>(world.size(), true); })) {
        status = 1;
        return;
      }
      const auto mesh = train_llama_cli::bind_mesh<R>(world.size(), true);
      const std::int64_t batch = train_llama_cli::global_batch<R>(mesh, o.batch, o.global_batch, o.seq_len);
      // (every process's GPU gathered first: a collective, outside the check that may throw)
      const std::vector<int> gpus = o.device == "cpu" ? std::vector<int>{} : train_llama_cli::process_gpus(world);
      if (!passes_on_every_process(world, [&] {
            if (o.device == "cpu")
              train::check_host_memory<R>(mesh.shape(), batch, o.seq_len,
                                          train::ranks_on_this_host("mpi", world.size()));
            else
              check_gpu_memory<R>(mesh.shape(), batch, o.seq_len, gpus, o.compute_dtype == "bf16");
          })) {
        status = 1;
        return;
      }
      auto tokens = load_tokens(o, rc);
      auto in = inputs_of(o, tokens);
      in.batch = batch;
      trace::recorder events;  // this process's rank; rank 0 gathers every rank's
      if (!o.trace.empty()) {
        train_llama_cli::name_tracks(events, world.size());
        in.trace = &events, in.gather_trace = true;
      }
      if (o.device == "cuda") {
        comm::any_communicator host(world);
        if (run_recipe_cuda(o.recipe, &host, 0, in) != 0) return;
      } else {
        check(train_llama_cli::run_cpu_recipe(o.recipe, &world, 0, in), "train_llama: recipe " + o.recipe +
                                                                            " is in neither half");
      }
      if (!o.trace.empty() && world.rank() == 0)
        std::printf("wrote the trace of %d ranks to %s\n", world.size(), o.trace.c_str());
      status = 0;
#else
      std::cerr << "train_llama: error: this build has no MPI (install libopenmpi-dev and reconfigure); use "
                   "--backend threads\n";
#endif
      return;
    }
    using M = typename R::mesh;
    std::int64_t ranks = o.ranks;
    if (ranks == 0) {
      if constexpr (M::is_always_static()) ranks = tessera::world_size(M::static_shape);
      else throw error("recipe " + std::string(R::name) + " has a dynamic mesh axis; give --ranks N");
    }
    const auto mesh = train_llama_cli::bind_mesh<R>(ranks);
    const std::int64_t batch = train_llama_cli::global_batch<R>(mesh, o.batch, o.global_batch, o.seq_len);
    if (o.device == "cpu") {  // before anything large is allocated; every rank is a thread of this process
      train::check_host_memory<R>(mesh.shape(), batch, o.seq_len, ranks);
    } else {  // rank r on GPU r, or ranks sharing the GPUs where there are fewer
      check_gpu_memory<R>(mesh.shape(), batch, o.seq_len, train_llama_cli::rank_gpus(ranks),
                          o.compute_dtype == "bf16");
    }
    auto tokens = load_tokens(o, rc);
    if (!o.save_tokens.empty()) train::write_token_file(o.save_tokens, tokens);
    auto in = inputs_of(o, tokens);
    in.batch = batch;
    trace::recorder events;  // shared by the rank threads
    if (!o.trace.empty()) {
      train_llama_cli::name_tracks(events, static_cast<int>(ranks));
      in.trace = &events;
    }
    if (o.device == "cuda") {
      if (run_recipe_cuda(o.recipe, nullptr, ranks, in) != 0) return;
    } else {
      check(train_llama_cli::run_cpu_recipe(o.recipe, nullptr, ranks, in), "train_llama: recipe " + o.recipe +
                                                                               " is in neither half");
    }
    if (!o.trace.empty()) {
      events.write(o.trace);
      std::printf("wrote the trace (%zu events of %lld ranks) to %s\n", events.size(), static_cast<long long>(ranks),
                  o.trace.c_str());
    }
    status = 0;
  });
  if (!known) {
    std::cerr << "train_llama: error: unknown --recipe '" << o.recipe << "'; choose one of " << recipes::names()
              << "\n";
    return 2;
  }
  return status;
}
}  // namespace

int main(int argc, char** argv) {
  // Debian's OpenBLAS misdetects some Xeons and runs its generic kernels, ~5x slower:
  // re-executes with OPENBLAS_CORETYPE set when that happens (see docs/kernels.md).
  tessera::cpu::use_native_blas_core(argv);
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "train_llama: error: " << e.what() << "\n";
    return 1;
  }
}

namespace train_llama_cli {
TESSERA_CPU_RECIPE_HALF(0);  // half 1: train_llama_recipes.cpp
}  // namespace train_llama_cli
