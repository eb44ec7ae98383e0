// train::check_host_memory: a training step that needs more host memory than is available
// is refused with one message naming the sizes and the fix; enough memory, or an unknown
// amount (0), passes.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include <tessera/core/error.hpp>
#include <tessera/core/host_memory.hpp>
#include <tessera/train/memory_check.hpp>
#include <tessera/train/recipes.hpp>

#include "failure.hpp"

namespace {
using namespace tessera;
using testing_support::failure_of;
using testing_support::has;

constexpr std::int64_t GiB = std::int64_t{1} << 30;

mesh_shape dp(std::int64_t n) {
  mesh_shape m;
  m.ndim = 1;
  m.size[0] = n;
  return m;
}
}  // namespace

TEST_CASE("check_host_memory refuses a step that does not fit, naming the sizes and the fix") {
  using R = recipes::debug_fsdp;
  const std::int64_t each = estimate_memory<R>(dp(2), 8, 100000).peak();
  REQUIRE(each > 40 * GiB);  // debugmodel's activations at seq 100000: tens of GiB per rank
  const std::string why = failure_of<error>([&] { train::check_host_memory<R>(dp(2), 8, 100000, 2, 8 * GiB); });
  INFO(why);
  CHECK(has(why, "seq_len 100000 x global batch 8: one training step of recipe debug_fsdp needs about "));
  CHECK(has(why, " on this host (2 ranks here, "));
  CHECK(has(why, "of which activations "));  // the largest part: what to shrink
  CHECK(has(why, "but 8.0 GiB is available; give a smaller seq_len or global batch, more hosts, or a recipe with "
                 "activation checkpointing"));
  // the need is both ranks' peak
  CHECK(has(why, train::detail::gib(2 * each) + " on this host"));
  CHECK(has(why, train::detail::gib(each) + " each"));

  // enough memory for both ranks: no error; one rank here needs half
  CHECK_NOTHROW(train::check_host_memory<R>(dp(2), 8, 100000, 2, 2 * each));
  CHECK(!failure_of<error>([&] { train::check_host_memory<R>(dp(2), 8, 100000, 2, 2 * each - 1); }).empty());
  CHECK_NOTHROW(train::check_host_memory<R>(dp(2), 8, 100000, 1, each));
  // unknown available memory: no check
  CHECK_NOTHROW(train::check_host_memory<R>(dp(2), 8, 100000, 2, 0));
  // what the tests train fits in a few MiB... GiB
  CHECK_NOTHROW(train::check_host_memory<R>(dp(2), 8, 64, 2, 1 * GiB));
}

TEST_CASE("check_host_memory names the parameters' fix when the model is what does not fit") {
  using R = recipes::llama3_8b_fsdp;
  // llama3_8b over 8 ranks, one on this host: an eighth of its 8B f32 parameters, gradients and
  // two AdamW moments (about 15 GiB) and a tiny batch
  const std::string why = failure_of<error>([&] { train::check_host_memory<R>(dp(8), 8, 16, 1, 8 * GiB); });
  INFO(why);
  CHECK(has(why, "of which optimizer states "));
  CHECK(has(why, "shard the model over more ranks (FSDP, TP or PP axes) on more hosts, or run fewer ranks on this host"));
}

TEST_CASE("check_host_memory under a pipeline takes the stage that needs most") {
  using R = recipes::debug_pp;  // the last stage holds the output layer and the loss
  mesh_shape m = dp(2);
  coords_t last{};
  last[0] = 1;
  const std::int64_t worst = std::max(estimate_memory<R>(m, 4, 4096).peak(), estimate_memory<R>(m, 4, 4096, last).peak());
  CHECK_NOTHROW(train::check_host_memory<R>(m, 4, 4096, 2, 2 * worst));
  CHECK(!failure_of<error>([&] { train::check_host_memory<R>(m, 4, 4096, 2, 2 * worst - 1); }).empty());
}

TEST_CASE("ranks_on_this_host: every thread rank; MPI: the launcher's local count") {
  CHECK(train::ranks_on_this_host("threads", 8) == 8);
  CHECK(train::ranks_on_this_host("mpi", 8) >= 1);
  CHECK(host_available_memory() >= 0);
}
