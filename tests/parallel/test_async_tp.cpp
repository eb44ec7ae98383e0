// Async TP (tensor_parallel's async_tp): the sequence-parallel all-gathers and reduce-scatters
// of the blocks as ring steps around their GEMMs. Each composition equals one rank; the ring
// really runs (point-to-point sends on the tp axis, no block collective left); a sequence the
// ring cannot split is refused.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <tessera/comm/flight_recorder.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/train/parallel_llama.hpp>

#include "recipe_check.hpp"
#include "recipes_tiny.hpp"
#include "reference.hpp"

using namespace tessera;
using namespace equivalence;

namespace {
/// Four KV heads, so that tp 4 splits them: a ring of four.
struct tiny_mha {
  static constexpr llama_config config{.name = "tiny_mha", .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 4,
                                       .vocab_size = 97, .multiple_of = 32};
};
struct tp4_async {
  using model = tiny_mha;
  using mesh = tessera::mesh<axis<"tp", 4>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel, async_tp>>;
};
struct tp4_sync {
  using model = tiny_mha;
  using mesh = tessera::mesh<axis<"tp", 4>>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};

/// Float8 tensorwise on wo and w2, TP with SP without async: the reference of its async twin.
struct tp_sync_f8_rows {
  using model = tiny_recipes::tiny;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize =
      tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel>,
                           float8<fp8::tensorwise, fp8::linears<param_role::attention_o, param_role::ffn_w2>>>;
};
/// Their twins without async TP: the references of the Float8 rowwise recipes.
struct tp_sync_f8_rowwise {
  using model = tiny_recipes::tiny;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize =
      tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel>, float8<fp8::rowwise>>;
};
struct fsdp_tp_sync_f8_op {
  using model = tiny_recipes::tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel>, float8<fp8::rowwise>,
                                           activation_checkpointing<ac::selective_op<>>>;
};
/// The loss and full gradients of one forward + backward of R on `world` thread ranks.
template <class R>
reference parallel_reference(int world, const batch& b) {
  reference r{0, {}};
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    device_mesh<typename R::mesh> dm(typename R::mesh{}, c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(11);
    pm.zero_grad();
    const float loss = pm.forward(b.in, b.tg, b.B, b.T);
    pm.backward();
    std::vector<std::vector<float>> grads;
    for (std::int64_t i = 0; i < pm.model().n_tensors(); ++i) grads.push_back(pm.full_grad(i));
    if (c.rank() == 0) r = {loss, grads};
  });
  return r;
}

/// The calls of one forward + backward of R on `world` thread ranks, rank 0's.
template <class R>
std::vector<comm::flight_entry> calls_of_step(int world, const batch& b) {
  std::vector<comm::flight_entry> out;
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    comm::flight_recorder rec(c, {.capacity = 1 << 14, .dump_on_error = false});
    device_mesh<typename R::mesh> dm(typename R::mesh{}, rec);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(3);
    const std::uint64_t since = rec.recorded();
    pm.forward(b.in, b.tg, b.B, b.T);
    pm.backward();
    if (c.rank() == 0)
      for (const auto& e : rec.entries())
        if (e.id >= since) out.push_back(e);
  });
  return out;
}
std::int64_t count(const std::vector<comm::flight_entry>& v, comm::call_kind k) {
  std::int64_t n = 0;
  for (const auto& e : v) n += e.desc.kind == k;
  return n;
}
}  // namespace

TEST_CASE("async TP: tp 2 and a ring of 4, several sequences per batch, equals one rank") {
  check_recipe<tiny_recipes::tp_async<2>>(2, make_batch(1, 8, 31), 2e-5, {}, -1, "tp 2, one sequence");
  check_recipe<tiny_recipes::tp_async<2>>(2, make_batch(3, 8, 32), 2e-5, {}, -1, "tp 2, three sequences");
  check_recipe<tp4_async>(4, make_batch(2, 12, 33), 2e-5, {}, -1, "tp 4");
}

TEST_CASE("async TP composes: FSDP, selective and full checkpointing, zero-bubble PP, context parallel, Float8") {
  check_recipe<tiny_recipes::fsdp_tp_async>(4, make_batch(4, 8, 34), 2e-5, {}, -1, "fsdp x tp async");
  check_recipe<tiny_recipes::fsdp_tp_async_op>(4, make_batch(4, 8, 35), 2e-5, {}, -1, "fsdp x tp async, op AC");
  check_recipe<tiny_recipes::tp_async_full>(2, make_batch(2, 8, 36), 2e-5, {}, -1, "tp async, full AC");
  check_recipe<tiny_recipes::pp_zbv_tp_async>(4, make_batch(4, 8, 37), 2e-5, {}, -1, "pp (ZBV) x tp async");
  check_recipe<tiny_recipes::cp_tp_async>(4, make_batch(2, 16, 38), 2e-5, {}, 1e-6, "cp (ring) x tp async");
  // Float8 rounds, so its reference is the same recipe without async TP: the Float8 regions
  // run whole in both, the others in parts of the sequence under async TP
  const batch b = make_batch(2, 8, 39);
  check_recipe_against<tiny_recipes::tp_async_f8_rows>(parallel_reference<tp_sync_f8_rows>(2, b), 2, b, 2e-5, {}, -1,
                                                       "tp async, Float8 on wo and w2");
}

TEST_CASE("async TP with Float8 rowwise: every region in parts, equal to TP + SP with the same casts") {
  // rowwise scales are per row: a part's casts are the whole tensor's rows', so only the ring's
  // order of sums differs from the same recipe without async TP
  const batch b = make_batch(3, 8, 41);
  check_recipe_against<tiny_recipes::tp_async_f8_rowwise>(parallel_reference<tp_sync_f8_rowwise>(2, b), 2, b, 2e-5, {},
                                                          -1, "tp async, Float8 rowwise");
  const batch b4 = make_batch(4, 8, 42);
  check_recipe_against<tiny_recipes::fsdp_tp_async_f8_op>(parallel_reference<fsdp_tp_sync_f8_op>(4, b4), 4, b4, 2e-5,
                                                          {}, -1, "fsdp x tp async, Float8 rowwise, op AC");
}

TEST_CASE("async TP with Float8 rowwise: the amax all-reduces of TP + SP, once for the whole tensors") {
  // a region in parts reduces the whole tensors' amaxes before its ring (the parts take their
  // rows' slices), not each part's: the same calls and floats as the region run whole
  const batch b = make_batch(3, 8, 43);
  const auto async = calls_of_step<tiny_recipes::tp_async_f8_rowwise>(2, b);
  const auto sync = calls_of_step<tp_sync_f8_rowwise>(2, b);
  auto floats = [](const std::vector<comm::flight_entry>& v) {
    std::size_t n = 0;
    for (const auto& e : v) n += e.desc.kind == comm::call_kind::all_reduce ? e.desc.count : 0;
    return n;
  };
  CHECK(count(async, comm::call_kind::all_reduce) == count(sync, comm::call_kind::all_reduce));
  CHECK(floats(async) == floats(sync));
  CHECK(count(async, comm::call_kind::all_reduce) > 0);
}

TEST_CASE("async TP: the blocks' gathers and reduce-scatters run as ring sends on the tp axis") {
  const batch b = make_batch(2, 12, 40);
  const auto async = calls_of_step<tp4_async>(4, b), sync = calls_of_step<tp4_sync>(4, b);
  constexpr std::int64_t L = tiny_mha::config.n_layers, p = 4;
  // per block: two gathers and two reduce-scatters forward, and again backward; each a ring
  // of p - 1 sends (and as many receives)
  CHECK(count(async, comm::call_kind::send) == 8 * L * (p - 1));
  CHECK(count(async, comm::call_kind::recv) == 8 * L * (p - 1));
  CHECK(count(sync, comm::call_kind::send) == 0);
  // what stays a collective: the ends' (embedding, head) and the loss's, the same calls either way
  CHECK(count(sync, comm::call_kind::all_gather) - count(async, comm::call_kind::all_gather) == 4 * L);
  CHECK(count(sync, comm::call_kind::reduce_scatter) - count(async, comm::call_kind::reduce_scatter) == 4 * L);
  CHECK(count(async, comm::call_kind::all_reduce) == count(sync, comm::call_kind::all_reduce));
  // every send moves one part: [B, T / p, D] floats
  for (const auto& e : async)
    if (e.desc.kind == comm::call_kind::send) CHECK(e.desc.count == static_cast<std::size_t>(b.B * b.T / p * 32));
}

TEST_CASE("async TP: a sequence the tp ranks cannot split evenly is refused with the fix") {
  using R = tiny_recipes::tp_async<2>;
  comm::run_threads(2, [&](comm::threads_communicator& c) {
    device_mesh<R::mesh> dm(R::mesh{}, c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(1);
    const batch b = make_batch(2, 7, 1);
    CHECK_THROWS_WITH(pm.forward(b.in, b.tg, b.B, b.T),
                      doctest::Contains("async TP: a rank's 7 tokens of each sequence do not split evenly over the 2 "
                                        "ranks of the tp axis; use a --seq-len divisible by 2"));
  });
}
