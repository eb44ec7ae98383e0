// Resume and reshard (issue 16): 20 steps straight vs 10 + save + resume 10 in fresh
// objects (bit-identical, sync and async), and a checkpoint of debug_2d on 4 ranks loaded
// into debug_fsdp on 3, debug_tp on 2 and debug_fsdp on 1 (the same losses to 1e-6),
// and debug_hsdp on 4 and debug_pp on 2; a pipeline recipe's own resume. The recipes' meshes
// and policies train training_check's smaller Llama (`small<R>`, below).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/train/checkpoint.hpp>
#include <tessera/train/memory_estimator.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/trainer.hpp>

#include <staged_kernels.hpp>

#include "../parallel/training_check.hpp"
#include "scratch.hpp"

using namespace tessera;
namespace tc = training_check;
namespace fs = std::filesystem;

namespace {
using checkpoint_test::scratch;
// The shipped recipes' meshes and policies on training_check's smaller Llama (tc::small, the
// debug model's shape at a tenth of its size): saving, resuming and resharding move every
// block the same way at any size, and this file's runs took 81 s on the debug model.
using tc::small;

/// Steps [from, to) of `tr`, resuming first when from > 0 (the resumed step must be `from`);
/// saves after step `save_at` (0: never). The losses.
template <class Model>
std::vector<double> steps_of(train::basic_trainer<Model>& tr, train::checkpointer<Model>& ck, std::int64_t from,
                             std::int64_t to, std::int64_t save_at) {
  if (from > 0) {
    const auto s = ck.resume();
    REQUIRE(s.has_value());
    CHECK(*s == from);
    CHECK(tr.step() == from);
  }
  std::vector<double> losses;
  for (std::int64_t s = from; s < to; ++s) {
    losses.push_back(tr.train_step().loss);
    if (s + 1 == save_at) ck.save(s + 1);
  }
  ck.finish();
  return losses;
}

/// Steps [from, to) of recipe R on `world` threads, on kernel backend K: from 0 it
/// initialises the weights, else it resumes from the latest checkpoint in `folder`; saves
/// after step `save_at` (0: never).
template <class R, class K = cpu_kernels>
std::vector<double> run(int world, const std::vector<std::int32_t>& toks, std::int64_t from, std::int64_t to,
                        const std::string& folder, std::int64_t save_at,
                        train::async_mode mode = train::async_mode::disabled) {
  std::vector<double> got;
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    using model_t = train::parallel_llama<R, K>;
    device_mesh<typename R::mesh> dm(typename R::mesh(world), c);
    model_t pm(dm);
    pm.init_weights(from == 0 ? 9 : 1234);  // a resumed run must overwrite every weight
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<model_t> tr(pm, loader, tc::steps, 1, tc::options<typename R::model>(), 0);
    train::checkpointer<model_t> ck(pm, tr, loader, {.folder = folder, .mode = mode});
    const auto losses = steps_of(tr, ck, from, to, save_at);
    if (c.rank() == 0) got = losses;
  });
  return got;
}

std::vector<double> tail(const std::vector<double>& v, std::size_t from) { return {v.begin() + static_cast<std::ptrdiff_t>(from), v.end()}; }

/// The uninterrupted 20 steps of debug_2d on 4 threads, which four test cases compare
/// against: computed once (deterministic), on first use.
const std::vector<double>& straight_2d() {
  static const std::vector<double> v = [] {
    const auto toks = tc::tokens();
    return run<small<recipes::debug_2d>>(4, toks, 0, 20, "", 0);
  }();
  return v;
}
}  // namespace

TEST_CASE("10 steps + save + resume 10 is bit-identical to 20 steps (debug_2d, 4 threads)") {
  const auto toks = tc::tokens();
  const auto& straight = straight_2d();
  REQUIRE(straight.size() == 20);
  for (auto mode : {train::async_mode::disabled, train::async_mode::async}) {
    scratch s(mode == train::async_mode::async ? "async" : "sync");
    const auto first = run<small<recipes::debug_2d>>(4, toks, 0, 10, s.dir.string(), 10, mode);
    REQUIRE(io::checkpoint::latest(s.dir).has_value());
    const auto second = run<small<recipes::debug_2d>>(4, toks, 10, 20, s.dir.string(), 0);
    for (std::size_t i = 0; i < 10; ++i) CHECK(first[i] == straight[i]);
    REQUIRE(second.size() == 10);
    for (std::size_t i = 0; i < 10; ++i) CHECK(second[i] == straight[10 + i]);  // bit-identical
  }
}

// A model on a device backend (staged_kernels: state in a memory space the library reaches
// only through the backend's copies, as GPU memory) stages every block through the host in
// both modes and loads through a host buffer: its checkpoints resume bit-identically on the
// same backend, and are the host runtime's files (each resumes the other's).
TEST_CASE("a device-backend model's checkpoints: resumed bit-identically, and the same files as the host's") {
  const auto toks = tc::tokens();
  using R = small<recipes::debug_2d>;
  const auto& straight = straight_2d();  // steps 1..8 of it (every run here schedules 20 steps)
  for (auto mode : {train::async_mode::disabled, train::async_mode::async}) {
    CAPTURE(static_cast<int>(mode));
    scratch a(mode == train::async_mode::async ? "staged_async" : "staged_sync"), b("host_saved");
    const auto first = run<R, testing::staged_kernels>(4, toks, 0, 4, a.dir.string(), 4, mode);
    for (std::size_t i = 0; i < 4; ++i) CHECK(first[i] == straight[i]);
    const auto on_staged = run<R, testing::staged_kernels>(4, toks, 4, 8, a.dir.string(), 0);
    const auto on_host = run<R>(4, toks, 4, 8, a.dir.string(), 0);  // the device's checkpoint, the host's runtime
    run<R>(4, toks, 0, 4, b.dir.string(), 4, mode);
    const auto host_to_staged = run<R, testing::staged_kernels>(4, toks, 4, 8, b.dir.string(), 0);
    REQUIRE(on_staged.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) {
      CHECK(on_staged[i] == straight[4 + i]);
      CHECK(on_host[i] == straight[4 + i]);
      CHECK(host_to_staged[i] == straight[4 + i]);
    }
  }
  CHECK(memory_tracker<staged::space>::current_bytes() == 0);
}

TEST_CASE("a checkpoint of debug_2d on 4 ranks resumes in debug_fsdp on 3 and 1, debug_tp on 2") {
  const auto toks = tc::tokens();
  const auto& straight = straight_2d();
  scratch s("reshard");
  run<small<recipes::debug_2d>>(4, toks, 0, 10, s.dir.string(), 10);
  const auto ref = tail(straight, 10);
  auto check_close = [&](const char* what, const std::vector<double>& got) {
    REQUIRE(got.size() == ref.size());
    const double dev = tc::deviation(ref, got);
    std::printf("resumed in %s: steps 11..20 deviate from the uninterrupted debug_2d run by %.2e relative\n", what, dev);
    CHECK(dev <= 1e-6);
  };
  check_close("debug_fsdp on 3 ranks", run<small<recipes::debug_fsdp>>(3, toks, 10, 20, s.dir.string(), 0));
  check_close("debug_tp on 2 ranks", run<small<recipes::debug_tp>>(2, toks, 10, 20, s.dir.string(), 0));
  check_close("debug_fsdp on 1 rank", run<small<recipes::debug_fsdp>>(1, toks, 10, 20, s.dir.string(), 0));
  check_close("debug_hsdp on 4 ranks", run<small<recipes::debug_hsdp>>(4, toks, 10, 20, s.dir.string(), 0));
  check_close("debug_pp on 2 ranks", run<small<recipes::debug_pp>>(2, toks, 10, 20, s.dir.string(), 0));
  check_close("debug_3d on 8 ranks", run<small<recipes::debug_3d>>(8, toks, 10, 20, s.dir.string(), 0));
  check_close("debug_3d_zbv on 8 ranks", run<small<recipes::debug_3d_zbv>>(8, toks, 10, 20, s.dir.string(), 0));
}

namespace {
/// Reads every saved box of the checkpoint in `dir` (each read checks its checksum).
void read_every_box(const fs::path& dir) {
  io::checkpoint::box_reader r(dir);
  std::vector<float> buf;
  for (const auto& t : r.meta().tensors)
    for (const auto& b : t.boxes) {
      buf.resize(static_cast<std::size_t>(b.where.numel()));
      r.read(t.name, t.shape, b.where, buf.data());
    }
}

/// The async staging arena of every rank equals estimate_checkpoint_staging for its
/// coordinates, and stays the same from one save to the next.
template <class R>
void check_staging(int world) {
  const auto toks = tc::tokens();
  scratch s(std::string("staging_") + std::string(R::name));
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    device_mesh<typename R::mesh> dm(typename R::mesh(world), c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(9);
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, tc::steps, 1, tc::options<typename R::model>(), 0);
    train::checkpointer<train::parallel_llama<R>> ck(pm, tr, loader,
                                                     {.folder = s.dir.string(), .mode = train::async_mode::async});
    const std::int64_t want = estimate_checkpoint_staging<R>(dm.shape(), dm.coords());
    for (std::int64_t step = 1; step <= 2; ++step) {
      tr.train_step();
      ck.save(step);
      CHECK_MESSAGE(static_cast<std::int64_t>(ck.last().staging_bytes) == want, R::name, " rank ", c.rank(),
                    " save ", step, ": staging arena ", ck.last().staging_bytes, " B, estimated ", want, " B");
      CHECK(ck.last().bytes == ck.last().staging_bytes);  // the arena holds exactly what this rank writes
    }
    ck.finish();
  });
}
}  // namespace

TEST_CASE("the async staging arena is what estimate_checkpoint_staging says, on every rank") {
  check_staging<small<recipes::debug_fsdp>>(3);
  check_staging<small<recipes::debug_hsdp>>(4);
  check_staging<small<recipes::debug_2d>>(4);
  check_staging<small<recipes::debug_pp>>(2);
  check_staging<small<recipes::debug_3d>>(8);
  static_assert(estimate_checkpoint_staging<recipes::debug_tp>(mesh_shape{1, {2}}) > 0);  // constexpr
}

TEST_CASE("a rank that fails during an async save: the run stops with its error, the last checkpoint stays, "
          "a rerun resumes from it (threads)") {
  using R = small<recipes::debug_2d>;
  const auto toks = tc::tokens();
  const auto& straight = straight_2d();
  scratch s("fault");
  // Saves at steps 5 and 10 (async); rank 1's writer fails at step 10; the error surfaces at
  // the next save (step 15): run_threads rethrows it and every other rank stops.
  std::string what;
  try {
    comm::run_threads(4, [&](comm::threads_communicator& c) {
      device_mesh<R::mesh> dm(R::mesh(4), c);
      train::parallel_llama<R> pm(dm);
      pm.init_weights(9);
      train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
      train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, tc::steps, 1, tc::options<typename R::model>(), 0);
      train::checkpoint_options o{.folder = s.dir.string(), .interval = 5, .mode = train::async_mode::async};
      o.before_write = [](std::int64_t step, int rank) {
        if (step == 10 && rank == 1) throw error("injected failure: rank 1's disk is gone");
      };
      train::checkpointer<train::parallel_llama<R>> ck(pm, tr, loader, o);
      for (std::int64_t step = 0; step < 20; ++step)
        if (ck.due(tr.train_step().step)) ck.save(tr.step());
      ck.finish();
    }, {.timeout = std::chrono::milliseconds(60000)});
  } catch (const std::exception& e) {
    what = e.what();
  }
  std::printf("the run stopped with: %s\n", what.c_str());
  CHECK(what.find("injected failure: rank 1's disk is gone") != std::string::npos);
  CHECK(io::checkpoint::complete_steps(s.dir) == std::vector<std::int64_t>{5});  // step 10 never committed
  read_every_box(io::checkpoint::step_folder(s.dir, 5));                          // and step 5 is intact
  const auto again = run<R>(4, toks, 5, 20, s.dir.string(), 0);
  REQUIRE(again.size() == 15);
  for (std::size_t i = 0; i < 15; ++i) CHECK(again[i] == straight[5 + i]);  // bit-identical
}

TEST_CASE("rank 0 stops waiting as soon as another rank's write fails, naming it") {
  scratch s("marked");
  const auto tmp = io::checkpoint::begin_save(s.dir, 3);
  io::checkpoint::shard_writer w;
  w.write(tmp, 0);
  io::checkpoint::mark_failed(tmp, 2, "no space left on device");
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(io::checkpoint::wait_for_ranks(tmp, 3, 600.0),
                    doctest::Contains("rank 2 failed to write its shard"));
  CHECK_THROWS_WITH(io::checkpoint::wait_for_ranks(tmp, 3, 600.0), doctest::Contains("no space left on device"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
  std::atomic<bool> cancel{true};
  CHECK_THROWS_WITH(io::checkpoint::wait_for_ranks(tmp, 2, 600.0, &cancel), doctest::Contains("abandoned"));
}

TEST_CASE("a pipeline recipe saves and resumes bit-identically (debug_pp, 2 threads)") {
  const auto toks = tc::tokens();
  const auto straight = run<small<recipes::debug_pp>>(2, toks, 0, 20, "", 0);
  scratch s("pp");
  run<small<recipes::debug_pp>>(2, toks, 0, 10, s.dir.string(), 10);
  const auto second = run<small<recipes::debug_pp>>(2, toks, 10, 20, s.dir.string(), 0);
  REQUIRE(second.size() == 10);
  for (std::size_t i = 0; i < 10; ++i) CHECK(second[i] == straight[10 + i]);
}

namespace {
/// Steps [from, to) of one rank's smallmodel (basic_llama_model<K>, no mesh), as run() does
/// for a recipe: from 0 it initialises the weights, else it resumes from `folder`.
template <class K = cpu_kernels>
std::vector<double> run_one(const std::vector<std::int32_t>& toks, std::int64_t from, std::int64_t to,
                            const std::string& folder, std::int64_t save_at,
                            train::async_mode mode = train::async_mode::disabled) {
  using model_t = basic_llama_model<K>;
  model_t m(tc::smallmodel::config);
  m.init_weights(from == 0 ? 9 : 1234);
  train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
  train::basic_trainer<model_t> tr(m, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
  train::checkpointer<model_t> ck(m, tr, loader, {.folder = folder, .mode = mode});
  return steps_of(tr, ck, from, to, save_at);
}
}  // namespace

// A single-rank model (llama_model, device_llama: no mesh) writes the files of rank 0 of a
// world of one, each tensor one box: they resume on one rank bit-identically, and on any
// recipe as a recipe's checkpoint does (and a recipe's on one rank).
TEST_CASE("a single-rank model's checkpoints: bit-identical resume, and resharded to and from debug_2d") {
  const auto toks = tc::tokens();
  const auto straight = run_one(toks, 0, 20, "", 0);
  REQUIRE(straight.size() == 20);
  CHECK(tc::deviation(straight_2d(), straight) <= 1e-6);  // (what the reshards below are held to)
  for (auto mode : {train::async_mode::disabled, train::async_mode::async}) {
    CAPTURE(static_cast<int>(mode));
    scratch s(mode == train::async_mode::async ? "one_async" : "one_sync");
    const auto first = run_one(toks, 0, 10, s.dir.string(), 10, mode);
    const auto meta = io::checkpoint::read_metadata(io::checkpoint::step_folder(s.dir, 10));
    CHECK(meta.tensors.size() == 3 * static_cast<std::size_t>(llama_model(tc::smallmodel::config).n_tensors()));
    for (const auto& t : meta.tensors) {  // each tensor whole, in one box of shard-0
      REQUIRE(t.boxes.size() == 1);
      CHECK(t.boxes[0].where == whole_box(t.shape));
      CHECK(t.boxes[0].file == "shard-0.safetensors");
    }
    const auto second = run_one(toks, 10, 20, s.dir.string(), 0);
    const auto staged = run_one<testing::staged_kernels>(toks, 10, 20, s.dir.string(), 0);  // a device model loads it
    REQUIRE(second.size() == 10);
    REQUIRE(staged.size() == 10);
    for (std::size_t i = 0; i < 10; ++i) {
      CHECK(first[i] == straight[i]);
      CHECK(second[i] == straight[10 + i]);  // bit-identical
      CHECK(staged[i] == straight[10 + i]);
    }
  }
  {  // a device model's save (staged through the host) resumes on the host
    scratch s("one_staged");
    run_one<testing::staged_kernels>(toks, 0, 4, s.dir.string(), 4, train::async_mode::async);
    const auto on_host = run_one(toks, 4, 8, s.dir.string(), 0);
    REQUIRE(on_host.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) CHECK(on_host[i] == straight[4 + i]);
  }
  CHECK(memory_tracker<staged::space>::current_bytes() == 0);
  const auto ref = tail(straight, 10);
  scratch one("one_to_2d"), two("2d_to_one");
  run_one(toks, 0, 10, one.dir.string(), 10);
  const double to_2d = tc::deviation(ref, run<small<recipes::debug_2d>>(4, toks, 10, 20, one.dir.string(), 0));
  run<small<recipes::debug_2d>>(4, toks, 0, 10, two.dir.string(), 10);
  const double to_one = tc::deviation(ref, run_one(toks, 10, 20, two.dir.string(), 0));
  std::printf("one rank's checkpoint resumed in debug_2d on 4 ranks: %.2e relative; debug_2d's on one rank: %.2e\n",
              to_2d, to_one);
  CHECK(to_2d <= 1e-6);
  CHECK(to_one <= 1e-6);
}

// A load into another mesh reads, of each saved box, only the chunks that hold this rank's
// block (chunk checksums, io/checkpoint_format.hpp): one rank's checkpoint (every tensor one
// box) loaded into FSDP on 4 ranks (each a quarter of the rows) reads about a quarter on each.
TEST_CASE("resharding one rank's checkpoint to FSDP on 4 ranks reads about a quarter of it on each") {
  const auto toks = tc::tokens();
  using R = small<recipes::debug_fsdp>;
  using model_t = basic_llama_model<cpu_kernels>;
  scratch s("chunked");
  {
    model_t m(tc::smallmodel::config);
    m.init_weights(9);
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<model_t> tr(m, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
    train::checkpointer<model_t> ck(m, tr, loader, {.folder = s.dir.string(), .chunk_bytes = 4096});
    tr.train_step();
    ck.save(1);
  }
  const auto meta = io::checkpoint::read_metadata(io::checkpoint::step_folder(s.dir, 1));
  const double total = static_cast<double>(meta.bytes());
  std::vector<double> share(4);
  comm::run_threads(4, [&](comm::threads_communicator& c) {
    device_mesh<R::mesh> dm(R::mesh(4), c);
    train::parallel_llama<R> pm(dm);
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
    train::checkpointer<train::parallel_llama<R>> ck(pm, tr, loader, {.folder = s.dir.string()});
    REQUIRE(ck.resume() == std::optional<std::int64_t>(1));
    share[static_cast<std::size_t>(c.rank())] = static_cast<double>(ck.read_bytes()) / total;
  });
  std::printf("one rank's checkpoint (%.2f MiB, chunks of 4 KiB) loaded into FSDP on 4 ranks: each read", total / (1 << 20));
  for (const double f : share) std::printf(" %.1f%%", 100 * f);
  std::printf(" of it\n");
  for (const double f : share) {
    CHECK(f >= 0.25);  // its quarter at least
    CHECK(f <= 0.30);  // and at most a chunk more of each of the 3 x 57 boxes' ends
  }
}

// --checkpoint.load_step and --checkpoint.exclude_from_loading (TorchTitan's): a resume from
// an older step, and resumes that leave parts of the state as a new run starts them.
TEST_CASE("load_step and exclude_from_loading: what a resume loads") {
  const auto toks = tc::tokens();
  using model_t = basic_llama_model<cpu_kernels>;
  const auto straight = run_one(toks, 0, 20, "", 0);
  scratch s("exclude");
  {  // checkpoints of steps 5 and 10
    model_t m(tc::smallmodel::config);
    m.init_weights(9);
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<model_t> tr(m, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
    train::checkpointer<model_t> ck(m, tr, loader, {.folder = s.dir.string(), .interval = 5});
    for (int i = 0; i < 10; ++i)
      if (ck.due(tr.train_step().step)) ck.save(tr.step());
  }
  // one rank of `batch` rows resuming with options `o`; `check` looks at it after the resume
  auto resume = [&](train::checkpoint_options o, std::int64_t batch, auto&& check) {
    model_t m(tc::smallmodel::config);
    m.init_weights(1234);
    train::batch_loader loader(toks, batch, tc::seq_len, 3);
    train::basic_trainer<model_t> tr(m, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
    o.folder = s.dir.string();
    train::checkpointer<model_t> ck(m, tr, loader, o);
    const auto step = ck.resume();
    check(m, tr, loader, step);
  };
  const std::vector<float> fresh = [] {  // the weights a resume starts from
    model_t m(tc::smallmodel::config);
    m.init_weights(1234);
    return std::vector<float>(m.params().data(), m.params().data() + m.params().size());
  }();
  const std::size_t n = fresh.size();
  auto initial = [&](model_t& m) { return std::equal(fresh.begin(), fresh.end(), m.params().data()); };
  SUBCASE("load_step: an older checkpoint resumes as the latest does, when no save of the run meets a newer one") {
    // interval 5 would save step 10 again: refused before any step, naming the folder to remove
    train::checkpoint_options o{.folder = "", .interval = 5, .load_step = 5};
    CHECK_THROWS_WITH(resume(o, tc::batch, [](auto&...) {}),
                      doctest::Contains("would save step 10, whose checkpoint in"));
    o.load_step = 7;
    const std::string missing = "no complete checkpoint of that step in '" + s.dir.string() + "' (complete: steps 5, 10)";
    CHECK_THROWS_WITH(resume(o, tc::batch, [](auto&...) {}), doctest::Contains(missing.c_str()));
    o = {.folder = "", .load_step = 5};  // saves only step 20
    resume(o, tc::batch, [&](auto&, auto& tr, auto&, auto step) {
      CHECK(step == std::optional<std::int64_t>(5));
      std::vector<double> l;
      for (int i = 5; i < 20; ++i) l.push_back(tr.train_step().loss);
      CHECK(l == tail(straight, 5));  // bit-identical
    });
  }
  SUBCASE("model and optimizer") {
    resume({.folder = "", .exclude = {.model = true}}, tc::batch, [&](auto& m, auto& tr, auto&, auto) {
      CHECK(initial(m));  // as initialised
      CHECK(tr.step() == 10);
      CHECK(std::any_of(tr.exp_avg().data(), tr.exp_avg().data() + n, [](float v) { return v != 0; }));
    });
    resume({.folder = "", .exclude = {.optimizer = true}}, tc::batch, [&](auto& m, auto& tr, auto&, auto) {
      CHECK(!initial(m));  // loaded
      CHECK(tr.optimizer_origin() == 10);  // AdamW's next step is its first (bias corrections of step 1)
      CHECK(tr.schedule_origin() == 0);
      CHECK(std::all_of(tr.exp_avg().data(), tr.exp_avg().data() + n, [](float v) { return v == 0; }));
      CHECK(std::all_of(tr.exp_avg_sq().data(), tr.exp_avg_sq().data() + n, [](float v) { return v == 0; }));
    });
  }
  SUBCASE("lr_scheduler: the schedule starts over at the resumed step, and a checkpoint keeps where") {
    scratch t("exclude_lr");
    resume({.folder = "", .exclude = {.lr_scheduler = true}}, tc::batch, [&](auto& m, auto& tr, auto& loader, auto) {
      CHECK(tr.step() == 10);
      CHECK(tr.schedule_origin() == 10);
      const auto first = tr.train_step();
      CHECK(first.lr == doctest::Approx(tc::options<tc::smallmodel>().lr / 3));  // warmup 2: step 1 of 3
      train::checkpointer<model_t> ck(m, tr, loader, {.folder = t.dir.string()});
      ck.save(tr.step());
    });
    model_t m(tc::smallmodel::config);
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<model_t> tr(m, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
    train::checkpointer<model_t> ck(m, tr, loader, {.folder = t.dir.string()});
    REQUIRE(ck.resume() == std::optional<std::int64_t>(11));
    CHECK(tr.schedule_origin() == 10);
    CHECK(tr.train_step().lr == doctest::Approx(tc::options<tc::smallmodel>().lr * 2 / 3));  // step 2 of 3
  }
  SUBCASE("dataloader: any global batch, the data from its start; train_state: step 0") {
    CHECK_THROWS_WITH(resume({}, 2 * tc::batch, [](auto&...) {}), doctest::Contains("exclude_from_loading dataloader"));
    resume({.folder = "", .exclude = {.dataloader = true}}, 2 * tc::batch, [&](auto& m, auto& tr, auto& loader, auto) {
      CHECK(tr.step() == 10);
      CHECK(loader.epoch() == 0);
      CHECK(loader.cursor() == 0);
      CHECK(!initial(m));
    });
    // the step not loaded: the schedule and AdamW keep their counts (10 steps each)
    resume({.folder = "", .exclude = {.train_state = true}}, tc::batch, [&](auto&, auto& tr, auto&, auto) {
      CHECK(tr.step() == 0);
      CHECK(tr.schedule_origin() == -10);
      CHECK(tr.optimizer_origin() == -10);
      // the schedule's step 10 of a decay that ends at this run's last step (20), its step 30
      const train::lr_schedule s30{tc::options<tc::smallmodel>().lr, 2, 30, train::lr_decay::linear, 0.0};
      CHECK(tr.train_step().lr == doctest::Approx(s30.at(10)));
    });
    // and it would save step 5 and 10 again
    CHECK_THROWS_WITH(resume({.folder = "", .interval = 5, .exclude = {.train_state = true}}, tc::batch, [](auto&...) {}),
                      doctest::Contains("goes on from step 0 and would save step 5"));
  }
}
