// The traffic estimator (the plans' cost model walked over a training step) against the
// bytes every rank's flight recorder saw in one trainer step.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/comm/flight_recorder.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/tensor/dist_tensor.hpp>
#include <tessera/train/traffic_estimator.hpp>

#include "recipes_tiny.hpp"
#include "training_check.hpp"

using namespace tessera;
namespace tc = training_check;

namespace {

struct rank_result {
  int rank = 0;
  traffic_by_axes measured;
  traffic_estimate estimate;
  std::vector<comm::flight_entry> step;  // the recorded calls of the measured step
};

/// Trains two steps of R on `world` thread ranks (micro-batches of `batch` x `seq`,
/// `accum` per step) and returns, per rank, what its recorder saw in the second step and
/// the estimate.
template <class R>
std::vector<rank_result> run(int world, typename R::mesh mesh, std::int64_t batch, std::int64_t seq, int accum = 1) {
  auto toks = tc::tokens();
  for (auto& t : toks) t %= static_cast<std::int32_t>(recipe_traits<R>::config.vocab_size);
  std::vector<rank_result> out;
  std::mutex m;
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    comm::flight_recorder rec(c, {.capacity = 1 << 16, .dump_on_error = false});
    device_mesh<typename R::mesh> dm(mesh, rec);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(9);
    train::batch_loader loader(toks, batch, seq, 3);
    train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, 2, accum, tc::options());
    tr.train_step();
    const std::uint64_t since = rec.recorded();
    tr.train_step();
    const auto entries = rec.entries();
    rank_result r{c.rank(), measured_traffic(entries, dm.shape(), since),
                  estimate_traffic<R>(dm.shape(), batch, seq, accum, dm.coords()), {}};
    for (const auto& e : entries)
      if (e.id >= since) r.step.push_back(e);
    std::lock_guard<std::mutex> lock(m);
    out.push_back(r);
  });
  return out;
}

template <class R>
void check_recipe(const char* what, int world, typename R::mesh mesh, std::int64_t batch, std::int64_t seq,
                  int accum = 1) {
  const auto results = run<R>(world, mesh, batch, seq, accum);
  const std::span<const std::string_view> names(R::mesh::names);
  REQUIRE(results.size() == static_cast<std::size_t>(world));
  const traffic_estimate& e = results.front().estimate;
  std::printf("%-26s %d ranks: estimate %.3f MiB/step (parameters %.3f, gradients %.3f, activations %.3f), %s\n", what,
              world, static_cast<double>(e.total()) / (1 << 20), static_cast<double>(e.parameters) / (1 << 20),
              static_cast<double>(e.gradients) / (1 << 20), static_cast<double>(e.activations) / (1 << 20),
              e.by_axes.to_string(names).c_str());
  for (const rank_result& r : results) {
    INFO(what << " rank " << r.rank << ": measured " << r.measured.to_string(names) << " vs estimate "
              << r.estimate.by_axes.to_string(names));
    CHECK(r.estimate.total() == r.estimate.by_axes.bytes());
    CHECK(r.measured.same_as(r.estimate.by_axes));
  }
}

}  // namespace

TEST_CASE("traffic by axes: a group of point-to-point sends only says so (sends count no call)") {
  traffic_by_axes t;
  t.add(1u << 1, 3 << 20, 0);  // cp's ring: bytes, no call
  t.add(1u << 0, 1 << 20, 4);
  const std::array<std::string_view, 2> names{"dp", "cp"};
  CHECK(t.to_string(names) == "cp: 3.000 MiB in point-to-point sends; dp: 1.000 MiB in 4 calls");
  // debug_4d's cp runs the ring: its line names the sends, not "0 calls"
  const traffic_estimate e = estimate_traffic<recipes::debug_4d>(mesh_shape{4, {2, 2, 2, 2}}, 4, 32);
  CHECK(e.by_axes.to_string(recipes::debug_4d::mesh::names).find("MiB in 0 calls") == std::string::npos);
}

TEST_CASE("traffic by axes: a group of calls and sends says how much went each way") {
  traffic_by_axes t;
  t.add(1u, 1 << 19, 4);
  t.add_sent(1u, 3 << 19);
  const std::array<std::string_view, 1> names{"pp"};
  CHECK(t.to_string(names) == "pp: 2.000 MiB (0.500 MiB in 4 calls, 1.500 MiB in point-to-point sends)");
  CHECK(t.at(1u).sent == 3 << 19);
  // debug_pp's pp axis carries both: the loss and norm sums (all-reduces) and the schedule's
  // sends between stages (the line read "N calls" for all of it)
  const traffic_estimate e = estimate_traffic<recipes::debug_pp>(mesh_shape{1, {2}}, 4, 32);
  const axis_traffic pp = e.by_axes.at(1u);
  CHECK(pp.calls > 0);
  CHECK(pp.sent == e.pipeline);
  CHECK(pp.bytes > pp.sent);
  const std::string line = e.by_axes.to_string(recipes::debug_pp::mesh::names);
  INFO(line);
  CHECK(line.find(" calls, ") != std::string::npos);
  CHECK(line.find(" MiB in point-to-point sends)") != std::string::npos);
}

TEST_CASE("traffic estimate: constexpr, and zero on one rank") {
  constexpr traffic_estimate one = estimate_traffic<recipes::debug_fsdp>(mesh_shape{1, {1}}, 8, 128);
  static_assert(one.total() == 0 && one.by_axes.calls() == 0);
  constexpr traffic_estimate two = estimate_traffic<recipes::debug_fsdp>(mesh_shape{1, {2}}, 8, 128);
  // FSDP on 2 ranks: each parameter is gathered twice per step (forward, backward; the root
  // once) and its gradient reduce-scattered once, each moving half the parameter
  const std::int64_t P = param_count(debugmodel::config), root = 2 * 2048 * 256 + 256;
  static_assert(two.parameters == (2 * (P - root) + root) * 4 / 2);
  static_assert(two.gradients == P * 4 / 2);
  static_assert(two.activations == 0);
  CHECK(two.total() > 0);
}

TEST_CASE("traffic: context parallel's K/V blocks (all-gather and ring), alone and composed, measured == estimated") {
  using namespace tiny_recipes;
  using cp_ag = cp_only<cp_rotate::allgather, cp_balancing::head_tail>;
  using cp_ring = cp_only<cp_rotate::ring, cp_balancing::none>;
  check_recipe<cp_ag>("tiny cp 2 (all-gather)", 2, cp_ag::mesh(2), 2, 12);
  check_recipe<cp_ring>("tiny cp 3 (ring)", 3, cp_ring::mesh(3), 2, 12);
  check_recipe<cp_fsdp_ring>("tiny fsdp x cp (ring), full AC", 4, {}, 4, 12);
  check_recipe<cp_fsdp_tp>("tiny fsdp x cp x tp+sp", 8, {}, 4, 24);
  check_recipe<cp_pp_ring_op>("tiny pp x cp, op AC", 4, {}, 2, 12);
  check_recipe<cp_fsdp_f8>("tiny fsdp x cp, FP8 all-gather", 4, {}, 4, 12);
}

TEST_CASE("traffic: every shipped recipe moves what the plans' cost model says, on every rank") {
  check_recipe<recipes::debug_fsdp>("debug_fsdp", 2, recipes::debug_fsdp::mesh(2), 4, 32);
  check_recipe<recipes::debug_fsdp>("debug_fsdp (uneven batch)", 3, recipes::debug_fsdp::mesh(3), 4, 32);
  check_recipe<recipes::debug_hsdp>("debug_hsdp", 4, recipes::debug_hsdp::mesh(4), 4, 32);
  check_recipe<recipes::debug_tp>("debug_tp", 2, recipes::debug_tp::mesh(2), 4, 32);
  check_recipe<recipes::debug_2d>("debug_2d", 4, recipes::debug_2d::mesh(4), 4, 32);
  check_recipe<recipes::debug_2d>("debug_2d (2 micro-batches)", 4, recipes::debug_2d::mesh(4), 4, 32, 2);
  check_recipe<recipes::debug_2d_async>("debug_2d_async", 4, recipes::debug_2d_async::mesh(), 4, 32);
}

TEST_CASE("traffic: pipeline recipes (stage collectives, pp sums and the schedule's sends), on every rank") {
  check_recipe<recipes::debug_pp>("debug_pp (1F1B)", 2, {}, 4, 32);
  check_recipe<recipes::debug_3d>("debug_3d (Interleaved1F1B)", 8, {}, 4, 32);
  check_recipe<recipes::debug_3d_zbv>("debug_3d_zbv (ZBV)", 8, {}, 4, 32, 2);  // with accumulation
  check_recipe<tiny_recipes::pp_hsdp>("tiny pp x hsdp (GPipe)", 8, {}, 8, 8);
}

TEST_CASE("traffic: resharding modes, mixed precision, uneven vocabulary and sequence") {
  using namespace tiny_recipes;
  check_recipe<fsdp_never>("tiny reshard never", 2, fsdp_never::mesh(2), 4, 8);
  check_recipe<fsdp_tp_2d>("tiny all_but_last, SP, LP", 4, fsdp_tp_2d::mesh(4), 4, 7);
  check_recipe<fsdp_tp_bf16>("tiny bf16 params", 4, fsdp_tp_bf16::mesh(4), 4, 8);
  check_recipe<tp_plain>("tiny TP, vocab 97 on 2", 2, tp_plain::mesh(2), 2, 8);
}

TEST_CASE("traffic: activation checkpointing's recomputes redo their collectives, and the estimate counts them") {
  using namespace tiny_recipes;
  check_recipe<recipes::debug_2d_ac>("debug_2d_ac (selective op)", 4, recipes::debug_2d_ac::mesh(4), 4, 32);
  check_recipe<tp_plain_full>("tiny TP, full checkpointing", 2, tp_plain_full::mesh(2), 2, 8);
  check_recipe<fsdp_tp_2d_op>("tiny 2-D, selective op", 4, fsdp_tp_2d_op::mesh(4), 4, 7);
  check_recipe<pp_3d_layer2>("tiny 3-D, selective_layer<2>", 8, {}, 8, 8);
  check_recipe<pp_zbv_op>("tiny pp x tp (ZBV), selective op", 4, {}, 8, 8);
  // the recomputes move more than the same recipe without checkpointing
  static_assert(estimate_traffic<tp_plain_full>(mesh_shape{1, {2}}, 2, 8).activations >
                estimate_traffic<tp_plain>(mesh_shape{1, {2}}, 2, 8).activations);
}

TEST_CASE("traffic: async TP's rings are point-to-point sends on tp, and the estimate counts them") {
  using namespace tiny_recipes;
  check_recipe<tp_async<2>>("tiny tp async", 2, {}, 2, 8);
  check_recipe<fsdp_tp_async_op>("tiny fsdp x tp async, op AC", 4, {}, 4, 8);
  check_recipe<tp_async_full>("tiny tp async, full AC", 2, {}, 2, 8);
  check_recipe<pp_zbv_tp_async>("tiny pp (ZBV) x tp async", 4, {}, 8, 8);
  check_recipe<cp_tp_async>("tiny cp x tp async", 4, {}, 2, 16);
  check_recipe<tp_async_f8_rows>("tiny tp async, Float8 wo, w2", 2, {}, 2, 8);
  // rowwise: every region in parts, each part's amax all-reduces apart (3 sequences: 6 parts)
  check_recipe<tp_async_f8_rowwise>("tiny tp async, Float8 rowwise", 2, {}, 3, 8);
  check_recipe<fsdp_tp_async_f8_op>("tiny fsdp x tp async, rowwise, op AC", 4, {}, 4, 8);
  // the same bytes as the collectives they replace, now sent point to point
  constexpr traffic_estimate sync = estimate_traffic<tp_sp_lp>(mesh_shape{1, {2}}, 2, 8);
  constexpr traffic_estimate async = estimate_traffic<tp_async<2>>(mesh_shape{1, {2}}, 2, 8);
  static_assert(sync.total() == async.total() && sync.activations == async.activations);
  static_assert(async.by_axes.at(1u).sent > 0 && sync.by_axes.at(1u).sent == 0);
  static_assert(async.by_axes.at(1u).calls < sync.by_axes.at(1u).calls);
}

TEST_CASE("traffic: Float8 recipes, FP8 all-gather's e4m3 gathers and amax all-reduces included") {
  check_recipe<recipes::debug_fsdp_float8_tw>("debug_fsdp_float8_tw", 2, recipes::debug_fsdp_float8_tw::mesh(2), 4, 32);
  check_recipe<recipes::debug_fsdp_float8_tw>("debug_fsdp_float8_tw (uneven)", 3, recipes::debug_fsdp_float8_tw::mesh(3),
                                              6, 32);
  check_recipe<recipes::debug_fsdp_float8>("debug_fsdp_float8", 2, recipes::debug_fsdp_float8::mesh(2), 4, 32);
  // under TP: the amax all-reduces over tp (recomputes and W included), FP8 all-gather's amax over dp x tp
  using namespace tiny_recipes;
  check_recipe<f8_2d_tw_ag_op>("tiny 2-D tw + FP8 AG + op AC", 4, f8_2d_tw_ag_op::mesh(), 4, 8);
  check_recipe<f8_tp_rowwise_full>("tiny TP rowwise + full AC", 2, f8_tp_rowwise_full::mesh(), 2, 8);
  check_recipe<f8_pp_zbv_tp_tw>("tiny pp x tp (ZBV) tensorwise", 4, {}, 8, 8);
  // FP8 all-gather moves the block linears in one byte per element instead of bf16's two:
  // on 2 ranks each of the 2 gathers per step moves half of every linear, and adds one
  // all-reduce of a float (4 bytes of bus traffic on 2 ranks) per linear and gather
  constexpr std::int64_t L = 6, linears = L * (4 * 256 * 256 + 3 * 256 * 768);
  constexpr traffic_estimate bf = estimate_traffic<recipes::debug_fsdp_bf16>(mesh_shape{1, {2}}, 4, 32);
  constexpr traffic_estimate f8 = estimate_traffic<recipes::debug_fsdp_float8_tw>(mesh_shape{1, {2}}, 4, 32);
  static_assert(bf.parameters - f8.parameters == 2 * linears * (2 - 1) / 2 - 2 * 7 * L * 4);
  static_assert(bf.gradients == f8.gradients && bf.activations == f8.activations);
  std::printf("FP8 all-gather, debugmodel on 2 ranks: parameter gathers %.3f MiB/step (bf16: %.3f MiB, ratio %.3f; "
              "block linears alone 0.5 plus the amax all-reduces)\n",
              static_cast<double>(f8.parameters) / (1 << 20), static_cast<double>(bf.parameters) / (1 << 20),
              static_cast<double>(f8.parameters) / static_cast<double>(bf.parameters));
}

TEST_CASE("FSDP prefetch: the next block's all-gathers are in flight while this block's TP calls run") {
  // With debug_2d every rank's recorder shows, for a prefetched dp all-gather, TP calls
  // (over tp) issued after it and before anyone waited for it. A synchronous prefetch
  // waits for each gather before the next call is issued, so no such pair exists.
  const auto results = run<recipes::debug_2d>(4, recipes::debug_2d::mesh(4), 4, 32);
  for (const rank_result& r : results) {
    int overlapped = 0;
    for (std::size_t a = 0; a < r.step.size(); ++a) {
      const auto& g = r.step[a];
      if (g.desc.kind != comm::call_kind::all_gather || g.start_us < 0) continue;
      for (std::size_t b = a + 1; b < r.step.size(); ++b) {
        const auto& t = r.step[b];
        if (t.group != g.group && t.enqueue_us < g.start_us) {
          ++overlapped;
          break;
        }
      }
    }
    INFO("rank " << r.rank);
    CHECK(overlapped >= recipes::debug_2d::model::config.n_layers);  // every block's prefetch, forward and backward
  }
}

namespace {
/// One redistribute Src -> Dst of a `g` tensor on the threads ranks of mesh M: on every
/// rank, the estimate of its plan (steps, or fused all_to_all runs as one exchange) equals
/// what its flight recorder saw.
template <class M, class Src, class Dst>
void check_redistribute(const shape_t& g) {
  comm::run_threads(static_cast<int>(M{}.world_size()), [&](comm::threads_communicator& c) {
    comm::flight_recorder rec(c, {.capacity = 1 << 10, .dump_on_error = false});
    device_mesh<M> dm(M{}, rec);
    auto x = dist_tensor<float, Src>::distribute(dm, g, [](const index_t& i) { return float(i[0] + i[1]); });
    (void)x.template redistribute<Dst>();  // makes the groups
    const std::uint64_t since = rec.recorded();
    (void)x.template redistribute<Dst>();
    const auto entries = rec.entries();
    const traffic_by_axes measured = measured_traffic(entries, dm.shape(), since);
    traffic_estimate e;
    std::int64_t bytes = 0;
    detail::add_plan_traffic<Src, Dst, float>(e, bytes, dm.shape(), g, 1, cost_model{}, dm.coords());
    INFO(Src::str() << " -> " << Dst::str() << " on rank " << c.rank() << ": measured " << measured.to_string(M::names)
                    << " vs estimate " << e.by_axes.to_string(M::names));
    CHECK(measured.same_as(e.by_axes));
    CHECK(bytes == e.by_axes.bytes());
  });
}
}  // namespace

TEST_CASE("traffic: a plan whose all_to_all steps run as one exchange (even, uneven, point-to-point)") {
  using M22 = mesh<axis<"a", 2>, axis<"b", 2>>;
  using M23 = mesh<axis<"a", 2>, axis<"b", 3>>;
  static_assert(plan_t<layout_t<M22, 2, dim<0, "a">, dim<1, "b">>, layout_t<M22, 2, dim<0, "b">, dim<1, "a">>>::runs[0].fused());
  check_redistribute<M22, layout_t<M22, 2, dim<0, "a">, dim<1, "b">>, layout_t<M22, 2, dim<0, "b">, dim<1, "a">>>({64, 64});
  check_redistribute<M23, layout_t<M23, 2, dim<0, "a">, dim<1, "b">>, layout_t<M23, 2, dim<0, "b">, dim<1, "a">>>({12, 18});
  check_redistribute<M23, layout_t<M23, 2, dim<0, "a">, dim<1, "b">>, layout_t<M23, 2, dim<0, "b">, dim<1, "a">>>({7, 5});
  check_redistribute<M22, layout_t<M22, 2, dim<0, "a", "b">>, layout_t<M22, 2, dim<0, "b", "a">>>({64, 8});
}
