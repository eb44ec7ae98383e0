// Activation checkpointing on one rank (issue 15): every mode gives the loss and every
// gradient of no checkpointing bit for bit; the kept activation bytes and the recompute's
// FLOPs are the multiples each mode promises; the memory the model allocates is what
// llama_activation_bytes says.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <tessera/model/llama.hpp>

using namespace tessera;

namespace {
constexpr llama_config tiny{.name = "ac_tiny", .dim = 64, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2,
                            .vocab_size = 128, .multiple_of = 32};
constexpr std::int64_t B = 2, T = 16;

struct result {
  std::vector<float> losses;
  std::vector<float> grads;
  std::int64_t activation_bytes = 0, recompute_flops = 0;
};

result run(const ac_settings& ac, int steps = 2) {
  llama_model m(tiny);
  m.init_weights(7);
  m.set_checkpointing(ac);
  std::mt19937 g(3);
  result r;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::int32_t> in(B * T), tg(B * T);
    for (auto& t : in) t = static_cast<std::int32_t>(g() % tiny.vocab_size);
    for (auto& t : tg) t = static_cast<std::int32_t>(g() % tiny.vocab_size);
    m.zero_grad();
    r.losses.push_back(m.forward(in, tg, B, T));
    m.backward();
    // a plain SGD step so that the second step runs on other weights
    for (std::size_t i = 0; i < m.params().size(); ++i) m.params().data()[i] -= 0.1f * m.grads().data()[i];
  }
  r.grads.assign(m.grads().data(), m.grads().data() + m.grads().size());
  r.activation_bytes = m.activation_bytes();
  r.recompute_flops = m.recompute_flops();
  return r;
}

ac_settings mode(ac_mode md, int every = 0) {
  ac_settings s;
  s.mode = md, s.every = every;
  return s;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("activation checkpointing: every mode is bit-identical to none (loss and every gradient)") {
  const result none = run(mode(ac_mode::none));
  ac_settings custom = mode(ac_mode::selective_op);
  custom.default_ops = false;
  custom.ops = ac_bit(ac_op::attention) | ac_bit(ac_op::wo) | ac_bit(ac_op::w3);
  const std::pair<const char*, ac_settings> modes[] = {{"full", mode(ac_mode::full)},
                                                       {"selective_layer 2", mode(ac_mode::selective_layer, 2)},
                                                       {"selective_layer 1", mode(ac_mode::selective_layer, 1)},
                                                       {"selective_op (TorchTitan's)", mode(ac_mode::selective_op)},
                                                       {"selective_op (attention, wo, w3)", custom}};
  for (const auto& m : modes) {
    const char* name = m.first;  // (clang 14 cannot capture a structured binding in CAPTURE's lambda)
    CAPTURE(name);
    const result r = run(m.second);
    CHECK(bit_equal(r.losses, none.losses));
    CHECK(bit_equal(r.grads, none.grads));
    CHECK(r.recompute_flops > 0);
  }
  CHECK(none.recompute_flops == 0);
}

TEST_CASE("activation checkpointing: kept bytes and recompute FLOPs per mode") {
  const llama_dims d = dims_of(tiny, llama_shard::whole(tiny), B, T);
  const std::int64_t L = tiny.n_layers, saved = total_of(block_saved_sizes(d));
  const std::int64_t N = d.N(), D = d.D, Hq = d.Hq(), Hk = d.Hk(), F = d.F;
  const std::int64_t attention = 4 * d.B * d.heads * d.T * d.T * d.hd / 2;
  const std::int64_t block_forward_flops = 2 * N * (D * Hq + 2 * D * Hk + Hq * D + 2 * D * F) + attention;  // w2 not redone
  // kept floats per block, as multiples
  CHECK(block_kept_floats(d, ac_keep_mask(mode(ac_mode::none), 0, false)) == saved);
  CHECK(block_kept_floats(d, ac_keep_mask(mode(ac_mode::full), 0, false)) == 0);
  CHECK(block_kept_floats(d, ac_default_ops(false)) == N * Hq + N * Hk + N * Hq + d.B * d.heads * d.T + N * F);
  const result none = run(mode(ac_mode::none), 1), full = run(mode(ac_mode::full), 1),
               layer2 = run(mode(ac_mode::selective_layer, 2), 1), op = run(mode(ac_mode::selective_op), 1);
  // backward's extra FLOPs: full recomputes every block's forward, selective_layer 2 half
  // of the blocks, TorchTitan's op policy wk, wo and w3 (and no attention)
  CHECK(full.recompute_flops == L * block_forward_flops);
  CHECK(layer2.recompute_flops == L / 2 * block_forward_flops);
  CHECK(op.recompute_flops == L * 2 * N * (D * Hk + Hq * D + D * F));
  // the activations the model holds: none keeps L blocks' saved tensors; full keeps none of
  // them but one block's worth of recompute buffer
  const std::int64_t base = none.activation_bytes - 4 * L * saved;
  CHECK(full.activation_bytes == base + 4 * saved);
  CHECK(layer2.activation_bytes == base + 4 * (L / 2) * saved + 4 * saved);
  CHECK(op.activation_bytes ==
        base + 4 * L * block_kept_floats(d, ac_default_ops(false)) + 4 * (saved - block_kept_floats(d, ac_default_ops(false))));
  CHECK(none.activation_bytes == llama_activation_bytes(tiny, llama_shard::whole(tiny), B, T));
  for (const auto& ac : {mode(ac_mode::none), mode(ac_mode::full), mode(ac_mode::selective_layer, 2),
                         mode(ac_mode::selective_op)})
    CHECK(run(ac, 1).activation_bytes == llama_activation_bytes(tiny, llama_shard::whole(tiny), B, T, ac, false));
}
