// Recipes with bf16 operands: parallel_llama<R, cpu_bf16_kernels> -- every linear's and the
// attention's operands rounded to bf16 (round to nearest even), products accumulated and
// everything else in f32, as cuda_bf16_kernels computes on the tensor cores -- against one
// rank with the same rounding (a one-rank FSDP mesh of the same model on cpu_bf16_kernels),
// the same 3 trainer steps (accumulation 2, clipping) and an evaluation forward
// (tests/support/recipe_steps.hpp). FSDP, HSDP, TP + SP + loss parallel, FSDP x TP with bf16
// gathers, pipelines (1F1B x FSDP, ZBV x TP with selective AC), context parallel (ring,
// head-tail; with FSDP and full AC) and Float8 x TP.
//
// Tolerance: a parallel run sums some products in another order (TP's partial sums, the
// ring's blocks), so a few f32 values differ in their last bits, and where such a value is an
// operand of the next product its bf16 rounding can go the other way: the runs move apart by
// much more than f32 runs do (1e-7), and much less than bf16's unit roundoff 2^-8 (what
// gpu.cuda_recipes allows between GPU and CPU). Every loss and gradient norm within 1e-4
// relative, and every parameter within 1e-3 of the largest: AdamW divides each update by the root of
// the gradient's second moment, so where an element's gradient is near zero, its direction --
// which a rounding can flip -- moves it by up to the learning rate (3e-3) a step (docs/recipes.md, "bf16 operands":
// the measured distances).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <recipe_steps.hpp>
#include <tessera/kernels/backend.hpp>

#include "recipes_tiny.hpp"

using namespace tessera;

namespace {

using testing::recipe_steps_on_threads;

/// Model M on one rank (FSDP over a mesh of one: parallel_llama's one-rank path).
template <class M>
struct one_rank {
  using model = M;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">>;
};
/// The same with FSDP gathering bf16 parameters (the reference of recipes that do).
template <class M>
struct one_rank_bf16 {
  using model = M;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp", mixed_precision<bf16, float>>>;
};

double largest_relative(const std::vector<float>& ref, const std::vector<float>& got) {
  double d = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    d = std::max(d, std::abs(static_cast<double>(got[i]) - ref[i]) / std::abs(static_cast<double>(ref[i])));
  return d;
}
/// The largest parameter difference over the largest parameter.
double param_distance(const std::vector<float>& ref, const std::vector<float>& got) {
  double d = 0, m = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    d = std::max(d, std::abs(static_cast<double>(got[i]) - ref[i]));
    m = std::max(m, std::abs(static_cast<double>(ref[i])));
  }
  return d / m;
}

template <class R, template <class> class Ref = one_rank>
void against_one_rank(int world, const char* what) {
  CAPTURE(what);
  const auto ref = recipe_steps_on_threads<Ref<typename R::model>, cpu_bf16_kernels>(1);
  const auto got = recipe_steps_on_threads<R, cpu_bf16_kernels>(world);
  REQUIRE(got.losses.size() == ref.losses.size());
  REQUIRE(got.params.size() == ref.params.size());
  const double loss = largest_relative(ref.losses, got.losses), norm = largest_relative(ref.norms, got.norms);
  const double params = param_distance(ref.params, got.params);
  std::printf("bf16 operands, %-44s on %d ranks: losses %.1e, norms %.1e, parameters %.1e from one rank's\n",
              what, world, loss, norm, params);
  CHECK(loss <= 1e-4);
  CHECK(norm <= 1e-4);
  CHECK(params <= 1e-3);
}

/// What a rank of recipe R kept of its rounded weights (train/parallel_llama.hpp's
/// keep_stored_weights) against the estimate (testing::kept_weights_problem), and the estimate's count.
struct kept_record {
  std::string problem = "not run";
  std::int64_t estimate = -1;
  std::int64_t unkept = -1, adopted = -1;  // weight elements rounded for single GEMMs; uses of adopted gathers
};

/// parallel_llama keeps the bf16 copies of the weights computed on their stored blocks: the
/// same bits as the same recipe rounding each GEMM's weight (its model told to keep nothing),
/// each kept weight rounded once in all 3 steps (of 2 accumulated microbatches each; under a
/// pipeline, of its microbatches; AdamW writes the copies after), and on every rank the bytes
/// that memory_estimate::kept_weights counts (none where FSDP gathers the weights); a weight
/// FSDP gathers in bf16 is multiplied as gathered, one gathered in f32 rounded for each GEMM
/// (testing::kept_weights_problem).
template <class R>
void kept_as_rounded(int world, const std::string& what, bool keeps) {
  CAPTURE(what);
  using model = train::parallel_llama<R, cpu_bf16_kernels>;
  std::vector<kept_record> ranks(static_cast<std::size_t>(world));
  const auto kept = recipe_steps_on_threads<R, cpu_bf16_kernels>(
      world, 16, testing::no_model_hook{}, [&](model& pm) {
        ranks[static_cast<std::size_t>(pm.mesh().rank())] = {
            testing::kept_weights_problem(pm),
            estimate_memory<R>(pm.mesh().shape(), 4, 16, pm.mesh().coords()).kept_weights,
            pm.model().kept_store().unkept(), pm.model().kept_store().adopted_uses()};
      });
  const auto rounded = recipe_steps_on_threads<R, cpu_bf16_kernels>(
      world, 16, [](model& pm) { pm.model().keep_rounded_weights(nullptr, 0, 0); });
  std::printf("%-44s rank 0: %lld weight elements kept, %lld rounded for single GEMMs, %lld uses of bf16 gathers\n",
              what.c_str(), static_cast<long long>(ranks[0].estimate), static_cast<long long>(ranks[0].unkept),
              static_cast<long long>(ranks[0].adopted));
  CHECK(kept.losses == rounded.losses);
  CHECK(kept.norms == rounded.norms);
  CHECK(kept.params == rounded.params);
  for (const kept_record& r : ranks) {
    CHECK(r.problem == "");
    CHECK((r.estimate > 0) == keeps);
  }
}

}  // namespace

TEST_CASE("a recipe's runtime keeps the rounded weights of its stored blocks: the same bits, rounded once") {
  using namespace tiny_recipes;
  kept_as_rounded<tp_sp_lp>(2, "TP + SP + loss parallel", true);
  kept_as_rounded<pp_dyn>(2, "pipeline (its default schedule)", true);
  kept_as_rounded<pp_zbv_op>(4, "ZBV zero bubble x TP + SP, selective op AC", true);
  kept_as_rounded<cp_only<cp_rotate::ring, cp_balancing::head_tail>>(2, "CP ring, head-tail", true);
  kept_as_rounded<f8_tp_rowwise_full>(2, "TP with Float8 rowwise, full AC", true);
  kept_as_rounded<fsdp_tp_2d>(4, "FSDP x TP + SP + loss parallel", false);
  // FSDP's bf16 gathers: nothing kept, every linear multiplies its unit's gather as it is
  kept_as_rounded<fsdp_tp_bf16>(4, "FSDP (bf16 gathers) x TP + loss parallel", false);
  kept_as_rounded<pp_fsdp_bf16>(4, "pipeline 1F1B x FSDP (bf16 gathers)", false);
}

TEST_CASE("recipes with bf16 operands (cpu_bf16_kernels) train as one rank with bf16 operands") {
  using namespace tiny_recipes;
  {  // the rounding is there: bf16 operands' gradient norms are far from f32 operands' (1.3e-4),
     // much further than a parallel run's are from one rank's (5.5e-7 at most, below)
    const auto bf16 = recipe_steps_on_threads<fsdp_dyn, cpu_bf16_kernels>(2);
    const auto f32 = recipe_steps_on_threads<fsdp_dyn, cpu_kernels>(2);
    std::printf("bf16 operands against f32 operands, FSDP on 2 ranks: losses %.1e, norms %.1e, parameters %.1e\n",
                largest_relative(f32.losses, bf16.losses), largest_relative(f32.norms, bf16.norms),
                param_distance(f32.params, bf16.params));
    CHECK(largest_relative(f32.norms, bf16.norms) > 1e-5);
  }
  against_one_rank<fsdp_dyn>(2, "FSDP");
  against_one_rank<hsdp_2x2>(4, "HSDP 2 x 2");
  against_one_rank<tp_sp_lp>(2, "TP + SP + loss parallel");
  against_one_rank<fsdp_tp_2d>(4, "FSDP x TP + SP + loss parallel");
  against_one_rank<pp_dyn>(2, "pipeline (its default schedule)");
  against_one_rank<pp_zbv_op>(4, "ZBV zero bubble x TP + SP, selective op AC");
  against_one_rank<cp_only<cp_rotate::ring, cp_balancing::head_tail>>(2, "CP ring, head-tail");
  against_one_rank<cp_fsdp_ring>(4, "FSDP x CP ring, full AC");
  against_one_rank<fsdp_tp_bf16, one_rank_bf16>(4, "FSDP (bf16 gathers) x TP + loss parallel");
  against_one_rank<pp_fsdp_bf16, one_rank_bf16>(4, "pipeline 1F1B x FSDP (bf16 gathers)");
}
