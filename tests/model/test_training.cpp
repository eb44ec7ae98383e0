// The training loop: the debug model learns the fortunes; accumulation equals a larger
// batch; a diverging run stops naming the step.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/model/llama.hpp>
#include <tessera/train/tokenizer.hpp>
#include <tessera/train/trainer.hpp>

namespace {
using namespace tessera;
namespace fs = std::filesystem;

std::vector<std::int32_t> fortune_tokens() {
  const fs::path d = fs::path(TESSERA_TEST_SCRATCH) / "data";
  fs::create_directories(d);
  const auto docs = train::read_fortunes();
  train::tokenizer tk(train::train_bpe_once(docs, 2048, d / "fortunes_bpe2048.model"));
  return tk.encode_documents(docs);
}

struct small {
  static constexpr llama_config config{.name = "small", .dim = 64, .n_layers = 2, .n_heads = 4,
                                       .n_kv_heads = 2, .vocab_size = 128, .multiple_of = 32};
};
}  // namespace

TEST_CASE("the debug model trains on the fortunes: the loss falls") {
  const auto tokens = fortune_tokens();
  llama<debugmodel> m;
  m.init_weights(0);
  train::batch_loader dl(tokens, 4, 64, 0);
  train::optimizer_options opt;
  opt.lr = 2e-3;
  opt.warmup = 2;
  train::trainer t(m, dl, 12, 1, opt);
  std::vector<double> losses;
  for (int s = 0; s < 12; ++s) {
    const auto met = t.train_step();
    CHECK(met.step == s + 1);
    CHECK(std::isfinite(met.grad_norm));
    CHECK(met.peak_memory_bytes > m.num_params() * 4 * 4);  // params, grads, m, v
    losses.push_back(met.loss);
  }
  INFO("first loss " << losses[0] << ", last " << losses.back());
  CHECK(losses[0] == doctest::Approx(std::log(2048.0)).epsilon(0.15));
  CHECK((losses[10] + losses[11]) / 2 < losses[0] - 1.0);
  CHECK_THROWS_WITH_AS(t.train_step(), doctest::Contains("steps are done"), tessera::error);
}

TEST_CASE("gradient accumulation over 2 micro-batches equals one batch twice as large") {
  std::vector<std::int32_t> tok(2 * 4 * 16 + 1);
  for (std::size_t i = 0; i < tok.size(); ++i) tok[i] = std::int32_t((i * 37 + 11) % 128);
  llama<small> a, b;
  a.init_weights(4);
  b.init_weights(4);
  train::batch_loader da(tok, 2, 16, 0, false), db(tok, 4, 16, 0, false);
  train::optimizer_options opt;
  opt.warmup = 0;
  train::trainer ta(a, da, 1, 2, opt), tb(b, db, 1, 1, opt);
  const auto ma = ta.train_step(), mb = tb.train_step();
  CHECK(ma.loss == doctest::Approx(mb.loss).epsilon(1e-5));
  CHECK(ma.grad_norm == doctest::Approx(mb.grad_norm).epsilon(1e-4));
  double maxdiff = 0;
  for (std::int64_t i = 0; i < a.n_tensors(); ++i)
    for (std::int64_t j = 0; j < a.entry(i).shape.numel(); ++j)
      maxdiff = std::max(maxdiff, double(std::abs(a.param(i)[j] - b.param(i)[j])));
  CHECK(maxdiff < 1e-5);  // AdamW normalizes: rounding in near-zero gradients shows up to ~lr/100
}

TEST_CASE("clipping bounds the update; a NaN loss stops with the step number") {
  std::vector<std::int32_t> tok(4 * 16 * 4 + 1);
  for (std::size_t i = 0; i < tok.size(); ++i) tok[i] = std::int32_t((i * 13) % 128);
  llama<small> m;
  m.init_weights(1);
  train::batch_loader dl(tok, 2, 16, 0);
  train::optimizer_options opt;
  opt.max_norm = 1e-3;
  train::trainer t(m, dl, 3, 1, opt);
  const auto s1 = t.train_step();
  CHECK(s1.grad_norm > 1e-3);  // reported before clipping, as torch
  double clipped = 0;
  for (std::int64_t i = 0; i < m.n_tensors(); ++i)
    for (std::int64_t j = 0; j < m.entry(i).shape.numel(); ++j)
      clipped += double(m.grad(i)[j]) * m.grad(i)[j];
  CHECK(std::sqrt(clipped) == doctest::Approx(1e-3).epsilon(1e-3));
  m.param(1)[0] = std::numeric_limits<float>::quiet_NaN();  // poison attention_norm
  CHECK_THROWS_WITH_AS(t.train_step(), doctest::Contains("loss is NaN at step 2"), tessera::error);
}

TEST_CASE("MFU: the peak is measured once per process and is the job's, the same on every rank") {
  const double host = train::host_peak_flops();
  CHECK(host > 0);
  CHECK(train::host_peak_flops() == host);  // measured once, then remembered
  CHECK(train::usable_cores() >= 1);
  // Thread ranks share this host and this process's cores: the job's peak is the host's,
  // not the host's once per rank (nor a quarter of it, measured by four ranks at once).
  std::vector<double> got(3);
  comm::run_threads(3, [&](comm::threads_communicator& c) { got[static_cast<std::size_t>(c.rank())] = train::job_peak_flops(c); });
  for (double g : got) CHECK(g == host);
  // basic_trainer measures it by default, so MFU is reported without a sixth argument;
  // 0 turns MFU off.
  std::vector<std::int32_t> toks(4 * 16 * 4 + 1);
  for (std::size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<std::int32_t>(i % 128);
  llama<small> m;
  m.init_weights(0);
  train::batch_loader dl(toks, 4, 16, 0);
  train::trainer t(m, dl, 1, 1, train::optimizer_options{});
  CHECK(t.peak_flops() == host);
  const auto s = t.train_step();
  CHECK(s.mfu > 0);
  CHECK(s.mfu == doctest::Approx(s.tokens_per_s * flops_per_token(small::config, 16) / host));
  train::batch_loader dl2(toks, 4, 16, 0);
  train::trainer off(m, dl2, 1, 1, train::optimizer_options{}, 0);
  CHECK(off.train_step().mfu == 0);
}
