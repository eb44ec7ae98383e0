// Float8 block linears on one rank (issue 15): the model computes through the casts (the
// loss and gradients move off f32's, by FP8's rounding), every recipe and a single linear;
// activation checkpointing recomputes the same casts (bit-identical); the scratch the
// Float8 operands need is what llama_activation_bytes counts (and ASan checks its bounds:
// this binary runs under ASan + UBSan in CI).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <tessera/model/llama.hpp>

using namespace tessera;

// A namespace of its own: CI compiles this program as one translation unit (TESSERA_UNITY_TESTS).
namespace model_float8_tests {
namespace {
// dims multiples of 16: D 64, Hq 64, Hk 32, F 192
constexpr llama_config tiny{.name = "f8_tiny", .dim = 64, .n_layers = 3, .n_heads = 4, .n_kv_heads = 2,
                            .vocab_size = 128, .multiple_of = 32};
constexpr std::int64_t B = 2, T = 16;
constexpr std::uint16_t bit(param_role r) { return static_cast<std::uint16_t>(1u << static_cast<unsigned>(r)); }
constexpr std::uint16_t all = bit(param_role::attention_q) | bit(param_role::attention_k) |
                              bit(param_role::attention_v) | bit(param_role::attention_o) | bit(param_role::ffn_w1) |
                              bit(param_role::ffn_w2) | bit(param_role::ffn_w3);

struct result {
  float loss = 0;
  std::vector<float> grads;
  std::int64_t activation_bytes = 0;
};

result run(const f8_linears& f, ac_mode ac = ac_mode::none) {
  llama_shard s = llama_shard::whole(tiny);
  s.float8 = f;
  llama_model m(tiny, s);
  m.init_weights(7);
  ac_settings a;
  a.mode = ac;
  m.set_checkpointing(a);
  std::mt19937 g(3);
  std::vector<std::int32_t> in(B * T), tg(B * T);
  for (auto& t : in) t = static_cast<std::int32_t>(g() % tiny.vocab_size);
  for (auto& t : tg) t = static_cast<std::int32_t>(g() % tiny.vocab_size);
  result r;
  m.zero_grad();
  r.loss = m.forward(in, tg, B, T);
  m.backward();
  r.grads.assign(m.grads().data(), m.grads().data() + m.grads().size());
  r.activation_bytes = m.activation_bytes();
  return r;
}
double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) num = std::max(num, double(std::abs(a[i] - b[i]))), den = std::max(den, double(std::abs(b[i])));
  return num / den;
}
}  // namespace

TEST_CASE("float8 model: every recipe computes through the casts, close to f32") {
  const result f32 = run({});
  for (f8_recipe rc : {f8_recipe::tensorwise, f8_recipe::rowwise, f8_recipe::rowwise_with_gw_hp}) {
    CAPTURE(static_cast<int>(rc));
    const result r = run({.roles = all, .recipe = rc});
    CHECK(r.loss != f32.loss);
    CHECK(std::abs(r.loss - f32.loss) < 1e-2 * f32.loss);
    const double d = max_rel(r.grads, f32.grads);
    CHECK(d > 1e-4);  // FP8's 3 mantissa bits reach the gradients
    CHECK(d < 0.2);
    // the two operand buffers of the widest linear: N x 192 and max(N, 192) x 192 floats
    CHECK(r.activation_bytes - f32.activation_bytes == 4 * (B * T * 192 + 192 * 192));
    CHECK(r.activation_bytes == llama_activation_bytes(tiny, [] {
            llama_shard s = llama_shard::whole(tiny);
            s.float8 = {.roles = all};
            return s;
          }(), B, T));
  }
  // the roles are honoured one by one: w2 alone moves the loss, and less than all seven
  const result one = run({.roles = bit(param_role::ffn_w2), .recipe = f8_recipe::rowwise});
  CHECK(one.loss != f32.loss);
  CHECK(one.loss != run({.roles = all, .recipe = f8_recipe::rowwise}).loss);
}

TEST_CASE("float8 model: activation checkpointing recomputes the same casts (bit-identical)") {
  for (f8_recipe rc : {f8_recipe::tensorwise, f8_recipe::rowwise}) {
    const result plain = run({.roles = all, .recipe = rc});
    for (ac_mode m : {ac_mode::full, ac_mode::selective_op}) {
      const result r = run({.roles = all, .recipe = rc}, m);
      CHECK(r.loss == plain.loss);
      CHECK(std::memcmp(r.grads.data(), plain.grads.data(), r.grads.size() * sizeof(float)) == 0);
    }
  }
}
}  // namespace model_float8_tests
