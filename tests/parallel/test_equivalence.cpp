// A recipe's forward and backward give the single-rank model's loss and gradients.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/train/parallel_llama.hpp>

#include "recipes_tiny.hpp"
#include "recipe_check.hpp"
#include "reference.hpp"

using namespace tessera;

namespace {
using namespace equivalence;

reference serial(const batch& b) { return equivalence::serial(tiny_recipes::tiny::config, b); }

}  // namespace

TEST_CASE("parallel_llama: FSDP over 2 and 3 ranks (uneven shards) matches one rank") {
  const batch b = make_batch(6, 8, 1);
  check_recipe<tiny_recipes::fsdp_dyn>(2, b, 2e-5, tessera::mesh<axis<"dp">>(2));
  check_recipe<tiny_recipes::fsdp_dyn>(3, b, 2e-5, tessera::mesh<axis<"dp">>(3));
  check_recipe<tiny_recipes::fsdp_never>(2, b, 2e-5, {});
}

TEST_CASE("parallel_llama: HSDP 2 x 2 matches one rank") {
  check_recipe<tiny_recipes::hsdp_2x2>(4, make_batch(4, 8, 2), 2e-5, {});
}

TEST_CASE("parallel_llama: TP with and without sequence and loss parallel matches one rank") {
  const batch b = make_batch(2, 7, 3);  // T = 7: the sequence splits unevenly
  check_recipe<tiny_recipes::tp_sp_lp>(2, b, 2e-5, {});
  check_recipe<tiny_recipes::tp_plain>(2, b, 2e-5, {});
}

TEST_CASE("parallel_llama: FSDP x TP (2-D) matches one rank") {
  check_recipe<tiny_recipes::fsdp_tp_2d>(4, make_batch(4, 8, 4), 2e-5, {});
}

namespace {
/// One forward + backward of recipe R (bf16 parameters) on 4 thread ranks: the model
/// computed with parameters rounded to bf16 (8 significant bits), so the loss is close to,
/// but not equal to, the f32 one. Then `more(pm, ref)` on every rank.
template <class R, class More>
void check_bf16_step(const batch& b, More&& more) {
  const reference ref = serial(b);
  comm::run_threads(4, [&](comm::threads_communicator& c) {
    device_mesh<typename R::mesh> dm({}, c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(11);
    pm.zero_grad();
    const float loss = pm.forward(b.in, b.tg, b.B, b.T);
    pm.backward();
    CHECK(loss != ref.loss);
    CHECK(std::abs(loss - ref.loss) <= 1e-2 * std::abs(ref.loss));
    more(pm, ref);
  });
}
}  // namespace

TEST_CASE("parallel_llama: FSDP mixed precision gathers bf16 parameters and reduces f32 gradients") {
  check_bf16_step<tiny_recipes::fsdp_tp_bf16>(make_batch(4, 8, 5), [](auto& pm, const reference& ref) {
    // the master weights stay f32 and unrounded
    bool any_unrounded = false;
    for (std::int64_t i = 0; i < pm.model().n_tensors() && !any_unrounded; ++i)
      for (float x : pm.full_param(i)) any_unrounded = any_unrounded || static_cast<float>(bf16(x)) != x;
    CHECK(any_unrounded);
    double worst = 0;
    for (std::int64_t i = 0; i < pm.model().n_tensors(); ++i)
      worst = std::max(worst, max_rel(pm.full_grad(i), ref.grads[static_cast<std::size_t>(i)]));
    CHECK(worst <= 5e-2);  // bf16 weights: gradients agree to bf16's few significant digits
  });
}

namespace {
/// An fsdp / hsdp recipe with options Opts... (in the given order) over 2 x 2 ranks.
template <bool Hybrid, class... Opts>
struct combined {
  using model = tiny_recipes::tiny;
  using mesh = tessera::mesh<axis<"r", 2>, axis<"s", 2>>;
  using parallelize = std::conditional_t<Hybrid, tessera::parallelize<hsdp<"r", "s", Opts...>>,
                                         tessera::parallelize<fsdp<"s", Opts...>, tensor_parallel<"r">>>;
};
template <class R, reshard Mode, bool Bf16>
void check_combined() {
  using T = recipe_traits<R>;
  static_assert(T::ok && T::spec.reshard_mode == Mode && T::spec.bf16_params == Bf16);
  const batch b = make_batch(4, 8, 6);
  if constexpr (!Bf16) {
    check_recipe<R>(4, b, 2e-5, {});
  } else {
    check_bf16_step<R>(b, [](auto&, const reference&) {});
  }
}
}  // namespace

TEST_CASE("fsdp / hsdp: every combination of options, in either order, compiles and trains") {
  using never = reshard_after_forward<reshard::never>;
  using last = reshard_after_forward<reshard::all_but_last>;
  using half = mixed_precision<bf16, float>;
  using full = mixed_precision<float, float>;
  check_combined<combined<true, never, half>, reshard::never, true>();
  check_combined<combined<true, half, never>, reshard::never, true>();
  check_combined<combined<true, last, full>, reshard::all_but_last, false>();
  check_combined<combined<true, full, last>, reshard::all_but_last, false>();
  check_combined<combined<false, never, half>, reshard::never, true>();
  check_combined<combined<false, half, last>, reshard::all_but_last, true>();
  check_combined<combined<false, full>, reshard::always, false>();
  // tensor_parallel's options in either order
  static_assert(tensor_parallel<"tp", loss_parallel, sequence_parallel>::desc.tp.sequence_parallel &&
                tensor_parallel<"tp", loss_parallel, sequence_parallel>::desc.tp.loss_parallel);
}
