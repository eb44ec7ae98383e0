// The memory estimator against the peak the tracking allocator measures on each rank.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/tensor/memory.hpp>
#include <tessera/train/memory_estimator.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/trainer.hpp>

#include "recipes_tiny.hpp"

using namespace tessera;

namespace {

// memory_tracker<host_space> is process-wide, but its hook runs on the allocating thread:
// thread-local counters give each rank (one thread on the threads backend) its own peak.
thread_local std::int64_t rank_current = 0, rank_peak = 0;
void count(std::string_view, std::int64_t delta, std::int64_t, void*) {
  rank_current += delta;
  rank_peak = std::max(rank_peak, rank_current);
}
struct hook_guard {
  hook_guard() { memory_tracker<host_space>::set_hook(&count); }
  ~hook_guard() { memory_tracker<host_space>::set_hook(nullptr); }
};

struct debug_2d {
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize =
      tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};
struct debug_never {  // 6 blocks: every block stays gathered from forward to backward
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp", reshard_after_forward<reshard::never>>>;
};
struct debug_fsdp {
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">>;
};

/// Runs forward + backward of recipe R with AdamW's two arenas on `world` thread ranks and
/// compares each rank's measured peak with estimate_memory for its coordinates; returns the
/// measured peaks by rank.
template <class R>
std::vector<std::int64_t> check_peak(int world, typename R::mesh mesh_value, std::int64_t B, std::int64_t T,
                                     const char* what) {
  std::vector<std::int64_t> peaks(static_cast<std::size_t>(world));
  std::vector<std::int32_t> in, tg;
  std::mt19937 g(5);
  const auto V = static_cast<std::uint32_t>(recipe_traits<R>::config.vocab_size);
  for (std::int64_t i = 0; i < B * T; ++i) {
    in.push_back(static_cast<std::int32_t>(g() % V));
    tg.push_back(static_cast<std::int32_t>(g() % V));
  }
  hook_guard hook;
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    rank_current = 0, rank_peak = 0;
    {
      device_mesh<typename R::mesh> dm(mesh_value, c);
      train::parallel_llama<R> pm(dm);
      arena<float> m(pm.params().layout()), v(pm.params().layout());  // AdamW's m and v
      pm.init_weights(3);
      pm.zero_grad();
      (void)pm.forward(in, tg, B, T);
      pm.backward();
      const memory_estimate e = estimate_memory<R>(dm.shape(), B, T, dm.coords());
      const auto measured = rank_peak;
      peaks[static_cast<std::size_t>(dm.rank())] = measured;
      // the persistent parts are exact
      CHECK(e.parameters + e.gradients == pm.stored_bytes());
      if constexpr (recipe_traits<R>::spec.pp >= 0)  // the microbatches' activations in flight + the scratch
        CHECK(e.activations == pm.pipeline_activation_peak() + pm.model().activation_bytes());
      else
        CHECK(e.activations == pm.model().activation_bytes());
      if constexpr (recipe_traits<R>::spec.cp >= 0) CHECK(e.context == pm.context().buffer_bytes());
      const double ratio = static_cast<double>(e.tracked_peak()) / static_cast<double>(measured);
      if (dm.rank() == 0)
        std::printf("memory %-28s rank 0: estimated %lld B, measured peak %lld B (ratio %.4f), staging %lld B\n",
                    what, static_cast<long long>(e.tracked_peak()), static_cast<long long>(measured), ratio,
                    static_cast<long long>(e.staging));
      CHECK_MESSAGE(std::abs(ratio - 1.0) <= 0.10, what, " rank ", dm.rank(), ": estimated ", e.tracked_peak(),
                    " B, measured ", measured, " B");
    }
    CHECK(rank_current == 0);  // everything counted was released
  });
  return peaks;
}

}  // namespace

TEST_CASE("estimate_memory: within 10% of each rank's measured peak (tiny recipes)") {
  using namespace tiny_recipes;
  check_peak<fsdp_dyn>(2, fsdp_dyn::mesh(2), 4, 8, "tiny fsdp x2");
  check_peak<fsdp_dyn>(3, fsdp_dyn::mesh(3), 6, 8, "tiny fsdp x3 (uneven)");
  check_peak<fsdp_never>(2, fsdp_never::mesh(), 4, 8, "tiny fsdp never-reshard");
  check_peak<hsdp_2x2>(4, hsdp_2x2::mesh(), 4, 8, "tiny hsdp 2x2");
  check_peak<tp_sp_lp>(2, tp_sp_lp::mesh(), 2, 8, "tiny tp+sp+lp");
  check_peak<tp_plain>(2, tp_plain::mesh(), 2, 8, "tiny tp");
  check_peak<fsdp_tp_2d>(4, fsdp_tp_2d::mesh(), 4, 8, "tiny fsdp x tp (2-D)");
  check_peak<tp_plain_full>(2, tp_plain_full::mesh(), 2, 8, "tiny tp, full activation checkpointing");
  check_peak<fsdp_tp_2d_op>(4, fsdp_tp_2d_op::mesh(), 4, 8, "tiny fsdp x tp, selective op checkpointing");
  check_peak<fsdp_tp_bf16>(4, fsdp_tp_bf16::mesh(), 4, 8, "tiny fsdp x tp bf16");
  check_peak<f8_2d_tw_ag_op>(4, f8_2d_tw_ag_op::mesh(), 4, 8, "tiny fsdp x tp, float8 tw + FP8 AG + op AC");
  check_peak<tp_async<2>>(2, {}, 2, 8, "tiny tp async");
  check_peak<fsdp_tp_async_op>(4, {}, 4, 8, "tiny fsdp x tp async, op AC");
  check_peak<pp_zbv_tp_async>(4, {}, 8, 8, "tiny pp (ZBV) x tp async");
  // with Float8 rowwise: the whole tensors' amaxes of a region in parts kept too
  check_peak<tp_async_f8_rowwise>(2, {}, 3, 8, "tiny tp async, Float8 rowwise");
  check_peak<fsdp_tp_async_f8_op>(4, {}, 4, 8, "tiny fsdp x tp async, Float8 rowwise, op AC");
  // async TP's ring: three parts of [B, T / tp, D] more staging than TP + SP without it
  const memory_estimate sync = estimate_memory<tp_sp_lp>(mesh_shape{1, {2}}, 2, 8, coords_t{0});
  const memory_estimate async = estimate_memory<tp_async<2>>(mesh_shape{1, {2}}, 2, 8, coords_t{0});
  CHECK(async.staging - sync.staging == 3 * (2 * 8 / 2) * tiny::config.dim * 4);
  CHECK(async.tracked_peak() == sync.tracked_peak());
}

TEST_CASE("estimate_memory: context parallel's activations and K/V blocks, alone and composed") {
  using namespace tiny_recipes;
  using cp_ag = cp_only<cp_rotate::allgather, cp_balancing::head_tail>;
  using cp_ring = cp_only<cp_rotate::ring, cp_balancing::none>;
  check_peak<cp_ag>(2, cp_ag::mesh(2), 2, 12, "tiny cp 2 (all-gather)");
  check_peak<cp_ring>(3, cp_ring::mesh(3), 2, 12, "tiny cp 3 (ring, contiguous)");
  check_peak<cp_fsdp_ring>(4, cp_fsdp_ring::mesh(), 4, 12, "tiny fsdp x cp (ring), full AC");
  check_peak<cp_fsdp_tp>(8, cp_fsdp_tp::mesh(), 4, 24, "tiny fsdp x cp x tp+sp");
  check_peak<cp_pp_ring_op>(4, cp_pp_ring_op::mesh(), 2, 12, "tiny pp x cp, op AC");
  // balanced per document: RoPE tables per row
  using cp_pd = cp_docs<cp_rotate::ring, cp_balancing::per_document>;
  check_peak<cp_pd>(2, cp_pd::mesh(2), 2, 12, "tiny cp 2, per-document balance");
  check_peak<cp_docs_pp>(4, cp_docs_pp::mesh(), 2, 24, "tiny pp x cp, per-document balance");
}

TEST_CASE("estimate_memory: within 10% of each rank's measured peak (debugmodel)") {
  check_peak<debug_fsdp>(2, debug_fsdp::mesh(2), 4, 64, "debugmodel fsdp x2");
  check_peak<debug_never>(2, debug_never::mesh(), 4, 64, "debugmodel fsdp never-reshard");
  check_peak<debug_2d>(4, debug_2d::mesh(), 4, 64, "debugmodel fsdp x tp");
  check_peak<recipes::debug_fsdp_float8>(2, recipes::debug_fsdp_float8::mesh(2), 4, 64, "debugmodel fsdp float8 rowwise");
  check_peak<recipes::debug_fsdp_float8_tw>(2, recipes::debug_fsdp_float8_tw::mesh(2), 4, 64,
                                           "debugmodel fsdp float8 tw + FP8 all-gather");
}

TEST_CASE("estimate_memory: pipeline recipes, per stage, with the schedule's activations in flight") {
  using namespace tiny_recipes;
  check_peak<pp_3d>(8, pp_3d::mesh(), 8, 8, "tiny pp x dp x tp (Interleaved1F1B)");
  check_peak<pp_hsdp>(8, pp_hsdp::mesh(), 8, 8, "tiny pp x hsdp (GPipe)");
  check_peak<recipes::debug_pp>(2, recipes::debug_pp::mesh(), 4, 64, "debugmodel pp (1F1B)");
  check_peak<recipes::debug_3d_zbv>(8, recipes::debug_3d_zbv::mesh(), 8, 64, "debugmodel 3-D (ZBV, I and W apart)");
  check_peak<tiny_recipes::pp_3d_layer2>(8, tiny_recipes::pp_3d_layer2::mesh(), 8, 8,
                                         "tiny 3-D, selective_layer<2> checkpointing");
  check_peak<tiny_recipes::pp_zbv_op>(4, tiny_recipes::pp_zbv_op::mesh(), 8, 8,
                                      "tiny pp x tp (ZBV), selective op checkpointing");
  // the simulator's count of microbatches in flight: 1F1B's rank 0 keeps pp of them
  using R = recipe_traits<recipes::debug_pp>;
  constexpr auto plan = parallel::resolve_pipeline(R::config, R::spec.pipeline, 2);
  constexpr llama_dims d = dims_of(R::config, llama_shard::whole(R::config), 1, 64);
  static_assert(detail::pipeline_activation_peak(plan, parallel::pp_lowered_schedule(R::spec.pipeline, plan), 0, d) ==
                2 * llama_stage_activation_bytes(d, plan.blocks(0), false));
}

TEST_CASE("FSDP's reduce-scatters stay in flight through the next block's backward: the peak holds them") {
  // 6 blocks: the peak is in the backward of block 4, with block 5's gradient buffers and
  // the outputs of their reduce-scatters still held; exact on every rank
  using R = debug_fsdp;
  const auto peaks = check_peak<R>(2, R::mesh(2), 4, 64, "debugmodel fsdp x2 (overlap)");
  for (int r = 0; r < 2; ++r) {
    const memory_estimate e = estimate_memory<R>(mesh_shape{1, {2}}, 4, 64, coords_t{r});
    CHECK(e.block_overlapped > e.block_grad_buffers);
    CHECK(e.grad_buffers == e.root_grad_buffers + e.block_grad_buffers + e.block_overlapped);
    CHECK(peaks[static_cast<std::size_t>(r)] == e.tracked_peak());
  }
}

TEST_CASE("estimate_memory: constexpr, and the parts scale as the layouts say") {
  using R = recipe_traits<debug_fsdp>;
  constexpr mesh_shape one{1, {1}}, eight{1, {8}};
  constexpr memory_estimate a = estimate_memory(R::config, R::spec, one, 8, 256);
  constexpr memory_estimate b = estimate_memory(R::config, R::spec, eight, 8, 256);
  // 8-way FSDP: stored blocks and optimizer states shrink ~8x; activations of 1 of 8 sequences
  static_assert(a.parameters > 7 * b.parameters && a.parameters < 9 * b.parameters);
  static_assert(a.optimizer == 2 * a.parameters && b.gradients == b.parameters);
  static_assert(a.activations > 7 * b.activations && a.activations < 8 * b.activations);  // (RoPE tables do not scale)
  // the gathered root + two blocks and their gradient buffers, and in the backward of the
  // block before the last the last one's reduce-scatters in flight: its gradient buffers and
  // this rank's blocks of the sums, an eighth of them (every block parameter splits evenly)
  static_assert(b.gathered == b.root_gathered + 2 * b.block_gathered);
  static_assert(b.block_overlapped * 8 == b.block_grad_buffers * 9);
  static_assert(b.grad_buffers == b.root_grad_buffers + b.block_grad_buffers + b.block_overlapped);
  CHECK(b.to_string().find("peak") != std::string::npos);
}

TEST_CASE("basic_trainer refuses a step beyond the host's memory before it allocates the optimizer states") {
  // TESSERA_HOST_MEMORY stands for a small host: debug_fsdp's rank needs tens of MiB
  using R = recipes::debug_fsdp;
  std::vector<std::int32_t> toks(4096);
  for (std::size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<std::int32_t>(i * 7 % 2048);
  const auto build = [&](const char* budget) {
    ::setenv("TESSERA_HOST_MEMORY", budget, 1);
    std::vector<std::string> why(2);
    std::vector<std::int64_t> grew(2, -1);
    hook_guard hook;
    comm::run_threads(2, [&](comm::threads_communicator& c) {
      rank_current = 0, rank_peak = 0;  // this rank's counts start here (a thread may have run an earlier case)
      device_mesh<R::mesh> dm(R::mesh(2), c);
      train::parallel_llama<R> pm(dm);
      train::batch_loader loader(toks, 4, 64, 3, true, c.rank(), 2);
      const std::int64_t before = rank_peak;
      try {
        train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, 1, 1, train::optimizer_options{});
      } catch (const error& e) {
        why[static_cast<std::size_t>(c.rank())] = e.what();
      }
      grew[static_cast<std::size_t>(c.rank())] = rank_peak - before;
    });
    ::unsetenv("TESSERA_HOST_MEMORY");
    return std::pair{why, grew};
  };
  const auto refused = build("1MiB");  // (no structured binding: doctest's INFO captures it in a lambda)
  const auto& why = refused.first;
  const auto& grew = refused.second;
  for (int r = 0; r < 2; ++r) {
    INFO("rank ", r, ": ", why[static_cast<std::size_t>(r)]);
    CHECK(why[static_cast<std::size_t>(r)].find("one training step of recipe debug_fsdp needs about ") != std::string::npos);
    CHECK(why[static_cast<std::size_t>(r)].find("(2 ranks here, ") != std::string::npos);
    CHECK(why[static_cast<std::size_t>(r)].find("but 1.0 MiB is available (TESSERA_HOST_MEMORY)") != std::string::npos);
    CHECK(grew[static_cast<std::size_t>(r)] == 0);  // refused before the AdamW moments were allocated
  }
  // a budget that holds the step: the trainer is built, its moments allocated
  const auto built = build("8GiB");
  const auto& fits = built.first;
  const auto& grew_fits = built.second;
  for (int r = 0; r < 2; ++r) {
    CHECK(fits[static_cast<std::size_t>(r)].empty());
    CHECK(grew_fits[static_cast<std::size_t>(r)] > 0);
  }
}
