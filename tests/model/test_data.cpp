// Data: token files, llm.c batching, the SentencePiece tokenizer on fortunes; CLI and LR.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <tessera/train/cli.hpp>
#include <tessera/train/data.hpp>
#include <tessera/train/lr_schedule.hpp>
#include <tessera/train/tokenizer.hpp>

// A namespace of its own: CI compiles this program as one translation unit (TESSERA_UNITY_TESTS).
namespace model_data_tests {
namespace {
using namespace tessera;
namespace fs = std::filesystem;
fs::path scratch(const std::string& name) {
  const fs::path d = fs::path(TESSERA_TEST_SCRATCH) / "data";
  fs::create_directories(d);
  return d / name;
}
}  // namespace

TEST_CASE("batching as llm.c: windows of B*T+1, targets shifted by one") {
  std::vector<std::int32_t> tok(1000);
  std::iota(tok.begin(), tok.end(), 0);
  train::batch_loader dl(tok, 2, 8, 0, /*shuffle=*/false);
  CHECK(dl.steps_per_epoch() == 999 / 16);
  std::vector<std::int32_t> x(16), y(16);
  dl.next(x, y);
  for (int i = 0; i < 16; ++i) {
    CHECK(x[std::size_t(i)] == i);  // row 0: [0, 8), row 1: [8, 16)
    CHECK(y[std::size_t(i)] == i + 1);
  }
  dl.next(x, y);
  CHECK(x[0] == 16);
  CHECK(y[15] == 32);
}

TEST_CASE("batching: deterministic from the seed, an epoch covers every window once") {
  std::vector<std::int32_t> tok(1601);
  std::iota(tok.begin(), tok.end(), 0);
  auto order = [&](std::uint64_t seed) {
    train::batch_loader dl(tok, 4, 10, seed);
    std::vector<std::int32_t> x(40), y(40), firsts;
    for (int s = 0; s < 2 * dl.steps_per_epoch(); ++s) {
      dl.next(x, y);
      firsts.push_back(x[0]);
      CHECK(y[39] == x[39] + 1);
    }
    return firsts;
  };
  const auto a = order(1), b = order(1), c = order(2);
  CHECK(a == b);
  CHECK(a != c);
  std::set<std::int32_t> epoch1(a.begin(), a.begin() + 40);
  CHECK(epoch1.size() == 40);  // 1600 / 40 windows, each once
  CHECK(std::vector<std::int32_t>(a.begin(), a.begin() + 40) != std::vector<std::int32_t>(a.begin() + 40, a.end()));
}

TEST_CASE("batching: data-parallel ranks take disjoint windows of one order") {
  std::vector<std::int32_t> tok(4001);
  std::iota(tok.begin(), tok.end(), 0);
  train::batch_loader single(tok, 2, 10, 9, true, 0, 1);
  train::batch_loader r0(tok, 2, 10, 9, true, 0, 2), r1(tok, 2, 10, 9, true, 1, 2);
  std::vector<std::int32_t> x(20), y(20), a(20), b(20);
  for (int s = 0; s < 50; ++s) {
    single.next(x, y);
    (s % 2 == 0 ? r0 : r1).next(a, b);
    CHECK(x == a);  // rank r takes windows r, r + W, ... of the single-rank order
  }
  CHECK_THROWS_WITH_AS(train::batch_loader(tok, 2, 10, 0, true, 2, 2), doctest::Contains("rank 2"),
                       tessera::error);
}

TEST_CASE("batching: a batch larger than the data is an error saying what to lower") {
  std::vector<std::int32_t> tok(100);
  CHECK_THROWS_WITH_AS(train::batch_loader(tok, 4, 32, 0), doctest::Contains("batch larger than the data"),
                       tessera::error);
  CHECK_NOTHROW(train::batch_loader(tok, 3, 33, 0));  // 3*33 + 1 = 100
}

TEST_CASE("token files: raw little-endian int32, checked") {
  std::vector<std::int32_t> tok{5, 1, 2047, 0};
  train::write_token_file(scratch("t.bin"), tok);
  CHECK(fs::file_size(scratch("t.bin")) == 16);
  CHECK(train::read_token_file(scratch("t.bin"), 2048) == tok);
  CHECK_THROWS_WITH_AS(train::read_token_file(scratch("t.bin"), 2000), doctest::Contains("token 2 is 2047"),
                       tessera::error);
  std::ofstream(scratch("odd.bin"), std::ios::binary) << "abcde";
  CHECK_THROWS_WITH_AS(train::read_token_file(scratch("odd.bin")), doctest::Contains("not a multiple of 4"),
                       tessera::error);
  std::ofstream(scratch("empty.bin"), std::ios::binary);
  CHECK_THROWS_WITH_AS(train::read_token_file(scratch("empty.bin")), doctest::Contains("is empty"),
                       tessera::error);
  CHECK_THROWS_WITH_AS(train::read_token_file(scratch("none.bin")), doctest::Contains("no such file"),
                       tessera::error);
}

TEST_CASE("token files mapped: the file's ids in place, checked at the start, shared by the loaders") {
  std::vector<std::int32_t> tok(1000);
  for (std::size_t i = 0; i < tok.size(); ++i) tok[i] = static_cast<std::int32_t>((i * 7919) % 2048);
  train::write_token_file(scratch("m.bin"), tok);
  train::mapped_token_file f(scratch("m.bin"), 2048);
  CHECK(std::vector<std::int32_t>(f.tokens().begin(), f.tokens().end()) == tok);
  const std::int32_t* where = f.tokens().data();
  train::mapped_token_file g = std::move(f);  // the mapping moves, the ids stay where they are
  CHECK(g.tokens().data() == where);
  CHECK(f.tokens().empty());  // NOLINT(bugprone-use-after-move): a moved-from mapping is empty
  // two loaders (two ranks) over one mapping read the windows one loader over a copy reads
  const train::token_data mapped(std::move(g)), copied(tok);
  CHECK(mapped.span().data() == where);
  train::batch_loader a(mapped, 2, 16, 3, true, 0, 2), b(mapped, 2, 16, 3, true, 1, 2), c(copied, 2, 16, 3, true, 1, 2);
  std::vector<std::int32_t> x(32), y(32), xb(32), yb(32), xc(32), yc(32);
  a.next(x, y), b.next(xb, yb), c.next(xc, yc);
  CHECK(xb == xc);
  CHECK(yb == yc);
  CHECK(x != xb);
  // every id is checked before training starts, the last one included
  tok.back() = 2048;
  train::write_token_file(scratch("m_bad.bin"), tok);
  CHECK_THROWS_WITH_AS(train::mapped_token_file(scratch("m_bad.bin"), 2048), doctest::Contains("token 999 is 2048"),
                       tessera::error);
  CHECK_THROWS_WITH_AS(train::mapped_token_file(scratch("none.bin")), doctest::Contains("no such file"),
                       tessera::error);
}

TEST_CASE("tokenizer: BPE trained once on the fortunes, cached, round trips text") {
  const auto docs = train::read_fortunes();
  CHECK(docs.size() > 10000);
  const fs::path model = scratch("fortunes_bpe2048.model");
  train::train_bpe_once(docs, 2048, model);
  const auto mtime = fs::last_write_time(model);
  train::train_bpe_once(docs, 2048, model);  // cached: not retrained
  CHECK(fs::last_write_time(model) == mtime);
  train::tokenizer tk(model);
  CHECK(tk.vocab_size() == 2048);
  const auto ids = tk.encode("A day for firm decisions!!!!!  Or is it?");
  CHECK(ids.size() > 3);
  CHECK(ids.size() < 30);
  CHECK(tk.decode(ids) == "A day for firm decisions!!!!! Or is it?");
  const auto stream = tk.encode_documents({docs[0], docs[1]});
  CHECK(stream.front() == tk.bos_id());
  CHECK(stream.back() == tk.eos_id());
  CHECK_THROWS_WITH_AS(train::tokenizer(scratch("none.model")), doctest::Contains("cannot load"),
                       tessera::error);
  std::ofstream(scratch("blank.txt")) << "\n  \n\n";
  CHECK_THROWS_WITH_AS(train::read_text_documents(scratch("blank.txt")), doctest::Contains("is empty"),
                       tessera::error);
}

TEST_CASE("CLI options: --key value, --key=value, errors name the flag") {
  std::int64_t steps = 10;
  double lr = 8e-4;
  std::string sched = "linear", data;
  bool quiet = false;
  train::option_set o("prog");
  o.add("steps", &steps, "steps").add("lr", &lr, "lr").add("data", &data, "file");
  o.add_choice("lr-schedule", &sched, {"constant", "linear", "cosine"}, "decay");
  o.add_flag("quiet", &quiet, "less output");
  const char* argv[] = {"prog", "--steps", "20", "--lr=1e-3", "--lr-schedule", "cosine", "--quiet"};
  CHECK(o.parse(7, argv));
  CHECK(steps == 20);
  CHECK(lr == 1e-3);
  CHECK(sched == "cosine");
  CHECK(quiet);
  o.set("steps", "7");  // the entry point a config file uses
  CHECK(steps == 7);
  const char* bad1[] = {"prog", "--stepz", "3"};
  CHECK_THROWS_WITH_AS(o.parse(3, bad1), doctest::Contains("unknown option --stepz"), tessera::error);
  const char* bad2[] = {"prog", "--steps", "x3"};
  CHECK_THROWS_WITH_AS(o.parse(3, bad2), doctest::Contains("--steps: 'x3' is not an integer"), tessera::error);
  const char* bad3[] = {"prog", "--lr-schedule", "step"};
  CHECK_THROWS_WITH_AS(o.parse(3, bad3), doctest::Contains("one of constant|linear|cosine"), tessera::error);
  const char* bad4[] = {"prog", "--lr"};
  CHECK_THROWS_WITH_AS(o.parse(2, bad4), doctest::Contains("needs a value"), tessera::error);
  const char* help[] = {"prog", "--help"};
  CHECK(!o.parse(2, help));
  CHECK(o.help().find("--lr-schedule constant|linear|cosine") != std::string::npos);
}

TEST_CASE("LR schedule: TorchTitan's warmup then constant, linear or cosine decay") {
  train::lr_schedule s{1.0, 4, 14, train::lr_decay::linear, 0.0};
  CHECK(s.at(0) == doctest::Approx(0.2));  // (0 + 1) / (4 + 1)
  CHECK(s.at(3) == doctest::Approx(0.8));
  CHECK(s.at(4) == doctest::Approx(1.0));
  CHECK(s.at(9) == doctest::Approx(0.5));
  s.decay = train::lr_decay::cosine;
  CHECK(s.at(9) == doctest::Approx(0.5));
  CHECK(s.at(6) == doctest::Approx(0.5 * (1 + std::cos(3.14159265358979 * 0.2))));
  s.decay = train::lr_decay::constant;
  CHECK(s.at(13) == 1.0);
  CHECK_THROWS_AS(train::parse_lr_decay("step"), tessera::error);
}
}  // namespace model_data_tests
