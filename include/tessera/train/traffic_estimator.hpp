// tessera/train/traffic_estimator.hpp: the bytes each rank moves in one training step of a
// recipe, as the plans' cost model counts them, and the same figure measured from a flight
// recorder.
//
//   constexpr auto t = tessera::estimate_traffic<my_recipe>(mesh_shape, global_batch, seq_len);
//   std::puts(t.to_string(my_recipe::mesh::names).c_str());
//
// The estimate walks a step as tessera::train::parallel_llama runs it and adds, for every
// plan the step executes, each collective step's bus bytes from tessera::cost_of (nccl-tests'
// convention: S (n-1)/n, 2 S (n-1)/n for all_reduce; buffers of uneven shards padded to the
// largest rank's), by purpose and by the group of mesh axes it runs over:
//   parameters   the FSDP unshard plan (stored -> computed layout) of every parameter, in
//                each forward, and again in backward for a block that was resharded after
//                forward (reshard::always; all_but_last: all blocks but the last; never:
//                none; the root unit -- embedding, final norm, output -- stays gathered);
//                in bf16 under mixed_precision<bf16, ...>;
//   gradients    the plan gradient -> stored layout of every parameter, once per backward;
//   activations  per forward + backward, TP's residual -> replicated (before q/k/v and
//                w1/w3, before the output layer; 2L+1 forward and 2L+1 backward) and
//                partial -> residual (after wo and w2, after the embedding; the same
//                count), and either the logits' vocabulary gather (one forward) or, under
//                loss parallel, the row statistics' reductions ([B, T, 1] max, [B, T, 2] sum);
//   scalars      the loss mean over the batch axes (per micro-batch) and the gradient
//                norm's sums over the axes each TP style's blocks are split over;
//   pipeline     under pipeline_parallel, the sends of activations and input gradients
//                between stages (the lowered schedule's SEND_F / SEND_B of this rank);
//   context      under context_parallel, ring attention's K/V blocks over cp in each
//                attention forward (recomputes included) and backward (add_cp_traffic).
// Under async TP (tensor_parallel's async_tp) the blocks' TP activation moves are ring sends
// over tp (async_tp_moves, add_ring_traffic): the same bytes as the collectives, in
// activations, counted as point-to-point sends. The modelled time counts a point-to-point
// send as a call and a hop plus its bytes at the axis's bandwidth (sends_us: the pipeline's,
// ring attention's and async TP's); what the sends overlap is not modelled.
// Under pipeline_parallel the walk follows train/pipeline_stages.hpp: only this rank's
// stages, on the stage's mesh (pp collapsed); every local parameter gathered once and its
// gradient reduced once per step; TP's activation plans per pipeline microbatch for each
// local stage's parts; the loss and the norm summed over the stage's axes and then over pp.
// Collectives over a group of one rank move nothing and are not counted.
// measured_traffic() (train/traffic_by_axes.hpp) sums bus bytes per axis group over a
// flight recorder's entries, so a test (tests/parallel/test_traffic.cpp) and
// bench/train/traffic.cpp compare the two.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <tessera/layout/layout.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/model/llama_float8.hpp>
#include <tessera/model/llama_params.hpp>
#include <tessera/parallel/context_parallel.hpp>
#include <tessera/parallel/layouts.hpp>
#include <tessera/parallel/llama_plan.hpp>
#include <tessera/parallel/pipeline_parallel.hpp>
#include <tessera/plan/cost_model.hpp>
#include <tessera/plan/plan.hpp>
#include <tessera/tensor/dtype.hpp>
#include <tessera/train/recipe.hpp>
#include <tessera/train/traffic_by_axes.hpp>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera {

/// Per-rank bus bytes of one training step (see the header comment).
struct traffic_estimate {
  std::int64_t parameters = 0, gradients = 0, activations = 0, scalars = 0;
  std::int64_t pipeline = 0;  ///< pipeline_parallel's point-to-point sends
  std::int64_t context = 0;   ///< context_parallel's K/V blocks (all-gathers and reduce-scatters, or ring sends)
  traffic_by_axes by_axes;
  double time_us = 0;  ///< modelled time of the collectives at the cost model's link speeds

  constexpr std::int64_t total() const {
    return parameters + gradients + activations + scalars + pipeline + context;
  }

  std::string to_string(std::span<const std::string_view> names) const {
    auto line = [](const char* what, std::int64_t b) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "  %-34s %10.3f MiB  (%lld B)\n", what, static_cast<double>(b) / (1 << 20),
                    static_cast<long long>(b));
      return std::string(buf);
    };
    std::string s = "communication per rank per step (plans' cost model, bus bytes):\n";
    s += line("FSDP parameter gathers", parameters);
    s += line("gradient reductions", gradients);
    s += line("TP activations", activations);
    s += line("loss and gradient-norm scalars", scalars);
    if (pipeline) s += line("pipeline sends between stages", pipeline);
    if (context) s += line("context parallel's K/V blocks", context);
    s += line("total", total());
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f us", time_us);
    s += "  by mesh axes: " + by_axes.to_string(names) + "\n  modelled time at the cost model's links: " + buf + "\n";
    return s;
  }
};

namespace detail {

/// The axes of `g` along which its ranks differ (of size > 1), as measured_traffic()
/// keys a recorded call.
constexpr unsigned moving_axes(const mesh_shape& m, const axis_group& g) {
  unsigned mask = 0;
  for (int i = 0; i < g.n; ++i)
    if (m[g[i]] > 1) mask |= 1u << g[i];
  return mask;
}

/// Adds `times` executions of plan_t<Src, Dst, T> on a tensor of shape `g` to `purpose`:
/// its steps, or for a run of consecutive all_to_all steps the one exchange it runs as
/// (plan/runs.hpp).
template <class Src, class Dst, class T>
constexpr void add_plan_traffic(traffic_estimate& e, std::int64_t& purpose, const mesh_shape& m, const shape_t& g,
                                std::int64_t times, const cost_model& cm, const coords_t& at) {
  using P = plan_t<Src, Dst, T>;
  constexpr auto elem = static_cast<std::int64_t>(sizeof(T));
  for (int r = 0; r < P::runs.size(); ++r) {
    const step_run& run = P::runs[r];
    const layout_spec& before = P::layouts[static_cast<std::size_t>(run.begin)];
    const layout_spec& after = P::layouts[static_cast<std::size_t>(run.end)];
    if (run.fused()) {
      const exchange_cost c = exchange_traffic(before, after, run.group, m, g, elem, cm, at);
      if (c.bus_bytes == 0 && c.calls == 0) continue;  // this rank keeps its block
      purpose += times * c.bus_bytes;
      e.by_axes.add(moving_axes(m, run.group), times * c.bus_bytes, times * c.calls, c.calls ? 0 : times * c.bus_bytes);
      e.time_us += static_cast<double>(times) * c.time_us;
      continue;
    }
    const plan_step& s = P::value[run.begin];
    if (!is_collective(s.kind) || group_size(m, s.group) == 1) continue;  // moves nothing
    const step_cost c = cost_of(s, before, after, m, g, elem, cm, &at);
    purpose += times * c.bus_bytes;
    e.by_axes.add(moving_axes(m, s.group), times * c.bus_bytes, times);
    e.time_us += static_cast<double>(times) * c.time_us;
  }
}

}  // namespace detail

namespace detail {
/// The head's traffic under a split vocabulary, `times` passes over [B, T]: loss parallel's
/// row statistics, or the logits' gather (llama_model calls these hooks).
template <class Types, parallel_spec PS>
constexpr void add_head_traffic(traffic_estimate& e, const mesh_shape& m, std::int64_t B, std::int64_t T,
                                std::int64_t V, std::int64_t times, const cost_model& cm, const coords_t& at) {
  constexpr int tp = PS.tp;  // a compile-time copy (clang 14 can misread PS's members at run time)
  if (!(tp >= 0 && m[tp] > 1)) return;
  if constexpr (PS.loss_parallel) {
    using stat = typename Types::row_stat;
    add_plan_traffic<typename Types::template row_stat_partial<reduce::max>, stat, float>(
        e, e.activations, m, shape_t{B, T, 1}, times, cm, at);
    add_plan_traffic<typename Types::template row_stat_partial<reduce::sum>, stat, float>(
        e, e.activations, m, shape_t{B, T, 2}, times, cm, at);
  } else {
    add_plan_traffic<typename Types::vocab, typename Types::replicated, float>(e, e.activations, m,
                                                                               shape_t{B, T, V}, times, cm, at);
  }
}
/// The gradient norm: one sum per TP style present, over the axes its blocks are split over.
template <class Types, parallel_spec PS>
constexpr void add_norm_traffic(traffic_estimate& e, const mesh_shape& m, const bool (&style_used)[4],
                                const cost_model& cm, const coords_t& at) {
  for (int s = 0; s < 4; ++s)
    if (style_used[s])
      parallel::visit_style(static_cast<tp_style>(s), [&]<tp_style S, int R>() {
        add_plan_traffic<typename Types::template scalar_partial<parallel::norm_mask(PS, S, R)>,
                         typename Types::scalar, double>(e, e.scalars, m, shape_t{1}, 1, cm, at);
      });
}
}  // namespace detail

namespace detail {
// (a class template: g++ 12 fails on a function template's local constexpr spec used in
// the template arguments of a generic lambda's body)
/// A parameter's FSDP gather `times` times: its unshard plan in the gathered dtype, or under
/// float8's FP8 all-gather (fp8: the parameter is a Float8 linear) in e4m3 codes after one
/// all-reduce of its amax (a float) over the FSDP and TP axes (parallel/fsdp.hpp, gather_fp8).
template <class Types, parallel_spec Ps, class PL>
constexpr void add_param_gathers(traffic_estimate& e, const mesh_shape& m, const shape_t& g, bool fp8,
                                 std::int64_t times, const cost_model& cm, const coords_t& at) {
  using param_t = std::conditional_t<Ps.bf16_params, bf16, float>;
  if constexpr (Ps.float8.all_gather && Ps.dp_shard >= 0) {
    if (fp8) {
      add_plan_traffic<typename PL::storage, typename PL::compute, std::uint8_t>(e, e.parameters, m, g, times, cm, at);
      constexpr unsigned amax_axes = (1u << Ps.dp_shard) | (Ps.cp >= 0 ? 1u << Ps.cp : 0u) | (Ps.tp >= 0 ? 1u << Ps.tp : 0u);
      add_plan_traffic<typename Types::template scalar_partial<amax_axes>, typename Types::scalar, float>(
          e, e.parameters, m, shape_t{1}, times, cm, at);
      return;
    }
  }
  add_plan_traffic<typename PL::storage, typename PL::compute, param_t>(e, e.parameters, m, g, times, cm, at);
}

/// Float8 under tensor parallel: the amax all-reduces (max over tp) of the casts whose scale
/// groups span the TP ranks (model/llama_float8.hpp), for blocks [first, last), each run
/// `times` times: every covered linear's three GEMMs, and its output GEMM again in the blocks
/// where activation checkpointing recomputes it.
template <class Types, parallel_spec Ps>
constexpr void add_f8_amax_traffic(traffic_estimate& e, const mesh_shape& m, const llama_dims& d, std::int64_t first,
                                   std::int64_t last, std::int64_t times, const cost_model& cm, const coords_t& at) {
  if constexpr (Ps.tp >= 0 && Ps.float8.on) {
    if (!d.split || !d.f8.any()) return;
    // (copies made at compile time: clang 14 reads a member of the template parameter object
    // Ps wrongly at run time here -- sequence_parallel as false)
    constexpr ac_settings ac = Ps.ac;
    constexpr bool sp = Ps.sequence_parallel;
    std::int64_t redone[ac_op_count] = {};  // the blocks that recompute each group
    for (std::int64_t l = first; l < last; ++l) {
      const std::uint16_t keep = ac_keep_mask(ac, l, sp);
      for (int o = 0; o < ac_op_count; ++o)
        if (!(keep & (1u << o))) ++redone[o];
    }
    const std::int64_t blocks = last - first;
    // (a region async TP runs in parts reduces the whole tensors' amaxes once, before its
    // ring: the same all-reduces as the region run whole; llama_block_regions.hpp)
    for (param_role r : block_linears) {
      const ac_op o = ac_op_of(r);
      const std::int64_t outputs = blocks + (o == ac_op::count ? 0 : redone[static_cast<int>(o)]);
      const std::pair<cpu::f8_gemm, std::int64_t> runs[] = {
          {cpu::f8_gemm::output, outputs}, {cpu::f8_gemm::grad_input, blocks}, {cpu::f8_gemm::grad_weight, blocks}};
      for (const auto& run : runs)
        for (std::int64_t floats : f8_amax_reductions(r, run.first, d))
          if (floats > 0 && run.second > 0)
            add_plan_traffic<typename Types::template scalar_partial<(1u << Ps.tp)>, typename Types::scalar, float>(
                e, e.activations, m, shape_t{floats}, times * run.second, cm, at);
    }
  }
}

/// The modelled time of `sends` point-to-point sends over `axis` moving `bytes` together: each
/// a call (the cost model's base latency) and one hop, the bytes at the axis's bandwidth. What
/// the sends overlap (ring attention's blocks, async TP's GEMMs) is not modelled.
constexpr double sends_us(const cost_model& cm, int axis, std::int64_t sends, std::int64_t bytes) {
  const auto a = static_cast<std::size_t>(axis);
  return static_cast<double>(sends) * (cm.base_us + cm.hop_us[a]) + static_cast<double>(bytes) / (cm.GBps[a] * 1e3);
}

/// Context parallel's attention (parallel/cp_attention.hpp): `forwards` forward and
/// `backwards` backward passes of one block's attention on a rank's [d.B, d.T] tokens.
/// all-gather rotation: K and V gathered in each pass, dK and dV reduce-scattered in backward;
/// ring: cp - 1 sends of K and V per pass, and cp sends of dK and dV in backward.
template <parallel_spec Ps>
constexpr void add_cp_traffic(traffic_estimate& e, const mesh_shape& m, const llama_dims& d, std::int64_t forwards,
                              std::int64_t backwards, const cost_model& cm) {
  if constexpr (Ps.cp >= 0) {
    constexpr int axis = Ps.cp;  // compile-time copies, as in add_f8_amax_traffic
    constexpr bool ag = Ps.context.rotation == cp_rotation_kind::allgather;
    const std::int64_t n = m[axis];
    if (n <= 1) return;
    const std::int64_t kv = d.B * d.T * d.kv_heads * d.hd * 4;  // bytes of this rank's K (or V)
    const std::int64_t calls = ag ? 2 * forwards + 4 * backwards : 0;
    const std::int64_t bytes = ag ? calls * kv * (n - 1)
                                  : 2 * kv * ((forwards + backwards) * (n - 1) + backwards * n);
    e.context += bytes;
    e.by_axes.add(1u << axis, bytes, calls, ag ? 0 : bytes);
    if (!ag) e.time_us += sends_us(cm, axis, 2 * ((forwards + backwards) * (n - 1) + backwards * n), bytes);
  }
}

/// Async TP (tensor_parallel's async_tp): of the blocks [first, last)'s TP activation moves in
/// one step, those that run as ring steps -- each region's gather and reduce unless it holds
/// a Float8 tensorwise linear (model/llama_block_regions.hpp), and the recomputes' of the
/// regions that overlap. A block has four regions (q/k/v, wo, w1/w3, w2), each one gather and one reduce
/// per step (forward and backward).
struct ring_moves {
  std::int64_t gathers = 0, reduces = 0;
};
constexpr ring_moves async_tp_moves(const parallel_spec& ps, const f8_linears& f8, std::int64_t first,
                                    std::int64_t last) {
  ring_moves r;
  if (!ps.async_tp || ps.tp < 0) return r;
  std::int64_t each = 0;
  for (tp_region g : tp_regions) each += !runs_whole(f8, g);
  const bool qkv = !runs_whole(f8, tp_region::qkv), o = !runs_whole(f8, tp_region::wo);
  const bool w13 = !runs_whole(f8, tp_region::w13);
  for (std::int64_t l = first; l < last; ++l) {
    r.gathers += each, r.reduces += each;
    const std::uint16_t keep = ac_keep_mask(ps.ac, l, ps.sequence_parallel);
    if (keep == ac_keep_all) continue;
    r.gathers += (!(keep & ac_bit(ac_op::attention_norm)) && qkv) + (!(keep & ac_bit(ac_op::ffn_norm)) && w13);
    r.reduces += !(keep & ac_bit(ac_op::wo)) && o;
  }
  return r;
}
/// Adds `times` x the ring moves of async TP over the tp axis of mesh `m`, each p - 1 sends
/// of a part of this rank's residual stream (d's [Nr, D]); nothing without async TP.
template <parallel_spec Ps>
constexpr void add_ring_traffic(traffic_estimate& e, const mesh_shape& m, const ring_moves& ring,
                                const llama_dims& d, std::int64_t times, const cost_model& cm) {
  if constexpr (Ps.async_tp) {
    constexpr int tp = Ps.tp;  // a compile-time copy, as in add_f8_amax_traffic
    const std::int64_t p = m[tp], n = ring.gathers + ring.reduces;
    if (p <= 1 || n == 0) return;
    const std::int64_t bytes = times * n * (p - 1) * d.Nr() * d.D * 4;
    e.activations += bytes;
    e.by_axes.add_sent(1u << tp, bytes);
    e.time_us += sends_us(cm, tp, times * n * (p - 1), bytes);
  }
}

template <class Recipe>
struct traffic_walk {
  using traits = recipe_traits<Recipe>;
  using M = typename traits::mesh_type;
  static constexpr parallel_spec ps = traits::spec;
  static constexpr llama_config cfg = traits::config;
  using types = parallel::layout_types<M, ps>;
  using residual = typename types::residual;
  using replicated = typename types::replicated;
  using partial = typename types::partial;
  using scalar = typename types::scalar;
  static constexpr f8_linears f8 = f8_linears_of(cfg, ps.float8);  ///< the Float8 linears

  static constexpr traffic_estimate run(const mesh_shape& shape, std::int64_t batch, std::int64_t seq, std::int64_t mb,
                                        const cost_model& cm, const coords_t& at) {
    const std::int64_t L = cfg.n_layers;
    traffic_estimate e;
    // parameters and gradients: every block has the same shapes, so each block parameter is
    // costed once and counted for all L blocks (this keeps 405B-sized configs within the
    // compilers' constexpr step limits); the root's parameters are gathered once per pass
    bool style_used[4] = {};
    // gathers per pass of all blocks together: once in forward, again in backward for a
    // block resharded after forward
    const std::int64_t block_gathers = ps.reshard_mode == reshard::never                   ? L
                                       : ps.reshard_mode == reshard::all_but_last && L > 0 ? 2 * L - 1
                                                                                           : 2 * L;
    const std::int64_t first_block = 1, root_rest = 1 + L * n_block_params;
    for (std::int64_t i = 0; i < param_tensor_count(cfg); ++i) {
      if (i > first_block + n_block_params - 1 && i < root_rest) continue;  // blocks 1..L-1: counted with block 0
      const param_entry p = param_at(cfg, i);
      const shape_t g = param_global_shape(p);
      style_used[static_cast<int>(param_style(p))] = true;
      const bool block = p.layer >= 0;
      const std::int64_t gathers = block ? block_gathers : 1, reductions = block ? L : 1;
      parallel::visit_style(param_style(p), [&]<tp_style S, int R>() {
        using PL = typename types::template param<S, R>;
        add_param_gathers<types, ps, PL>(e, shape, g, f8.covers(p.role), mb * gathers, cm, at);
        add_plan_traffic<typename PL::grad, typename PL::storage, float>(e, e.gradients, shape, g, mb * reductions, cm,
                                                                         at);
      });
    }
    // TP activations [B, T, X] (the plans are empty without TP)
    const shape_t act{batch, seq, cfg.dim};
    // (and what activation checkpointing's recomputes redo)
    // (and what activation checkpointing's recomputes redo); under async TP the blocks' ring
    constexpr ac_collectives rc = ac_recompute_collectives(ps.ac, 0, cfg.n_layers, ps.sequence_parallel);
    constexpr ring_moves ring = async_tp_moves(ps, f8, 0, cfg.n_layers);
    add_plan_traffic<residual, replicated, float>(e, e.activations, shape, act,
                                                  mb * (4 * L + 2 + rc.gathers - ring.gathers), cm, at);
    add_plan_traffic<partial, residual, float>(e, e.activations, shape, act,
                                               mb * (4 * L + 2 + rc.reduces - ring.reduces), cm, at);
    add_head_traffic<types, ps>(e, shape, batch, seq, cfg.vocab_size, mb, cm, at);
    // this rank's tokens (under context parallel T / cp of each sequence)
    const box tokens = local_box(parallel::batch_spec(ps, 2), shape, shape_t{batch, seq}, at);
    const llama_dims d = dims_of(cfg, parallel::llama_shard_of(cfg, ps, shape, at), tokens.size[0], tokens.size[1]);
    add_ring_traffic<ps>(e, shape, ring, d, mb, cm);
    add_f8_amax_traffic<types, ps>(e, shape, d, 0, L, mb, cm, at);  // Float8's amax all-reduces over tp
    add_cp_traffic<ps>(e, shape, d, mb * (L + rc.attentions), mb * L, cm);
    // scalars: the loss mean per micro-batch, one gradient-norm sum per TP style present
    add_plan_traffic<typename types::template scalar_partial<ps.token_mask()>, scalar, double>(e, e.scalars, shape,
                                                                                               shape_t{1}, mb, cm, at);
    add_norm_traffic<types, ps>(e, shape, style_used, cm, at);
    return e;
  }
};
}  // namespace detail

namespace detail {
/// The walk of a pipeline recipe (see the header comment).
template <class Recipe>
struct pipeline_traffic_walk {
  using traits = recipe_traits<Recipe>;
  static constexpr parallel_spec ps = traits::spec;
  static constexpr llama_config cfg = traits::config;
  using M = collapse_axis_t<typename traits::mesh_type, ps.pp>;  // the stage's mesh
  using types = parallel::layout_types<M, ps>;
  static constexpr f8_linears f8 = f8_linears_of(cfg, ps.float8);

  /// One all-reduce of a double over the pp group (parallel_llama::sum_pp).
  static constexpr void add_pp_sum(traffic_estimate& e, std::int64_t pp, std::int64_t times) {
    const std::int64_t b = 8 * 2 * (pp - 1) / pp;
    e.scalars += times * b;
    e.by_axes.add(1u << ps.pp, times * b, times);
  }

  static constexpr traffic_estimate run(const mesh_shape& shape, std::int64_t batch, std::int64_t seq, std::int64_t mb,
                                        const cost_model& cm, const coords_t& at) {
    traffic_estimate e;
    const parallel::pp_rank_view v = parallel::pp_rank_view_of(cfg, ps, shape, at);
    if (!v.ok()) return e;
    const int pp = static_cast<int>(shape[ps.pp]), me = v.me;
    const parallel::pp_plan& plan = v.plan;
    const pipeline::schedule& lowered = v.lowered;
    const mesh_shape& sm = v.mesh;
    const coords_t& sc = v.coords;
    bool style_used[4] = {};
    for (std::int64_t i = 0; i < param_tensor_count(cfg); ++i) {
      const param_entry p = param_at(cfg, i);
      style_used[static_cast<int>(param_style(p))] = true;  // the norm sums every style the model has
      if (!v.holds(p.layer, i == 0)) continue;
      const shape_t g = param_global_shape(p);
      parallel::visit_style(param_style(p), [&]<tp_style S, int R>() {
        using PL = typename types::template param<S, R>;
        add_param_gathers<types, ps, PL>(e, sm, g, f8.covers(p.role), mb, cm, sc);
        add_plan_traffic<typename PL::grad, typename PL::storage, float>(e, e.gradients, sm, g, mb, cm, sc);
      });
    }
    // one microbatch's sizes on this rank's shard (under context parallel T / cp tokens)
    const llama_shard shard = parallel::llama_shard_of(cfg, ps, sm, sc);
    const box tokens = local_box(parallel::batch_spec(ps, 2), sm, shape_t{batch, seq}, sc);
    const std::int64_t Bl = tokens.size[0];
    const llama_dims d = dims_of(cfg, shard, plan.m > 0 ? Bl / plan.m : Bl, tokens.size[1]);
    // per local stage and pipeline microbatch [B / m, T, .]: TP's activations (recomputes
    // included), Float8's amax all-reduces over tp, CP's K/V
    const std::int64_t Bg = plan.m > 0 ? batch / plan.m : batch, times = mb * plan.m;
    const shape_t act{Bg, seq, cfg.dim};
    bool head_here = false;
    for (int st = 0; st < plan.stages; ++st) {
      if (lowered.rank_of(st) != me) continue;
      const bool head = st == plan.stages - 1;
      head_here = head_here || head;
      const std::int64_t moves = 4 * plan.blocks(st) + (head ? 1 : 0) + (st == 0 ? 1 : 0);
      const ac_collectives rc =
          ac_recompute_collectives(ps.ac, plan.first_layer(st), plan.last_layer(st), ps.sequence_parallel);
      const ring_moves ring = async_tp_moves(ps, f8, plan.first_layer(st), plan.last_layer(st));
      add_plan_traffic<typename types::residual, typename types::replicated, float>(
          e, e.activations, sm, act, times * (moves + rc.gathers - ring.gathers), cm, sc);
      add_plan_traffic<typename types::partial, typename types::residual, float>(
          e, e.activations, sm, act, times * (moves + rc.reduces - ring.reduces), cm, sc);
      add_ring_traffic<ps>(e, sm, ring, d, times, cm);
      add_f8_amax_traffic<types, ps>(e, sm, d, plan.first_layer(st), plan.last_layer(st), times, cm, sc);
      add_cp_traffic<ps>(e, sm, d, times * (plan.blocks(st) + rc.attentions), times * plan.blocks(st), cm);
    }
    if (head_here) add_head_traffic<types, ps>(e, sm, Bg, seq, cfg.vocab_size, times, cm, sc);
    // the pipeline's sends: one microbatch's residual stream on this rank's TP shard
    for (const pipeline::action& a : lowered.actions[static_cast<std::size_t>(me)])
      if (a.kind == pipeline::op::SEND_F || a.kind == pipeline::op::SEND_B) {
        const std::int64_t b = d.Nr() * cfg.dim * 4;
        e.pipeline += mb * b;
        e.by_axes.add_sent(1u << ps.pp, mb * b);
        e.time_us += sends_us(cm, ps.pp, mb, mb * b);
      }
    // scalars: the loss (stage axes, then pp) per forward; the norm per style and over pp
    add_plan_traffic<typename types::template scalar_partial<ps.token_mask()>, typename types::scalar, double>(
        e, e.scalars, sm, shape_t{1}, mb, cm, sc);
    add_pp_sum(e, pp, mb);
    add_norm_traffic<types, ps>(e, sm, style_used, cm, sc);
    add_pp_sum(e, pp, 1);
    return e;
  }
};
}  // namespace detail

/// The bytes each rank moves in one optimizer step of `Recipe` on a mesh of `shape`, for
/// `micro_batches` forward + backward passes of `global_batch` sequences of `seq_len` tokens,
/// for the rank at mesh coordinates `coords`: uneven shards are padded to the largest block
/// of each group, so ranks in different groups can differ (rank 0's groups hold the largest
/// blocks).
template <class Recipe>
constexpr traffic_estimate estimate_traffic(const mesh_shape& shape, std::int64_t global_batch, std::int64_t seq_len,
                                            std::int64_t micro_batches = 1, const coords_t& coords = {},
                                            const cost_model& cm = {}) {
  if constexpr (recipe_traits<Recipe>::spec.pp >= 0)
    return detail::pipeline_traffic_walk<Recipe>::run(shape, global_batch, seq_len, micro_batches, cm, coords);
  else
    return detail::traffic_walk<Recipe>::run(shape, global_batch, seq_len, micro_batches, cm, coords);
}

}  // namespace tessera
