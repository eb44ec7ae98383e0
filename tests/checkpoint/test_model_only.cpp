// Checkpoints beyond a resume (TorchTitan's [checkpoint] options): the model-only last save
// (last_save_model_only, in f32 or bf16: export_dtype) and a new run from a checkpoint's
// weights (initial_load_path).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/io/safetensors.hpp>
#include <tessera/train/checkpoint.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/trainer.hpp>

#include "../parallel/training_check.hpp"
#include "scratch.hpp"

using namespace tessera;
namespace tc = training_check;
namespace fs = std::filesystem;
using checkpoint_test::scratch;
using tc::small;

// TorchTitan's last_save_model_only: the last save holds the weights alone, a third of a full
// checkpoint; a resume refuses it and names both ways on, and a new run loads its weights.
TEST_CASE("last_save_model_only: the weights alone, refused as a resume, loaded by a new run (debug_2d on 4)") {
  const auto toks = tc::tokens();
  using R = small<recipes::debug_2d>;
  using model_t = train::parallel_llama<R>;
  scratch s("model_only");
  std::vector<float> trained;  // rank 0's stored weights after 6 steps
  auto with = [&](train::checkpoint_options o, std::int64_t weights_seed, auto&& body) {
    comm::run_threads(4, [&](comm::threads_communicator& c) {
      device_mesh<R::mesh> dm(R::mesh(4), c);
      model_t pm(dm);
      pm.init_weights(static_cast<std::uint64_t>(weights_seed));
      train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
      train::basic_trainer<model_t> tr(pm, loader, tc::steps, 1, tc::options<R::model>(), 0);
      o.folder = s.dir.string();
      train::checkpointer<model_t> ck(pm, tr, loader, o);
      body(c.rank(), pm, tr, ck);
    });
  };
  with({.folder = "", .interval = 3, .last_save_model_only = true}, 9, [&](int rank, auto& pm, auto& tr, auto& ck) {
    for (int i = 0; i < 6; ++i) {
      const std::int64_t step = tr.train_step().step;
      if (ck.due(step) || step == 6) ck.save(step, step == 6 && ck.options().last_save_model_only);
    }
    ck.finish();
    if (rank == 0) trained.assign(pm.params().data(), pm.params().data() + pm.params().size());
  });
  const auto full = io::checkpoint::read_metadata(io::checkpoint::step_folder(s.dir, 3));
  const auto model = io::checkpoint::read_metadata(io::checkpoint::step_folder(s.dir, 6));
  CHECK(full.state.at("contents") == "full");
  CHECK(model.state.at("contents") == "model");
  CHECK(model.tensors.size() * 3 == full.tensors.size());
  for (const auto& t : model.tensors) CHECK(t.name.rfind("optimizer.", 0) == std::string::npos);
  // resuming from it is refused, naming the exclusions and load_step
  CHECK_THROWS_WITH(with({.folder = ""}, 1234, [](int, auto&, auto&, auto& ck) { ck.resume(); }),
                    doctest::Contains("holds the weights alone (saved with --checkpoint.last_save_model_only): a new "
                                      "run can start from them with --checkpoint.exclude_from_loading "
                                      "optimizer,lr_scheduler,dataloader,train_state"));
  // a new run from its weights: step 0, the trained weights bit for bit, AdamW fresh
  train::checkpoint_options fresh{.folder = ""};
  fresh.exclude = train::parse_exclusions({"optimizer", "lr_scheduler", "dataloader", "train_state"});
  with(fresh, 1234, [&](int rank, auto& pm, auto& tr, auto& ck) {
    CHECK(ck.resume() == std::optional<std::int64_t>(6));
    CHECK(tr.step() == 0);
    if (rank == 0) CHECK(std::equal(trained.begin(), trained.end(), pm.params().data()));
    CHECK(std::all_of(tr.exp_avg().data(), tr.exp_avg().data() + tr.exp_avg().size(), [](float v) { return v == 0; }));
  });
  // the full checkpoint before it still resumes
  with({.folder = "", .load_step = 3}, 1234, [](int, auto&, auto& tr, auto& ck) {
    CHECK(ck.resume() == std::optional<std::int64_t>(3));
    CHECK(tr.step() == 3);
  });
}

// TorchTitan's initial_load_path naming a checkpoint: a run with nothing to resume starts from
// its weights (any mesh, full or model-only), at step 0; a checkpoint to resume comes first.
TEST_CASE("initial_load_path: a new run on one rank starts from debug_2d's model-only checkpoint") {
  const auto toks = tc::tokens();
  using R = small<recipes::debug_2d>;
  using model_t = basic_llama_model<cpu_kernels>;
  scratch from("initial_from"), into("initial_into");
  std::vector<std::vector<float>> trained;  // every tensor whole, after 4 steps of debug_2d on 4
  comm::run_threads(4, [&](comm::threads_communicator& c) {
    device_mesh<R::mesh> dm(R::mesh(4), c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(9);
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, tc::steps, 1, tc::options<R::model>(), 0);
    train::checkpointer<train::parallel_llama<R>> ck(pm, tr, loader, {.folder = from.dir.string()});
    for (int i = 0; i < 4; ++i) tr.train_step();
    ck.save(4, true);
    std::vector<std::vector<float>> whole;
    for (std::int64_t i = 0; i < pm.model().n_tensors(); ++i) whole.push_back(pm.full_param(i));
    if (c.rank() == 0) trained = whole;
  });
  auto one_rank = [&](const std::string& folder, auto&& check) {
    model_t m(tc::smallmodel::config);
    m.init_weights(1234);
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<model_t> tr(m, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
    train::checkpoint_options o{.folder = folder};
    o.initial_load_path = from.dir.string();  // the folder: its newest checkpoint
    train::checkpointer<model_t> ck(m, tr, loader, o);
    const auto step = ck.resume();
    check(m, tr, ck, step);
    return tr.train_step().loss;
  };
  one_rank(into.dir.string(), [&](model_t& m, auto& tr, auto& ck, auto step) {
    CHECK(!step.has_value());
    REQUIRE(ck.initial().has_value());
    CHECK(*ck.initial() == io::checkpoint::step_folder(from.dir, 4));
    CHECK(tr.step() == 0);
    for (std::int64_t i = 0; i < m.n_tensors(); ++i)
      CHECK(std::equal(trained[static_cast<std::size_t>(i)].begin(), trained[static_cast<std::size_t>(i)].end(),
                       m.param(i)));
  });
  // without a checkpoint folder too; and a folder with a checkpoint resumes instead
  one_rank("", [&](model_t&, auto&, auto& ck, auto) { CHECK(ck.initial().has_value()); });
  {
    model_t m(tc::smallmodel::config);
    m.init_weights(5);
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<model_t> tr(m, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
    train::checkpointer<model_t> ck(m, tr, loader, {.folder = into.dir.string()});
    tr.train_step();
    ck.save(1);
  }
  one_rank(into.dir.string(), [&](model_t&, auto& tr, auto& ck, auto step) {
    CHECK(step == std::optional<std::int64_t>(1));
    CHECK(!ck.initial().has_value());
    CHECK(tr.step() == 1);
  });
  // a path that holds no checkpoint: refused by name
  model_t m(tc::smallmodel::config);
  train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
  train::basic_trainer<model_t> tr(m, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
  train::checkpoint_options o{.folder = ""};
  o.initial_load_path = (into.dir / "nothing").string();
  train::checkpointer<model_t> ck(m, tr, loader, o);
  const std::string refused = "initial_load_path '" + o.initial_load_path + "' holds no complete checkpoint";
  CHECK_THROWS_WITH(ck.resume(), doctest::Contains(refused.c_str()));
}

// export_dtype bf16 (TorchTitan's): the model-only last save holds bf16 values, half the bytes
// of f32 weights; a new run loads them widened -- the trained weights rounded to bf16.
TEST_CASE("last_save_model_only with export_dtype bf16: half the bytes, loaded as the weights rounded") {
  const auto toks = tc::tokens();
  using model_t = basic_llama_model<cpu_kernels>;
  scratch s("model_only_bf16");
  std::vector<float> trained;
  std::uint64_t f32_bytes = 0;
  for (const dtype type : {dtype::f32, dtype::bf16}) {
    model_t m(tc::smallmodel::config);
    m.init_weights(9);
    train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
    train::basic_trainer<model_t> tr(m, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
    train::checkpoint_options o{.folder = (s.dir / (type == dtype::f32 ? "f32" : "bf16")).string(),
                                .last_save_model_only = true};
    o.export_dtype = type;
    train::checkpointer<model_t> ck(m, tr, loader, o);
    for (int i = 0; i < 3; ++i) tr.train_step();
    ck.save(3, true);
    const auto meta = io::checkpoint::read_metadata(io::checkpoint::step_folder(o.folder, 3));
    for (const auto& t : meta.tensors) CHECK(t.dtype == (type == dtype::f32 ? "F32" : "BF16"));
    if (type == dtype::f32) {
      f32_bytes = meta.bytes();
      trained.assign(m.params().data(), m.params().data() + m.params().size());
    } else {
      CHECK(meta.bytes() * 2 == f32_bytes);
    }
  }
  model_t m(tc::smallmodel::config);
  m.init_weights(1234);
  train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
  train::basic_trainer<model_t> tr(m, loader, tc::steps, 1, tc::options<tc::smallmodel>(), 0);
  train::checkpoint_options o{.folder = ""};
  o.initial_load_path = (s.dir / "bf16").string();
  train::checkpointer<model_t> ck(m, tr, loader, o);
  CHECK(!ck.resume().has_value());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < trained.size(); ++i) {
    const float want = io::safetensors::detail::bf16_to_f32(io::safetensors::detail::f32_to_bf16(trained[i]));
    REQUIRE(m.params().data()[i] == want);
    differ += want != trained[i];
  }
  CHECK(differ > trained.size() / 2);  // the save did round
}
