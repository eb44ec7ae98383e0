// run_config: TOML files, command-line overrides and aliases, compiled-in keys, errors.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <tessera/train/config.hpp>

#include "failure.hpp"

namespace {
using namespace tessera;
using testing_support::failure_of;
using testing_support::has;
namespace fs = std::filesystem;

/// Writes `text` to a file of that name in the scratch folder; returns its path.
std::string write(const std::string& name, const std::string& text) {
  const fs::path d = fs::path(TESSERA_TEST_SCRATCH) / "config";
  fs::create_directories(d);
  std::ofstream(d / name, std::ios::binary) << text;
  return (d / name).string();
}

struct bound {
  train::run_config c;
  train::option_set o{"train_llama"};
  bound() { train::bind(o, c); }
  bool parse(std::vector<const char*> args) {
    args.insert(args.begin(), "train_llama");
    return o.parse(static_cast<int>(args.size()), args.data());
  }
  std::string load_error(const std::string& path) {
    return failure_of<error>([&] { train::load_toml(path, o); });
  }
};

const char* every_section = R"(# one key or more of every section
[job]
dump_folder = "out"
description = "all sections"
threads = 3

[model]
flavor = "llama3_1b"
tokenizer_path = "tok.model"
tokenizer_cache_dir = "cache"

[optimizer]
name = "AdamW"
lr = 3e-3
beta1 = 0.8
beta2 = 0.99
eps = 1e-6
weight_decay = 0      # an integer is a number too

[lr_scheduler]
warmup_steps = 5
decay_type = "cosine"

[training]
steps = 60
local_batch_size = 4
seq_len = 128
gradient_accumulation_steps = 2
max_norm = 0.5
seed = 42
dataset = "fortunes"
dataset_path = "corpus.txt"
save_tokens_file = "corpus.bin"
no_shuffle = true

[checkpoint]
initial_load_path = "in.safetensors"
save_weights = "out.safetensors"
export_dtype = "bf16"

[metrics]
file = "m.jsonl"
)";
}  // namespace

TEST_CASE("config: defaults are train_llama's, every key has help") {
  bound b;
  CHECK(b.parse({}));
  CHECK(b.c.training.steps == 20);
  CHECK(b.c.training.local_batch_size == 8);
  CHECK(b.c.training.seq_len == 256);
  CHECK(b.c.optimizer.lr == 8e-4);
  CHECK(b.c.lr_scheduler.warmup_steps == 2);
  CHECK(b.c.lr_scheduler.decay_type == "linear");
  CHECK(b.c.model.flavor == "debugmodel");
  CHECK(b.c.checkpoint.export_dtype == "f32");
  const std::string h = b.o.help();
  CHECK(has(h, "--training.steps, --steps N"));
  CHECK(has(h, "--training.local_batch_size, --batch N"));
  CHECK(has(h, "--job.config_file, --config TEXT"));
  CHECK(has(h, "--lr_scheduler.decay_type, --lr-schedule constant|linear|cosine"));
  CHECK(has(h, "parallelism.tensor_parallel_degree"));
  CHECK_NOTHROW(train::validate(b.c));
}

TEST_CASE("config: a TOML file sets every section") {
  bound b;
  train::load_toml(write("every.toml", every_section), b.o);
  const auto& c = b.c;
  CHECK(c.job.dump_folder == "out");
  CHECK(c.job.description == "all sections");
  CHECK(c.job.threads == 3);
  CHECK(c.model.flavor == "llama3_1b");
  CHECK(c.model.tokenizer_path == "tok.model");
  CHECK(c.model.tokenizer_cache_dir == "cache");
  CHECK(c.optimizer.name == "AdamW");
  CHECK(c.optimizer.lr == 3e-3);
  CHECK(c.optimizer.beta1 == 0.8);
  CHECK(c.optimizer.beta2 == 0.99);
  CHECK(c.optimizer.eps == 1e-6);
  CHECK(c.optimizer.weight_decay == 0.0);
  CHECK(c.lr_scheduler.warmup_steps == 5);
  CHECK(c.lr_scheduler.decay_type == "cosine");
  CHECK(c.training.steps == 60);
  CHECK(c.training.local_batch_size == 4);
  CHECK(c.training.seq_len == 128);
  CHECK(c.training.gradient_accumulation_steps == 2);
  CHECK(c.training.max_norm == 0.5);
  CHECK(c.training.seed == 42);
  CHECK(c.training.dataset == "fortunes");
  CHECK(c.training.dataset_path == "corpus.txt");
  CHECK(c.training.save_tokens_file == "corpus.bin");
  CHECK(c.training.no_shuffle);
  CHECK(c.checkpoint.initial_load_path == "in.safetensors");
  CHECK(c.checkpoint.save_weights == "out.safetensors");
  CHECK(c.checkpoint.export_dtype == "bf16");
  CHECK(c.metrics.file == "m.jsonl");
  CHECK(c.output_path(c.metrics.file) == "out/m.jsonl");
  CHECK(c.output_path("/abs/m.jsonl") == "/abs/m.jsonl");
  CHECK_NOTHROW(train::validate(c));
  // Dotted keys and inline tables flatten the same way.
  bound d;
  train::load_toml(write("dotted.toml", "training.steps = 9\noptimizer = { lr = 0.125 }\n"), d.o);
  CHECK(d.c.training.steps == 9);
  CHECK(d.c.optimizer.lr == 0.125);
}

TEST_CASE("config: defaults < file < command line, wherever --config stands") {
  const std::string f = write("prec.toml", "[training]\nsteps = 50\nseq_len = 64\n[optimizer]\nlr = 1e-3\n");
  for (const char* flag : {"--config", "--job.config_file"}) {
    bound b;
    CHECK(b.parse({"--steps", "7", "--optimizer.lr=2e-3", flag, f.c_str()}));
    CHECK(b.c.job.config_file == f);
    CHECK(b.c.training.steps == 7);         // flag over file (the flag came first)
    CHECK(b.c.optimizer.lr == 2e-3);        // flag over file
    CHECK(b.c.training.seq_len == 64);      // file over default
    CHECK(b.c.training.local_batch_size == 8);  // default
  }
  bound b;
  CHECK(b.parse({std::string("--config=").append(f).c_str()}));
  CHECK(b.c.training.steps == 50);
}

TEST_CASE("config: train_llama's flags are aliases of the keys") {
  bound b;
  CHECK(b.parse({"--model", "llama3_8b", "--steps", "3", "--seed", "5", "--batch", "2", "--seq-len", "16",
                 "--grad-accum", "4", "--lr", "0.01", "--warmup", "1", "--lr-schedule", "constant",
                 "--weight-decay", "0.2", "--max-norm", "2", "--data", "d.txt", "--tokenizer", "t.model",
                 "--cache-dir", "cd", "--save-tokens", "s.bin", "--init-from", "i.st", "--save-weights", "w.st",
                 "--save-dtype", "bf16", "--metrics", "m.jsonl", "--threads", "2", "--no-shuffle"}));
  const auto& c = b.c;
  CHECK(c.model.flavor == "llama3_8b");
  CHECK(c.training.steps == 3);
  CHECK(c.training.seed == 5);
  CHECK(c.training.local_batch_size == 2);
  CHECK(c.training.seq_len == 16);
  CHECK(c.training.gradient_accumulation_steps == 4);
  CHECK(c.optimizer.lr == 0.01);
  CHECK(c.lr_scheduler.warmup_steps == 1);
  CHECK(c.lr_scheduler.decay_type == "constant");
  CHECK(c.optimizer.weight_decay == 0.2);
  CHECK(c.training.max_norm == 2.0);
  CHECK(c.training.dataset_path == "d.txt");
  CHECK(c.model.tokenizer_path == "t.model");
  CHECK(c.model.tokenizer_cache_dir == "cd");
  CHECK(c.training.save_tokens_file == "s.bin");
  CHECK(c.checkpoint.initial_load_path == "i.st");
  CHECK(c.checkpoint.save_weights == "w.st");
  CHECK(c.checkpoint.export_dtype == "bf16");
  CHECK(c.metrics.file == "m.jsonl");
  CHECK(c.job.threads == 2);
  CHECK(c.training.no_shuffle);
  bound t;
  CHECK(t.parse({"--tokens", "t.bin", "--training.steps", "4", "--steps", "6"}));
  CHECK(t.c.training.tokens_file == "t.bin");
  CHECK(t.c.training.steps == 6);  // the last one given wins
}

TEST_CASE("config errors: unreadable file, TOML syntax with line and column") {
  bound b;
  const std::string missing = (fs::path(TESSERA_TEST_SCRATCH) / "config" / "missing.toml").string();
  CHECK(has(b.load_error(missing), "cannot read config file '" + missing + "'"));
  CHECK(has(failure_of<error>([&] { b.parse({"--config", missing.c_str()}); }), "cannot read config file"));
  const std::string bad = write("syntax.toml", "[training]\nsteps = 10\nseq_len = = 3\n");
  const std::string m = b.load_error(bad);
  CHECK(has(m, bad + ":3:"));
  CHECK(has(m, "TOML syntax error"));
}

TEST_CASE("config errors: what toml++ 3.3.0 mishandles is refused before it (issue 22, finding 11)") {
  bound b;
  const std::string header = write("dollar.toml", "[training]\nsteps = 3\n[$\n");
  CHECK(b.load_error(header) == header + ":3:2: TOML syntax error: a table header must start with a key, e.g. "
                                         "[training] or [[a.b]]");
  const std::string triple = write("triple.toml", "[[[1]]]\n");
  CHECK(has(b.load_error(triple), triple + ":1:3: TOML syntax error: a table header must start with a key"));
  const std::string greek = write("greek.toml", "\xcf\xa2");
  CHECK(b.load_error(greek) == greek + ":1:1: TOML syntax error: a character outside ASCII stands outside a string "
                                       "or comment; quote the key or the value");
  const std::string latin1 = write("latin1.toml", "# caf\xe9\n");
  CHECK(has(b.load_error(latin1), latin1 + ":1:6: TOML syntax error: the file is not valid UTF-8"));
  // found by fuzz_toml_config: a quote right after a value is no string to toml++
  const std::string after = write("quote_after_value.toml", "[optimizer]\nlr = 1\"\"\"\xc3\xa9\"\n");
  CHECK(b.load_error(after) == after + ":2:7: TOML syntax error: a quote after '1' cannot begin a string; put a "
                                       "key or a value before it");
  // found by fuzz_toml_config in CI: a closing bracket where an array's value must begin
  const std::string brace = write("brace_in_array.toml", "[lr_scheduler]\nwarmup_steps = [}s0\n");
  CHECK(b.load_error(brace) == brace + ":2:17: TOML syntax error: '}' where a value must begin (after '['); write "
                                       "the value first");
  const std::string comma = write("comma_value.toml", "[training]\nsteps = ,\n");
  CHECK(has(b.load_error(comma), comma + ":2:9: TOML syntax error: ',' where a value must begin (after '=')"));
  // found by fuzz_link_profile in 600 s: a date, a space and a digit that begins no time
  const std::string date = write("date_digit.toml", "[job]\ns = 1979-05-27 1\n");
  CHECK(b.load_error(date) == date + ":2:5: TOML syntax error: a value followed by a space and a digit must be a "
                                     "date and a time, e.g. 1979-05-27 07:32:00");
  for (const char* bad : {"s = 1979-05-27 1", "s = [1979-05-27 1]", "s = {a = 1979-05-27 12}", "s = 1979-05-2_7 1,",
                          "s = 12 3", "s = 1979-05-27 1:00:00", "s = 1;79-05-27 1\n", "s = 1979-05-27T 1"})
    CHECK_THROWS_WITH_AS(tessera::detail::toml_precheck(bad, "x.toml"), doctest::Contains("must be a date and a time"),
                         tessera::error);
  // dates, times and date-times TOML allows pass it, with a space, a T, an offset or fractions
  CHECK_NOTHROW(tessera::detail::toml_precheck("a = 1979-05-27 07:32:00\nb = [1979-05-27 07:32:00Z, 1979-05-27]\n"
                                               "c = 1979-05-27T07:32:00.5-07:00\nd = 1979-05-27 # 1\ne = 1979-05-27  \n"
                                               "f = 07:32:00\ng = { h = 1979-05-27 07:32:00.999 }\ni = 1_000\n",
                                               "x.toml"));
  // empty arrays and a trailing comma in an array are TOML and pass the pre-check
  CHECK_NOTHROW(tessera::detail::toml_precheck("a = []\nb = [1, 2, ]\nc = { }\nd = [ [], [1,], ]\n", "x.toml"));
  // what TOML allows still loads: non-ASCII in strings and comments, quoted keys and headers
  const std::string ok = write("utf8.toml",
                               "# \xc3\xa9t\xc3\xa9\n[job]\ndescription = \"\xcf\xa2 \\\" [x\"\n"
                               "[\"training\"]\nsteps = 4 # \xcf\xa2\n[lr_scheduler]\n\"warmup_steps\" = 3\n");
  train::load_toml(ok, b.o);
  CHECK(b.c.job.description == "\xcf\xa2 \" [x");
  CHECK(b.c.training.steps == 4);
  CHECK(b.c.lr_scheduler.warmup_steps == 3);
}

TEST_CASE("config errors: unknown key with the nearest, alias as key, nested config file") {
  bound b;
  const std::string f = write("unknown.toml", "[training]\nsteps = 1\nstepz = 10\n");
  CHECK(has(b.load_error(f), f + ":3:1: unknown key training.stepz (did you mean training.steps?)"));
  const std::string moved = write("moved.toml", "[training]\nlr = 0.1\n");
  CHECK(has(b.load_error(moved), "unknown key training.lr (did you mean optimizer.lr?)"));
  const std::string tt = write("tt.toml", "[training]\nbatch_size = 8\n");  // TorchTitan's old name
  CHECK(has(b.load_error(tt), "did you mean training.local_batch_size?"));
  const std::string alias = write("alias.toml", "steps = 3\n");
  CHECK(has(b.load_error(alias), "'steps' is a command-line alias; in a config file write training.steps"));
  const std::string nested = write("nested.toml", "[job]\nconfig_file = \"other.toml\"\n");
  CHECK(has(b.load_error(nested), "a config file cannot name another"));
  CHECK(has(failure_of<error>([&] { b.parse({"--training.stepz", "1"}); }),
            "unknown option --training.stepz (did you mean --training.steps?)"));
}

TEST_CASE("config errors: wrong types and bad values name file, line and key") {
  struct bad {
    const char* toml;
    const char* expect;
  };
  for (const bad& x : std::vector<bad>{
           {"[training]\nsteps = \"ten\"\n", ":2:9: training.steps must be an integer, not a string"},
           {"[training]\nsteps = 10.5\n", "training.steps must be an integer, not a float"},
           {"[optimizer]\nlr = \"fast\"\n", "optimizer.lr must be a number, not a string"},
           {"[metrics]\nfile = 3\n", "metrics.file must be a string, not an integer"},
           {"[training]\nno_shuffle = 1\n", "training.no_shuffle must be a boolean (true or false), not an integer"},
           {"[training]\nseq_len = [1, 2]\n", "training.seq_len must be an integer, not an array"},
           {"[training]\nseed = -1\n", ":2:8: option --training.seed: '-1' is not a non-negative integer"},
           {"[lr_scheduler]\ndecay_type = \"step\"\n", "'step' is not one of constant|linear|cosine"},
           {"[job]\nthreads = 9999999999\n", "is not a 32-bit integer"},
           {"[optimizer]\nlr = inf\n", ":2:6: option --optimizer.lr: 'inf' is not a finite number"},
           {"[optimizer]\neps = nan\n", ":2:7: option --optimizer.eps: 'nan' is not a finite number"},
           {"[training]\nmax_norm = -inf\n", "option --training.max_norm: '-inf' is not a finite number"},
       }) {
    CAPTURE(x.toml);
    bound b;
    const std::string f = write("type.toml", x.toml);
    const std::string m = b.load_error(f);
    CHECK(has(m, f + ":"));
    CHECK(has(m, x.expect));
  }
}

TEST_CASE("config: compiled-in keys are refused from TOML and the command line") {
  const std::string want =
      "parallelism.tensor_parallel_degree (the size of the tensor-parallel mesh axis) is compiled into the "
      "recipe (mesh axes and policies are types); choose another recipe with --recipe, or write one "
      "(docs/recipes.md)";
  bound b;
  const std::string f = write("tp.toml", "[training]\nsteps = 3\n\n[parallelism]\ntensor_parallel_degree = 2\n");
  CHECK(b.load_error(f) == f + ":5:1: " + want);
  CHECK(failure_of<error>([&] { b.parse({"--parallelism.tensor_parallel_degree", "2"}); }) == want);
  // Every key of the table, both ways; and any other key of [parallelism].
  for (const auto& k : train::compiled_in_keys) {
    std::string key(k.key);
    if (key.back() == '*') key.replace(key.size() - 1, 1, "some_new_option");
    CAPTURE(key);
    bound e;
    const std::string toml = write("compiled.toml", key + " = 1\n");
    const std::string want_k = key + " (" + std::string(k.what) + ") is compiled into the recipe";
    CHECK(has(e.load_error(toml), "compiled.toml:1:"));
    CHECK(has(e.load_error(toml), want_k));
    const std::string flag = "--" + key;
    CHECK(has(failure_of<error>([&] { e.parse({flag.c_str(), "1"}); }), want_k));
  }
}

TEST_CASE("config: validate names the key and its flag") {
  train::run_config c;
  c.training.steps = 0;
  CHECK(has(failure_of<error>([&] { train::validate(c); }), "training.steps (--steps) must be positive"));
  c = {};
  c.training.dataset_path = "a.txt";
  c.training.tokens_file = "a.bin";
  CHECK(has(failure_of<error>([&] { train::validate(c); }), "not both"));
  c = {};
  c.optimizer.lr = 0;
  CHECK(has(failure_of<error>([&] { train::validate(c); }), "optimizer.lr (--lr) must be positive"));
  // A program that sets the fields itself gets the same refusal of non-finite values.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  c = {};
  c.optimizer.lr = inf;
  CHECK(has(failure_of<error>([&] { train::validate(c); }), "optimizer.lr (--lr) is inf; it must be a finite number"));
  c = {};
  c.optimizer.weight_decay = nan;
  CHECK(has(failure_of<error>([&] { train::validate(c); }), "optimizer.weight_decay (--weight-decay) is nan"));
  c = {};
  c.training.max_norm = -inf;
  CHECK(has(failure_of<error>([&] { train::validate(c); }), "training.max_norm (--max-norm) is -inf"));
  c = {};
  c.optimizer.beta2 = nan;
  CHECK(has(failure_of<error>([&] { train::validate(c); }), "optimizer.beta2 is nan"));
  c = {};
  c.optimizer.weight_decay = -0.1;
  CHECK(has(failure_of<error>([&] { train::validate(c); }), "optimizer.weight_decay (--weight-decay) must be >= 0"));
}

TEST_CASE("config: examples/train/configs/debug_model.toml loads") {
  bound b;
  const std::string f = std::string(TESSERA_SOURCE_DIR) + "/examples/train/configs/debug_model.toml";
  CHECK(b.parse({"--config", f.c_str()}));
  CHECK(b.c.model.flavor == "debugmodel");
  CHECK(b.c.training.steps == 20);
  CHECK(b.c.optimizer.lr == 8e-4);
  CHECK(b.c.lr_scheduler.warmup_steps == 2);
  CHECK(b.c.training.local_batch_size == 8);
  CHECK(b.c.training.seq_len == 256);
  CHECK(b.c.metrics.file == "metrics.jsonl");
  CHECK(b.c.job.dump_folder == "outputs/debug_model");
  CHECK_NOTHROW(train::validate(b.c));
}

TEST_CASE("config: profiling keys (TorchTitan's names) give the trace path, from TOML and flags") {
  {
    bound b;
    CHECK(b.parse({}));
    CHECK(b.c.trace_path().empty());  // off by default
  }
  {
    bound b;
    const std::string f = write("prof.toml", "[job]\ndump_folder = \"out\"\n[profiling]\nenable_profiling = true\n"
                                             "save_traces_folder = \"traces\"\n");
    CHECK(b.parse({"--config", f.c_str()}));
    CHECK(b.c.trace_path() == "out/traces/trace.json");
    CHECK(b.parse({"--profiling.trace_file", "/tmp/t.json"}));  // an explicit file wins
    CHECK(b.c.trace_path() == "/tmp/t.json");
  }
  {
    bound b;
    CHECK(b.parse({"--trace", "run.json", "--job.dump_folder", "d"}));
    CHECK(b.c.profiling.trace_file == "run.json");
    CHECK(b.c.trace_path() == "d/run.json");
  }
  bound b;
  const std::string f = write("prof_bad.toml", "[profiling]\nenable_profiling = \"yes\"\n");
  CHECK(has(b.load_error(f), "profiling.enable_profiling must be a boolean (true or false), not a string"));
  CHECK(has(failure_of<error>([&] { b.parse({"--profiling.trace_fil", "x"}); }),
            "did you mean --profiling.trace_file?"));
}

TEST_CASE("config: list options (checkpoint.exclude_from_loading) from a TOML array and a comma-separated flag") {
  bound b;
  train::load_toml(write("list.toml", "[checkpoint]\nfolder = \"ck\"\nload_step = 20\n"
                                      "exclude_from_loading = [\"optimizer\", \"dataloader\"]\n"),
                   b.o);
  CHECK(b.c.checkpoint.load_step == 20);
  CHECK(b.c.checkpoint.exclude_from_loading == std::vector<std::string>{"optimizer", "dataloader"});
  CHECK_NOTHROW(train::validate(b.c));
  CHECK(b.parse({"--checkpoint.exclude_from_loading", "lr_scheduler,train_state,lr_scheduler"}));
  CHECK(b.c.checkpoint.exclude_from_loading == std::vector<std::string>{"lr_scheduler", "train_state"});
  CHECK(b.parse({"--checkpoint.exclude_from_loading="}));  // none
  CHECK(b.c.checkpoint.exclude_from_loading.empty());
  CHECK(has(failure_of<error>([&] { b.parse({"--checkpoint.exclude_from_loading", "optimizer,,model"}); }),
            "'' is not one of model,optimizer,lr_scheduler,dataloader,train_state"));
  struct bad {
    const char* toml;
    const char* expect;  // "" when it loads
  };
  for (const bad& x : std::vector<bad>{
           {"[checkpoint]\nexclude_from_loading = \"model\"\n", ""},  // one name as a string loads
           {"[checkpoint]\nexclude_from_loading = [\"model\", 3]\n", "must be an array of strings, each one name"},
           {"[checkpoint]\nexclude_from_loading = [\"model,optimizer\"]\n", "must be an array of strings, each one name"},
           {"[checkpoint]\nexclude_from_loading = [\"weights\"]\n", ":2:24: option --checkpoint.exclude_from_loading: 'weights' is not one of"},
           {"[checkpoint]\nexclude_from_loading = 1\n", "must be an array of strings, not an integer"},
       }) {
    CAPTURE(x.toml);
    bound c;
    const std::string m = c.load_error(write("list_bad.toml", x.toml));
    if (*x.expect) CHECK(has(m, x.expect));
    else CHECK(m.empty());
  }
  bound d;
  d.c.checkpoint.load_step = 3;
  CHECK(has(failure_of<error>([&] { train::validate(d.c); }), "give the folder"));
  d.c.checkpoint.load_step = -2;
  CHECK(has(failure_of<error>([&] { train::validate(d.c); }), "checkpoint.load_step (--checkpoint.load_step) must be"));
}
