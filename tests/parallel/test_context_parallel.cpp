// Context parallel (issue 14): a recipe with context_parallel gives one rank's loss and
// every gradient on the same global batch -- both rotations, balanced and not, MHA and GQA,
// sequence lengths that are not powers of two, alone and composed with FSDP, TP + SP,
// pipelines, checkpointing and Float8.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include <tessera/comm/threads.hpp>
#include <tessera/parallel/context_parallel.hpp>
#include <tessera/train/parallel_llama.hpp>

#include "recipe_check.hpp"
#include "recipes_tiny.hpp"
#include "reference.hpp"

using namespace tessera;
using namespace equivalence;

namespace {
template <cp_rotation_kind Rot, cp_balance_kind Bal>
void check_cp(int cp, std::int64_t T, const char* what) {
  using R = tiny_recipes::cp_only<Rot, Bal>;
  check_recipe<R>(cp, make_batch(2, T, static_cast<std::uint32_t>(T + cp)), 2e-5, typename R::mesh(cp), 1e-6, what);
}
}  // namespace

TEST_CASE("context_parallel: both rotations, balanced and contiguous, cp 2 and 3, T = 12 and 24 equal one rank") {
  for (int cp : {2, 3})
    for (std::int64_t T : {12, 24}) {
      CAPTURE(cp);
      CAPTURE(T);
      check_cp<cp_rotate::allgather, cp_balancing::head_tail>(cp, T, "allgather, head-tail");
      check_cp<cp_rotate::ring, cp_balancing::head_tail>(cp, T, "ring, head-tail");
      check_cp<cp_rotate::allgather, cp_balancing::none>(cp, T, "allgather, contiguous");
      check_cp<cp_rotate::ring, cp_balancing::none>(cp, T, "ring, contiguous");
    }
}

TEST_CASE("context_parallel: head-tail positions, and a sequence length cp cannot split") {
  CHECK(parallel::cp_positions(8, 2, 0, cp_balancing::head_tail) == std::vector<std::int64_t>{0, 1, 6, 7});
  CHECK(parallel::cp_positions(8, 2, 1, cp_balancing::head_tail) == std::vector<std::int64_t>{2, 3, 4, 5});
  CHECK(parallel::cp_positions(6, 3, 2, cp_balancing::none) == std::vector<std::int64_t>{4, 5});
  CHECK(parallel::cp_seq_problem(12, 2, cp_balancing::head_tail, 1).empty());
  CHECK(parallel::cp_seq_problem(10, 2, cp_balancing::head_tail, 1) ==
        "context_parallel: seq_len (10) is not divisible by 2 x cp (4); choose a seq_len that is a multiple of 4 "
        "(head-tail balancing cuts each sequence into 2 x cp equal chunks)");
  CHECK(parallel::cp_seq_problem(12, 2, cp_balancing::head_tail, 2) ==
        "context_parallel: seq_len (12) is not divisible by tp x 2 x cp (4) = 8; choose a seq_len that is a multiple "
        "of 8 (head-tail balancing cuts each sequence into 2 x cp equal chunks)");
  // at start-up, with the numbers
  using R = tiny_recipes::cp_only<cp_rotate::ring, cp_balancing::head_tail>;
  comm::run_threads(2, [&](comm::threads_communicator& c) {
    device_mesh<R::mesh> dm(R::mesh(2), c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(1);
    const batch b = make_batch(2, 10, 1);
    CHECK_THROWS_WITH(pm.forward(b.in, b.tg, b.B, b.T), doctest::Contains("seq_len (10) is not divisible by 2 x cp (4)"));
  });
}

TEST_CASE("context_parallel composes: FSDP over dp x cp, FSDP x TP + SP, pipeline + checkpointing, 4-D") {
  check_recipe<tiny_recipes::cp_fsdp_ring>(4, make_batch(4, 12, 21), 2e-5, {}, 1e-6, "fsdp x cp (ring) + full AC");
  check_recipe<tiny_recipes::cp_fsdp_tp>(8, make_batch(4, 24, 22), 2e-5, {}, 1e-6, "fsdp x cp x tp+sp");
  check_recipe<tiny_recipes::cp_pp_ring_op>(4, make_batch(2, 12, 23), 2e-5, {}, 1e-6, "pp x cp + selective op AC");
  check_recipe<tiny_recipes::cp_4d>(16, make_batch(8, 24, 24), 2e-5, {}, 1e-6, "pp x dp x cp x tp (16 ranks)");
}
