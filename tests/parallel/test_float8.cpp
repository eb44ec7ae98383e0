// Float8 as a policy (issue 15): which linears convert, the model's Float8 numerics on one
// rank and under FSDP, FP8 all-gather bit-identical to gathering f32 and casting after,
// and the measured bytes of the FP8 all-gather recipe equal to its traffic estimate
// (test_traffic.cpp) and the measured peak to the memory estimate (test_memory.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/parallel/activation_checkpoint.hpp>
#include <tessera/parallel/context_parallel.hpp>
#include <tessera/parallel/float8.hpp>

#include "training_check.hpp"

using namespace tessera;
namespace tc = training_check;

namespace {
constexpr std::uint16_t bit(param_role r) { return static_cast<std::uint16_t>(1u << static_cast<unsigned>(r)); }
constexpr std::uint16_t all_linears = bit(param_role::attention_q) | bit(param_role::attention_k) |
                                      bit(param_role::attention_v) | bit(param_role::attention_o) |
                                      bit(param_role::ffn_w1) | bit(param_role::ffn_w2) | bit(param_role::ffn_w3);

template <class Policy>
constexpr f8_settings settings_of() {
  return Policy::desc.f8;
}

// The curves below train tc::smallmodel (the debug model's shape at a tenth of its size: what
// they check -- the casts ran, one rank against many, the same bits -- does not depend on the
// size), except the shipped recipes' own runs, which train the debug model.
//
// The curves are kept once computed (training_check.hpp's `kept`): the one-rank rowwise
// curve was computed six times, the tensorwise one five: 193 s instead of 245 s for this
// binary on the 2-core development machine, one run after the other.

/// One rank's 20-step curve with the block linears converted as `f`.
std::vector<double> serial_curve(const f8_linears& f, const std::vector<std::int32_t>& toks) {
  static std::map<std::tuple<std::uint16_t, f8_recipe, bool, std::vector<std::int32_t>>, std::vector<double>> memo;
  return tc::kept(memo, std::make_tuple(f.roles, f.recipe, f.weights_cast, toks), [&] {
    llama_shard s = llama_shard::whole(tc::smallmodel::config);
    s.float8 = f;
    llama_model m(tc::smallmodel::config, s);
    m.init_weights(9);
    return tc::curve<tc::smallmodel>(m, toks);
  });
}

struct fsdp_f32_tw {
  static constexpr std::string_view name = "fsdp_f32_tw";
  using model = tc::smallmodel;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">, float8<fp8::tensorwise>>;
};
struct fsdp_f32_tw_ag {
  static constexpr std::string_view name = "fsdp_f32_tw_ag";
  using model = tc::smallmodel;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">, float8<fp8::tensorwise, fp8::all_gather>>;
};
struct fsdp_f32_rowwise {
  static constexpr std::string_view name = "fsdp_f32_rowwise";
  using model = tc::smallmodel;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">, float8<fp8::rowwise>>;
};
}  // namespace

TEST_CASE("float8: the linears a policy converts (torchao's filters)") {
  constexpr llama_config dbg = debugmodel::config, l8 = llama3_8b::config;
  // every block linear of the debug model (all dims multiples of 16), never the output; the
  // same for the smaller model the numerics below train
  static_assert(f8_linears_of(dbg, settings_of<float8<fp8::rowwise>>()).roles == all_linears);
  static_assert(f8_linears_of(tc::smallmodel::config, settings_of<float8<fp8::rowwise>>()).roles == all_linears);
  static_assert(!f8_linears_of(dbg, settings_of<float8<fp8::rowwise>>()).covers(param_role::output));
  static_assert(f8_linears_of(dbg, f8_settings{}).roles == 0);
  // auto_filter_small_kn: the debug model's linears are all below the thresholds
  static_assert(f8_linears_of(dbg, settings_of<float8<fp8::tensorwise, fp8::auto_filter_small_kn>>()).roles == 0);
  // Llama 3 8B: tensorwise keeps all (out <= 4096 with in <= 1024 never holds); rowwise drops
  // wk and wv ([1024, 4096]: out <= 1024)
  static_assert(f8_linears_of(l8, settings_of<float8<fp8::tensorwise, fp8::auto_filter_small_kn>>()).roles ==
                all_linears);
  static_assert(f8_linears_of(l8, settings_of<float8<fp8::rowwise, fp8::auto_filter_small_kn>>()).roles ==
                (all_linears & ~bit(param_role::attention_k) & ~bit(param_role::attention_v)));
  // the thresholds themselves (torchao's K = out, N = in)
  CHECK(!f8_large_enough(f8_recipe::tensorwise, 4096, 1024));
  CHECK(f8_large_enough(f8_recipe::tensorwise, 4097, 1024));
  CHECK(f8_large_enough(f8_recipe::tensorwise, 4096, 1040));
  CHECK(!f8_large_enough(f8_recipe::rowwise, 8192, 2048));
  CHECK(!f8_large_enough(f8_recipe::rowwise, 1024, 8192));
  CHECK(!f8_large_enough(f8_recipe::rowwise, 2048, 4096));
  CHECK(f8_large_enough(f8_recipe::rowwise, 2064, 4096));
  // a list of linears
  static_assert(f8_linears_of(dbg, settings_of<float8<fp8::rowwise, fp8::linears<param_role::ffn_w1,
                                                                                   param_role::ffn_w3>>>())
                    .roles == (bit(param_role::ffn_w1) | bit(param_role::ffn_w3)));
  // the recipes
  static_assert(recipe_traits<recipes::debug_fsdp_float8>::spec.float8.recipe == f8_recipe::rowwise);
  static_assert(recipe_traits<recipes::debug_fsdp_float8_tw>::spec.float8.all_gather);
}

TEST_CASE("float8: one rank trains through the Float8 casts of every recipe, close to f32") {
  const auto toks = tc::tokens();
  const auto ref = tc::serial_curve<tc::smallmodel>(toks);
  for (f8_recipe r : {f8_recipe::tensorwise, f8_recipe::rowwise, f8_recipe::rowwise_with_gw_hp}) {
    const auto got = serial_curve({.roles = all_linears, .recipe = r}, toks);
    const double dev = tc::deviation(ref, got);
    std::printf("float8 recipe %d, one rank: 20-step loss %.5f -> %.5f; f32 %.5f -> %.5f; max relative deviation %.2e\n",
                static_cast<int>(r), got.front(), got.back(), ref.front(), ref.back(), dev);
    CHECK(dev > 0);      // the casts ran: FP8's 3 mantissa bits move every step's loss
    CHECK(dev < 0.02);   // and training follows f32's curve
    CHECK(got.back() < got.front() - 0.3);
  }
  // one linear alone changes the curve too (the roles are honoured one by one)
  const auto one = serial_curve({.roles = bit(param_role::ffn_w2), .recipe = f8_recipe::rowwise}, toks);
  const auto all = serial_curve({.roles = all_linears, .recipe = f8_recipe::rowwise}, toks);
  CHECK(tc::deviation(ref, one) > 0);
  CHECK(std::memcmp(one.data(), all.data(), one.size() * sizeof(double)) != 0);
}

TEST_CASE("float8: FP8 all-gather trains bit-identically to gathering f32 and casting after") {
  const auto toks = tc::tokens();
  for (int world : {2, 3}) {
    const auto a = tc::threads_curve<fsdp_f32_tw_ag>(world, toks, tc::bit_identity_steps);
    const auto b = tc::threads_curve<fsdp_f32_tw>(world, toks, tc::bit_identity_steps);
    REQUIRE(a.size() == b.size());
    std::printf("FSDP tensorwise on %d ranks, FP8 all-gather vs f32 gathers: loss %.6f -> %.6f, bit-identical: %s\n",
                world, a.front(), a.back(), std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0 ? "yes" : "NO");
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
  }
}

TEST_CASE("float8 under FSDP: one rank's global batch, up to the per-rank scales") {
  // torchao's dynamic scales are functions of each rank's own tensors: under data parallel a
  // rank scales its activations and gradients by the amax of its local batch, one rank by
  // the global batch's. Rowwise scales the forward per token (identical), the weight
  // gradient's operands per column over the local tokens. The curves agree to the
  // rounding those scales move (docs/recipes.md, "Float8").
  const auto toks = tc::tokens();
  const auto one = serial_curve({.roles = all_linears, .recipe = f8_recipe::rowwise}, toks);
  const auto two = tc::threads_curve<fsdp_f32_rowwise>(2, toks);
  const double dev = tc::deviation(one, two);
  std::printf("FSDP rowwise on 2 ranks vs one rank rowwise: max relative deviation %.2e\n", dev);
  CHECK(dev < 5e-4);
  const auto tw1 = serial_curve({.roles = all_linears, .recipe = f8_recipe::tensorwise}, toks);
  const auto tw2 = tc::threads_curve<fsdp_f32_tw>(2, toks);
  std::printf("FSDP tensorwise on 2 ranks vs one rank tensorwise: max relative deviation %.2e\n",
              tc::deviation(tw1, tw2));
  CHECK(tc::deviation(tw1, tw2) < 5e-4);
  // the shipped recipes run (bf16 gathers)
  for (const auto& c : {tc::threads_curve<recipes::debug_fsdp_float8>(2, toks),
                        tc::threads_curve<recipes::debug_fsdp_float8_tw>(2, toks)})
    CHECK(c.back() < c.front() - 0.3);
}

namespace {
struct fsdp_rowwise_ac {
  static constexpr std::string_view name = "fsdp_rowwise_ac";
  using model = tc::smallmodel;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">, float8<fp8::rowwise>, activation_checkpointing<ac::full>>;
};
struct pp_rowwise {
  static constexpr std::string_view name = "pp_rowwise";
  using model = tc::smallmodel;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::one_f_one_b>, microbatches<2>>,
      float8<fp8::rowwise>>;
};
struct pp_zbv_tw {
  static constexpr std::string_view name = "pp_zbv_tw";
  using model = tc::smallmodel;
  using mesh = tessera::mesh<axis<"pp", 2>>;
  using parallelize = tessera::parallelize<
      pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::zbv_zero_bubble>, stages_per_rank<2>,
                        microbatches<2>>,
      float8<fp8::tensorwise>>;
};
}  // namespace

TEST_CASE("float8 composes: activation checkpointing recomputes bit-identically, pipelines split the batch") {
  const auto toks = tc::tokens();
  const auto a = tc::threads_curve<fsdp_rowwise_ac>(2, toks, tc::bit_identity_steps);
  const auto b = tc::threads_curve<fsdp_f32_rowwise>(2, toks, tc::bit_identity_steps);
  REQUIRE(a.size() == b.size());
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
  // a pipeline's microbatches are scaled one by one (as data-parallel ranks are)
  const auto row1 = serial_curve({.roles = all_linears, .recipe = f8_recipe::rowwise}, toks);
  const auto tw1 = serial_curve({.roles = all_linears, .recipe = f8_recipe::tensorwise}, toks);
  const double pp = tc::deviation(row1, tc::threads_curve<pp_rowwise>(2, toks));
  const double zbv = tc::deviation(tw1, tc::threads_curve<pp_zbv_tw>(2, toks));  // I and W apart
  std::printf("float8 rowwise, pp 2 (1F1B): %.2e; tensorwise, pp 2 (ZBV): %.2e from one rank\n", pp, zbv);
  CHECK(pp < 5e-4);
  CHECK(zbv < 5e-4);
}

namespace {
template <class... P>
struct debug_with {
  static constexpr std::string_view name = "debug_with";
  using model = tc::smallmodel;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel>, P...>;
};
template <class... P>
struct debug_2d_with {
  static constexpr std::string_view name = "debug_2d_with";
  using model = tc::smallmodel;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, loss_parallel>, P...>;
};
}  // namespace

TEST_CASE("float8 under tensor parallel: amaxes of TP-split operands reduced over tp, as one rank's") {
  // TP splits no batch: every scale is the one-rank scale (the amaxes of split operands are
  // max-reduced over tp), so the first forward is bit-identical; after it, the TP sums' other
  // order (row-parallel partial sums, the input gradients' reduction) moves a few values
  // across an FP8 rounding boundary, which 3 mantissa bits turn into 1e-7..1e-6 per step,
  // compounding to a few 1e-5 in 20 steps (docs/recipes.md "Float8")
  const auto toks = tc::tokens();
  for (f8_recipe r : {f8_recipe::tensorwise, f8_recipe::rowwise}) {
    const auto one = serial_curve({.roles = all_linears, .recipe = r}, toks);
    const auto tp = r == f8_recipe::tensorwise ? tc::threads_curve<debug_with<float8<fp8::tensorwise>>>(2, toks)
                                               : tc::threads_curve<debug_with<float8<fp8::rowwise>>>(2, toks);
    const double dev = tc::deviation(one, tp);
    std::printf("float8 recipe %d, TP 2 (SP, LP) vs one rank: first loss %s, max relative deviation %.2e\n",
                static_cast<int>(r), one.front() == tp.front() ? "bit-identical" : "DIFFERENT", dev);
    CHECK(one.front() == tp.front());  // the forward's scales are the one-rank scales, bit for bit
    CHECK(dev < 2e-4);
  }
  // FP8 all-gather under FSDP x TP: the weight's amax over dp and tp, bit-identical to casting after
  constexpr std::int64_t n = tc::bit_identity_steps;
  const auto ag = tc::threads_curve<debug_2d_with<float8<fp8::tensorwise, fp8::all_gather>>>(4, toks, n);
  const auto cast_after = tc::threads_curve<debug_2d_with<float8<fp8::tensorwise>>>(4, toks, n);
  REQUIRE(ag.size() == cast_after.size());
  CHECK(std::memcmp(ag.data(), cast_after.data(), ag.size() * sizeof(double)) == 0);
}

namespace {
template <class Scaling>
struct cp_f8 {
  static constexpr std::string_view name = "cp_f8";
  using model = tc::smallmodel;
  using mesh = tessera::mesh<axis<"cp">>;
  using parallelize = tessera::parallelize<context_parallel<"cp", cp_rotation<cp_rotate::ring>>, float8<Scaling>>;
};
}  // namespace

TEST_CASE("float8 under context parallel: one rank's curve, up to the per-rank scales") {
  // As under data parallel: each cp rank scales by the amaxes of its own tokens (torchao
  // reduces no amax over cp); rowwise's forward scales are per token, so only the weight
  // gradients' column scales see a part of the sequence.
  const auto toks = tc::tokens();
  const auto rw1 = serial_curve({.roles = all_linears, .recipe = f8_recipe::rowwise}, toks);
  const auto rw2 = tc::threads_curve<cp_f8<fp8::rowwise>>(2, toks);
  const auto tw1 = serial_curve({.roles = all_linears, .recipe = f8_recipe::tensorwise}, toks);
  const auto tw2 = tc::threads_curve<cp_f8<fp8::tensorwise>>(2, toks);
  std::printf("CP 2 (ring) vs one rank: rowwise max relative deviation %.2e, tensorwise %.2e\n",
              tc::deviation(rw1, rw2), tc::deviation(tw1, tw2));
  CHECK(tc::deviation(rw1, rw2) < 5e-4);
  CHECK(tc::deviation(tw1, tw2) < 5e-4);
}
