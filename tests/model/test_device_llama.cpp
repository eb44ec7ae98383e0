// device_llama<K> is llama_model, bit for bit, where K computes as the CPU does: the model
// on a kernel backend (basic_llama_model<K>, model/device_llama.hpp) checked on the host --
// with cpu_kernels, and with staged_kernels (the CPU kernels on a memory space the model
// reaches only through the backend's transfers: every branch device memory takes, and the
// space's tracker against the estimate); on a GPU, tests/gpu/test_cuda_llama.cu runs the same
// steps with cuda_kernels.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <device_llama_steps.hpp>
#include <staged_kernels.hpp>
#include <tessera/model/device_llama.hpp>
#include <tessera/model/llama.hpp>
#include <tessera/train/data.hpp>
#include <tessera/train/trainer.hpp>

using namespace tessera;
using testing::staged_kernels;

namespace {
struct gqa_tied {  // GQA (4 query heads, 2 KV heads), tied embeddings
  static constexpr llama_config config{.name = "gqa_tied", .dim = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                                       .vocab_size = 96, .multiple_of = 32, .tied_embeddings = true};
};
}  // namespace

TEST_CASE("device_llama<cpu_kernels> trains as llama_model, bit for bit (losses, norms, parameters)") {
  struct run {
    llama_config c;
    std::int64_t B, T;
    int steps;
  };
  const cpu::adamw_config opt{.lr = 3e-3f};
  // Bit-identity is a property of each step's arithmetic: a kernel or a transfer that differs
  // shows in the first step's gradient norm and parameters, and five steps take the debug
  // model through AdamW's first bias-corrected updates (20 took 36 s of CI's ASan pass, the
  // longest of its tests, for nothing more to see).
  for (const run& r : {run{debugmodel::config, 2, 32, 5}, run{gqa_tied::config, 3, 24, 8}}) {
    CAPTURE(r.c.name);
    const auto host = testing::host_steps(r.c, r.B, r.T, r.steps, opt);
    const auto dev = testing::device_steps<cpu_kernels>(r.c, r.B, r.T, r.steps, opt);
    const auto staged = testing::device_steps<staged_kernels>(r.c, r.B, r.T, r.steps, opt);
    CHECK(host.losses == dev.losses);
    CHECK(host.norms == dev.norms);
    CHECK(host.params == dev.params);
    CHECK(host.losses == staged.losses);
    CHECK(host.norms == staged.norms);
    CHECK(host.params == staged.params);
    // it computes: these are not zeros or NaNs (each step's batch is new random tokens, so
    // five steps' losses need not fall)
    for (const float l : host.losses) CHECK((std::isfinite(l) && l > 0.0f));
    for (const float n : host.norms) CHECK((std::isfinite(n) && n > 0.0f));
  }
}

TEST_CASE("device_llama: a new batch shape re-sizes the buffers; forward without backward; bad input") {
  device_llama<staged_kernels> d(debugmodel::config);
  llama_model h(debugmodel::config);
  // the parameter and gradient arenas, in the backend's memory
  CHECK(memory_tracker<staged::space>::current_bytes() == 2 * 4 * d.arena_size());
  d.init_weights(3);
  h.init_weights(3);
  for (std::int64_t T : {16, 8, 16}) {
    const testing::step_batch b(T, 2, T, 2048);
    CHECK(d.forward(b.inputs, b.targets, 2, T, false) == h.forward(b.inputs, b.targets, 2, T, false));
  }
  // what was allocated: the backend's tracker holds the arenas and exactly the estimate
  const testing::step_batch b3(3, 3, 12, 2048);
  d.forward(b3.inputs, b3.targets, 3, 12);
  CHECK(d.activation_bytes() == device_llama<staged_kernels>::activation_bytes_for(debugmodel::config, 3, 12));
  CHECK(memory_tracker<staged::space>::current_bytes() == 2 * 4 * d.arena_size() + d.activation_bytes());
  CHECK(device_llama<staged_kernels>::activation_bytes_for(debugmodel::config, 3, 12) ==
        device_llama<cpu_kernels>::activation_bytes_for(debugmodel::config, 3, 12) + 8 * 3 * 12);  // the ids
  const testing::step_batch b(0, 1, 4, 2048);
  CHECK_THROWS_WITH_AS(d.forward(b.inputs, b.targets, 2, 4), doctest::Contains("must hold B*T = 8 ids"), error);
  std::vector<std::int32_t> bad = b.inputs;
  bad[2] = 5000;
  CHECK_THROWS_WITH_AS(d.forward(bad, b.targets, 1, 4), doctest::Contains("token id 5000 at position 2"), error);
  // a forward that throws leaves nothing for backward() (the last good forward's gradient is gone)
  CHECK_THROWS_WITH_AS(d.backward(), doctest::Contains("call forward(..., need_backward = true) first"), error);
  h.forward(b3.inputs, b3.targets, 3, 12);
  CHECK_THROWS_AS(h.forward(bad, b.targets, 1, 4), error);
  CHECK_THROWS_WITH_AS(h.backward(), doctest::Contains("call forward(..., need_backward = true) first"), error);
  std::vector<float> wrong(3);
  CHECK_THROWS_WITH_AS(d.load_params(wrong), doctest::Contains("3 floats for an arena of"), error);
}

TEST_CASE("train::basic_trainer trains a device_llama as train::trainer trains llama_model (accumulation, clipping)") {
  std::vector<std::int32_t> tok(4000);
  for (std::size_t i = 0; i < tok.size(); ++i) tok[i] = static_cast<std::int32_t>((i * 131 + 7) % 2048);
  llama_model a(debugmodel::config);
  device_llama<staged_kernels> b(debugmodel::config);
  a.init_weights(5);
  b.init_weights(5);
  train::batch_loader la(tok, 2, 32, 1), lb(tok, 2, 32, 1);
  train::optimizer_options opt;
  opt.lr = 2e-3, opt.max_norm = 0.5;  // clipped in every step
  train::trainer ta(a, la, 3, 2, opt, 0);
  train::basic_trainer<device_llama<staged_kernels>> tb(b, lb, 3, 2, opt, 0);
  for (int s = 0; s < 3; ++s) {
    const auto ma = ta.train_step(), mb = tb.train_step();
    CHECK(ma.loss == mb.loss);
    CHECK(ma.grad_norm == mb.grad_norm);
    CHECK(ma.grad_norm > opt.max_norm);
  }
  std::vector<float> pb(static_cast<std::size_t>(b.arena_size()));
  b.store_params(pb);
  CHECK(std::vector<float>(a.params().data(), a.params().data() + a.params().size()) == pb);
}

TEST_CASE("cpu_bf16_kernels: every linear's operands rounded to bf16, the rest f32; it trains near f32") {
  const std::int64_t N = 5, C = 33, OC = 7;
  std::vector<float> x(N * C), w(OC * C), rx(x.size()), rw(w.size()), a(N * OC), b(N * OC), f(N * OC);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 1.7f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * static_cast<float>(i)) * 0.3f;
  for (std::size_t i = 0; i < x.size(); ++i) rx[i] = static_cast<float>(bf16(x[i]));
  for (std::size_t i = 0; i < w.size(); ++i) rw[i] = static_cast<float>(bf16(w[i]));
  cpu_bf16_kernels::matmul_forward(a.data(), x.data(), w.data(), N, C, OC);
  cpu_kernels::matmul_forward(b.data(), rx.data(), rw.data(), N, C, OC);
  cpu_kernels::matmul_forward(f.data(), x.data(), w.data(), N, C, OC);
  CHECK(a == b);  // exactly the f32 GEMM of the rounded operands
  CHECK(a != f);
  // backward: dout rounded too; dinp and dw accumulate
  std::vector<float> dout(N * OC), dx(N * C, 1.0f), dw(OC * C, 1.0f), ex(N * C, 1.0f), ew(OC * C, 1.0f), rd(dout.size());
  for (std::size_t i = 0; i < dout.size(); ++i) dout[i] = std::sin(1.3f * static_cast<float>(i)), rd[i] = static_cast<float>(bf16(dout[i]));
  cpu_bf16_kernels::matmul_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), N, C, OC);
  cpu_kernels::matmul_backward(ex.data(), ew.data(), rd.data(), rx.data(), rw.data(), N, C, OC);
  CHECK(dx == ex);
  CHECK(dw == ew);

  const cpu::adamw_config opt{.lr = 3e-3f};
  const auto f32 = testing::device_steps<cpu_kernels>(debugmodel::config, 2, 32, 6, opt);
  const auto half = testing::device_steps<cpu_bf16_kernels>(debugmodel::config, 2, 32, 6, opt);
  CHECK(half.losses[0] != f32.losses[0]);  // the rounding happened
  for (std::size_t s = 0; s < f32.losses.size(); ++s) {  // and stays a rounding: 1% at every step
    CAPTURE(s);
    CHECK(std::abs(half.losses[s] - f32.losses[s]) < 1e-2 * f32.losses[s]);
  }
}

TEST_CASE("cpu_bf16_kernels: attention's q, k, v and dout rounded to bf16, causal and context parallel's blocks") {
  const std::int64_t B = 2, T = 24, NH = 4, NKV = 2, HD = 16, nq = B * T * NH * HD, nk = B * T * NKV * HD;
  auto wave = [](std::int64_t n, float f) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(f * static_cast<float>(i) + 0.3f) * 1.3f;
    return x;
  };
  auto round = [](std::vector<float> x) {
    for (float& e : x) e = static_cast<float>(bf16(e));
    return x;
  };
  const auto q = wave(nq, 0.37f), k = wave(nk, 0.71f), v = wave(nk, 1.13f), dy = wave(nq, 0.23f);
  const auto rq = round(q), rk = round(k), rv = round(v), rdy = round(dy);
  std::vector<float> o(nq), l(B * NH * T), eo(nq), el(l.size()), fo(nq), fl(l.size());
  cpu_bf16_kernels::attention_forward(o.data(), l.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD);
  cpu_kernels::attention_forward(eo.data(), el.data(), rq.data(), rk.data(), rv.data(), B, T, NH, NKV, HD);
  cpu_kernels::attention_forward(fo.data(), fl.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD);
  CHECK(o == eo);  // exactly the f32 attention of the rounded operands
  CHECK(l == el);
  CHECK(o != fo);
  std::vector<float> dq(nq), dk(nk), dv(nk), eq(nq), ek(nk), ev(nk);
  cpu_bf16_kernels::attention_backward(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(), v.data(),
                                       o.data(), l.data(), B, T, NH, NKV, HD);
  cpu_kernels::attention_backward(eq.data(), ek.data(), ev.data(), rdy.data(), rq.data(), rk.data(), rv.data(),
                                  o.data(), l.data(), B, T, NH, NKV, HD);
  CHECK(dq == eq);
  CHECK(dk == ek);
  CHECK(dv == ev);
  // one block pair of context parallel (the same tokens as both spans: causal within it)
  std::vector<std::int64_t> pos(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) pos[static_cast<std::size_t>(t)] = t;
  const cpu::token_span span{.pos = pos.data(), .doc = nullptr, .n = T};
  std::vector<float> bo(nq), bl(l.size()), co(nq), cl(l.size());
  cpu_bf16_kernels::attention_block_forward(bo.data(), bl.data(), q.data(), k.data(), v.data(), span, span, B, NH, NKV,
                                            HD);
  cpu::attention_block_forward(co.data(), cl.data(), rq.data(), rk.data(), rv.data(), span, span, B, NH, NKV, HD);
  CHECK(bo == co);
  CHECK(bl == cl);
  std::vector<float> D(l.size()), bq(nq), bk(nk), bv(nk);
  cpu::attention_delta(D.data(), dy.data(), o.data(), B, T, NH, HD);
  cpu_bf16_kernels::attention_block_backward(bq.data(), bk.data(), bv.data(), dy.data(), q.data(), k.data(), v.data(),
                                             l.data(), D.data(), span, span, B, NH, NKV, HD);
  std::vector<float> cq(nq), ck(nk), cv(nk);
  cpu::attention_block_backward(cq.data(), ck.data(), cv.data(), rdy.data(), rq.data(), rk.data(), rv.data(), l.data(),
                                D.data(), span, span, B, NH, NKV, HD);
  CHECK(bq == cq);
  CHECK(bk == ck);
  CHECK(bv == cv);
}

TEST_CASE("device_llama with Float8 linears is llama_model with them, bit for bit (each recipe); what it refuses") {
  std::uint16_t all = 0;
  for (param_role r : block_linears) all = static_cast<std::uint16_t>(all | (1u << static_cast<unsigned>(r)));
  const cpu::adamw_config opt{.lr = 3e-3f};
  const auto f32 = testing::host_steps(gqa_tied::config, 2, 16, 4, opt);
  for (f8_recipe r : {f8_recipe::tensorwise, f8_recipe::rowwise, f8_recipe::rowwise_with_gw_hp}) {
    CAPTURE(static_cast<int>(r));
    const f8_linears f8{.roles = all, .recipe = r};
    const auto host = testing::host_steps(gqa_tied::config, 2, 16, 4, opt, f8);
    const auto dev = testing::device_steps<staged_kernels>(gqa_tied::config, 2, 16, 4, opt, f8);
    CHECK(host.losses == dev.losses);
    CHECK(host.params == dev.params);
    CHECK(host.losses[0] != f32.losses[0]);  // the casts ran
  }
  CHECK_THROWS_WITH_AS(device_llama<cpu_kernels>(gqa_tied::config, f8_linears{.roles = all, .weights_cast = true}),
                       doctest::Contains("weights_cast is the FSDP policy's FP8 all-gather"), error);
}

TEST_CASE("device_llama with activation checkpointing is llama_model with it, bit for bit; it holds what the estimate says") {
  const cpu::adamw_config opt{.lr = 3e-3f};
  const auto none = testing::host_steps(debugmodel::config, 2, 16, 3, opt);
  for (const ac_settings ac : {ac_settings{.mode = ac_mode::full}, ac_settings{.mode = ac_mode::selective_layer, .every = 2},
                               ac_settings{.mode = ac_mode::selective_op}}) {
    CAPTURE(static_cast<int>(ac.mode));
    const auto host = testing::host_steps(debugmodel::config, 2, 16, 3, opt, {}, ac);
    const auto dev = testing::device_steps<staged_kernels>(debugmodel::config, 2, 16, 3, opt, {}, ac);
    CHECK(host.losses == dev.losses);
    CHECK(host.params == dev.params);
    CHECK(dev.losses == none.losses);  // recompute is exact
    device_llama<staged_kernels> d(debugmodel::config);
    llama_model h(debugmodel::config);
    d.set_checkpointing(ac);
    h.set_checkpointing(ac);
    d.init_weights(1);
    h.init_weights(1);
    const testing::step_batch b(0, 2, 16, 2048);
    d.forward(b.inputs, b.targets, 2, 16);
    h.forward(b.inputs, b.targets, 2, 16);
    d.backward();
    CHECK(d.recompute_flops() > 0);
    CHECK(d.activation_bytes() == h.activation_bytes() + 8 * 2 * 16);  // and the ids
    CHECK(d.activation_bytes() < device_llama<staged_kernels>::activation_bytes_for(debugmodel::config, 2, 16));
  }
}

TEST_CASE("bf16 operands: the weights a model keeps rounded -- the same bits as rounding for each GEMM") {
  // m owns its arenas and keeps its rounded weights (kernels/rounded_weights.hpp): its forward
  // rounds a weight unless the copy is fresh, its backward multiplies the forward's copy, its
  // optimizer writes the copies. u is the same model on arenas the test binds, which it cannot
  // keep: it rounds each GEMM's weight.
  using M = basic_llama_model<cpu_bf16_kernels>;
  const llama_config c = gqa_tied::config;  // the output layer is the embedding: kept too
  const std::int64_t B = 2, T = 16;
  const cpu::adamw_config opt{.lr = 1e-2f};
  for (const ac_settings ac : {ac_settings{}, ac_settings{.mode = ac_mode::full}}) {
    CAPTURE(static_cast<int>(ac.mode));
    M m(c), u(c, false);
    m.set_checkpointing(ac), u.set_checkpointing(ac);
    m.init_weights(7);
    const auto n = static_cast<std::size_t>(m.grads().size());
    std::vector<float> up(m.params().data(), m.params().data() + n), ug(n), mm(n), mv(n), um(n), uv(n);
    for (std::int64_t i = 0; i < m.n_tensors(); ++i) {
      const auto at = m.param(i) - m.params().data();
      u.bind(i, up.data() + at, ug.data() + at);
    }
    CHECK(m.kept_weight_bytes() == 4 * bf16_weight_elements(m.batch_dims(B, T), c.n_layers));
    CHECK(u.kept_weight_bytes() == 0);
    float* const p = m.params().data();  // reads through it leave the copies fresh; writes need weights_changed()
    const auto params_of = [&] { return std::vector<float>(p, p + n); };
    const auto step = [&](int s, bool optimize) {
      const testing::step_batch b(s, B, T, c.vocab_size);
      m.zero_grad();
      std::fill(ug.begin(), ug.end(), 0.0f);
      CHECK(m.forward(b.inputs, b.targets, B, T) == u.forward(b.inputs, b.targets, B, T));
      m.backward(), u.backward();
      CHECK(std::vector<float>(m.grads().data(), m.grads().data() + n) == ug);
      if (!optimize) return;
      m.adamw_update(m.grads().data(), mm.data(), mv.data(), static_cast<std::int64_t>(n), s + 1, opt);
      cpu_bf16_kernels::adamw_update(up.data(), ug.data(), um.data(), uv.data(), static_cast<std::int64_t>(n), s + 1, opt);
      CHECK(params_of() == up);
    };
    // AdamW writes the copies the next forward multiplies: three steps that change the weights
    for (int s = 0; s < 3; ++s) step(s, true);
    // writes through params() (or param(i), bind, init_weights, load_params) round them again
    for (std::size_t k = 0; k < n; k += 7) m.params().data()[k] += 0.03f, up[k] += 0.03f;
    step(3, false);
    // a write through a pointer taken before the last forward needs weights_changed()
    step(4, true);
    for (std::size_t k = 0; k < n; k += 5) p[k] *= 1.5f, up[k] *= 1.5f;
    const testing::step_batch b(5, B, T, c.vocab_size);
    CHECK(m.forward(b.inputs, b.targets, B, T) != u.forward(b.inputs, b.targets, B, T));  // the fresh copies
    m.weights_changed();
    step(5, false);
    // The backward multiplies the copies of its forward: weights changed between the two reach
    // u's input gradients and not m's.
    const testing::step_batch b9(9, B, T, c.vocab_size);
    m.zero_grad();
    std::fill(ug.begin(), ug.end(), 0.0f);
    (void)m.forward(b9.inputs, b9.targets, B, T), (void)u.forward(b9.inputs, b9.targets, B, T);
    for (std::size_t k = 0; k < n; ++k) m.params().data()[k] *= 2.0f, up[k] *= 2.0f;
    m.backward(), u.backward();
    CHECK(std::vector<float>(m.grads().data(), m.grads().data() + n) != ug);
  }
}

TEST_CASE_TEMPLATE("zero_grad in name: each weight's first GEMM writes its gradient -- the same bits as zeroing", K,
                   cpu_kernels, cpu_bf16_kernels) {
  // m owns its gradient arena: zero_grad() marks its tensors pending (kernels/pending_gradients.hpp),
  // the backward's first GEMM into a linear's gradient writes it, each part zeroes the rest of
  // its own. u is the same model on arenas the test binds and zeroes. m's gradients start as
  // NaN: a tensor neither written nor zeroed would show.
  using M = basic_llama_model<K>;
  std::uint16_t linears = 0;
  for (param_role r : block_linears) linears = static_cast<std::uint16_t>(linears | (1u << static_cast<unsigned>(r)));
  const std::int64_t B = 2, T = 16;
  struct variant {
    llama_config c;
    f8_linears f8;
    ac_settings ac;
    bool split;  // the backward in zero-bubble's parts: every I, then every W
  };
  for (const variant& x : {variant{debugmodel::config, {}, {}, false}, variant{gqa_tied::config, {}, {}, false},
                           variant{gqa_tied::config, {.roles = linears, .recipe = f8_recipe::rowwise}, {}, false},
                           variant{debugmodel::config, {}, {.mode = ac_mode::full}, false},
                           variant{gqa_tied::config, {}, {}, true}}) {
    CAPTURE(x.c.name);
    CAPTURE(x.split);
    llama_shard s = llama_shard::whole(x.c);
    s.float8 = x.f8;
    M m(x.c, s), u(x.c, s, false);
    m.set_checkpointing(x.ac), u.set_checkpointing(x.ac);
    m.init_weights(7);
    const auto n = static_cast<std::size_t>(m.grads().size());
    std::vector<float> up(m.params().data(), m.params().data() + n), ug(n);
    for (std::int64_t i = 0; i < m.n_tensors(); ++i) {
      const auto at = m.param(i) - m.params().data();
      u.bind(i, up.data() + at, ug.data() + at);
    }
    float* const g = m.grads().data();  // a pointer kept from before zero_grad()
    std::fill(g, g + n, std::nanf(""));
    const auto backward = [&](M& model) {
      if (!x.split) return model.backward();
      basic_serial_hooks<K> h;
      model.backward_head_input(h);
      for (std::int64_t l = x.c.n_layers - 1; l >= 0; --l) model.backward_block_input(l, h);
      model.backward_embedding_input(h);
      model.backward_head_weight();
      for (std::int64_t l = x.c.n_layers - 1; l >= 0; --l) model.backward_block_weight(l, h);
      model.backward_embedding_weight();
    };
    m.zero_grad();
    std::fill(ug.begin(), ug.end(), 0.0f);
    CHECK(std::isnan(g[0]));  // zero in name: its memory untouched until a part or an accessor
    for (int micro = 0; micro < 2; ++micro) {  // gradient accumulation: the second backward adds
      const testing::step_batch b(micro, B, T, x.c.vocab_size);
      CHECK(m.forward(b.inputs, b.targets, B, T) == u.forward(b.inputs, b.targets, B, T));
      backward(m), backward(u);
      CHECK(std::vector<float>(g, g + n) == ug);  // through the pointer kept from before: every tensor settled
    }
    CHECK(std::any_of(ug.begin(), ug.end(), [](float v) { return v != 0.0f; }));
    // the accessors zero what is pending: a zero_grad() then grads() reads zeros
    std::fill(g, g + n, std::nanf(""));
    m.zero_grad();
    CHECK(std::all_of(m.grads().data(), m.grads().data() + n, [](float v) { return v == 0.0f; }));
  }
}
