// The layouts policies give parameters and activations, as values.
#include <doctest/doctest.h>

#include <tessera/layout/print.hpp>
#include <tessera/train/recipe.hpp>

#include "recipes_tiny.hpp"

using namespace tessera;

TEST_CASE("policies resolve against the mesh") {
  constexpr parallel_spec s = recipe_traits<tiny_recipes::fsdp_tp_2d>::spec;
  static_assert(s.dp_shard == 0 && s.tp == 1 && s.dp_replicate == -1 && s.sequence_parallel && s.loss_parallel);
  static_assert(s.reshard_mode == reshard::all_but_last);
  constexpr parallel_spec h = recipe_traits<tiny_recipes::hsdp_2x2>::spec;
  static_assert(h.dp_replicate == 0 && h.dp_shard == 1 && h.tp == -1);
  static_assert(recipe_traits<tiny_recipes::fsdp_tp_bf16>::spec.bf16_params);
}
