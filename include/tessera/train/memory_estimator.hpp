// tessera/train/memory_estimator.hpp: per-rank memory of a recipe's training step, as a
// constexpr function of the model config, the resolved policies, the mesh, the batch and
// the sequence length.
//
//   constexpr auto e = tessera::estimate_memory(tessera::llama3_8b::config, spec, mesh, 8, 8192);
//   std::puts(e.to_string().c_str());
//   constexpr auto r = tessera::estimate_memory<my_recipe>(mesh, global_batch, seq_len);
//
// It follows tessera::train::parallel_llama and llama_model step by step (see docs/memory.md):
//   parameters     the stored f32 master blocks (storage_spec: TP, then FSDP), one arena
//                  whose slots are padded to 16 elements;
//   gradients      the stored gradient blocks, an arena of the same layout;
//   optimizer      AdamW's m and v, two more arenas of that layout (basic_trainer);
//   activations    exactly the buffers llama_model allocates for the rank's local batch on
//                  its shard (llama_activation_bytes: every block's block_saved -- under
//                  activation checkpointing the groups it keeps, plus one recompute buffer --, the
//                  residuals, the head's and the shared scratch);
//   gathered       the unsharded parameters (f32 tensors) of the FSDP units alive at the peak;
//   grad_buffers   the compute-layout gradient tensors alive at the peak (the root's, kept for
//                  the whole backward, and the block's in backward), and those of the block
//                  before, whose FSDP reduce-scatters are in flight, with their outputs;
//   context        under context_parallel, ring attention's buffers (cp_attention_floats:
//                  the K/V blocks -- all cp of them and their gradients under all-gather, a
//                  held and an arriving set under ring --, one partial output, its lse and D);
//                  activations are those of the rank's T / cp tokens;
//   staging        communication buffers: device_mesh scratch slots 0-3 (run_step staging
//                  of uneven or non-contiguous all-gathers / reduce-scatters, and the
//                  intermediate block of two-step plans), the FSDP and TP runtimes' stage_
//                  vectors (and async TP's ring_: three parts of [B, T / tp, D]), the FSDP runtime's bf16 staging under mixed precision (and the bf16 buffers of a
//                  prefetched block, held from its issue to its use). These are std::vectors that grow
//                  and stay; the tracking allocator does not see them, and the estimate
//                  assumes the planner's plans for these layouts are one all-gather /
//                  reduce-scatter / all-reduce (two steps -- reduce-scatter, then
//                  all-reduce -- for HSDP's gradients and for sequence-parallel norms under
//                  FSDP). Not exact; an upper bound for the cases listed.
// Besides (not in the peak): kept_weights, the elements of the bf16 copies of its weights a
// rank keeps with bf16 operands (parallel_llama::keep_stored_weights), which the CUDA backends'
// workspace counts (model/cuda_workspace.hpp, train::device_memory_problem).
// The peak: everything persistent (parameters, gradients, optimizer states, activations,
// staging) plus the largest transient set, which is reached in the backward of the last
// block or of the one before: the root unit gathered with its gradient buffers (both held
// from the start to the end of backward), the block being differentiated gathered with its
// gradient buffers, and the next block prefetched -- every block, under reshard::never --,
// and in the block before the last also the last block's gradient buffers and the outputs of
// their reduce-scatters, in flight during its backward (sharded_params::reduce_grads).
// Not counted: small std::vectors (ids, pointers, the attention kernel's per-thread tile,
// a few KiB), the communicator's own buffers, and the allocator's rounding.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include <tessera/layout/local_shape.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_float8.hpp>
#include <tessera/model/llama_params.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/parallel/context_parallel.hpp>
#include <tessera/parallel/layouts.hpp>
#include <tessera/parallel/llama_plan.hpp>
#include <tessera/parallel/pipeline_parallel.hpp>
#include <tessera/parallel/policies.hpp>
#include <tessera/train/recipe.hpp>

namespace tessera {

/// Per-rank bytes of one training step (see the header comment for each item).
struct memory_estimate {
  std::int64_t parameters = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer = 0;
  std::int64_t activations = 0;
  std::int64_t gathered = 0;      ///< unsharded parameters alive at the peak
  std::int64_t grad_buffers = 0;  ///< compute-layout gradient tensors alive at the peak
  std::int64_t staging = 0;       ///< communication buffers (untracked std::vectors; approximate)
  std::int64_t context = 0;       ///< context parallel's attention buffers (K/V blocks, partial outputs)
  /// Elements of the bf16 copies a backend with bf16 operands keeps of the weights computed on
  /// their stored blocks (no FSDP gather; kernels/rounded_weights.hpp): counted in the CUDA
  /// backends' workspace (model/cuda_workspace.hpp), not in tracked_peak() (f32 backends keep none).
  std::int64_t kept_weights = 0;
  /// Elements of `gathered` that are bf16 gathers of weights only GEMMs read (mixed_precision<bf16,
  /// float>): on a backend whose GEMM operands are bf16 codes (cuda_bf16_kernels) the unit holds
  /// those codes, 2 bytes each, not an f32 copy (parallel/fsdp.hpp's gathered_operands), so its
  /// peak is 2 x gathered_operands bytes below tracked_peak(); f32 backends hold the copy.
  std::int64_t gathered_operands = 0;
  /// Per FSDP unit: gathered parameters and gradient buffers of one block and of the root.
  std::int64_t block_gathered = 0, root_gathered = 0, block_grad_buffers = 0, root_grad_buffers = 0;
  /// What a block's overlapped reduction holds while the next block's backward runs: the
  /// gradient buffers of its even FSDP reduce-scatters and their outputs (0 under PP, whose
  /// reductions run when the schedule says; in grad_buffers where the peak is then).
  std::int64_t block_overlapped = 0;
  std::int64_t local_batch = 0, local_seq = 0;
  llama_dims dims{};  ///< the rank's model dims for one (micro)batch (dims_of), as the step runs them

  /// The peak of what tessera's tracking allocator counts (tensors and arenas).
  constexpr std::int64_t tracked_peak() const {
    return parameters + gradients + optimizer + activations + gathered + grad_buffers + context;
  }
  constexpr std::int64_t peak() const { return tracked_peak() + staging; }

  std::string to_string() const {
    auto line = [](const char* what, std::int64_t b) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "  %-34s %12.3f GiB  (%lld B)\n", what, static_cast<double>(b) / (1 << 30),
                    static_cast<long long>(b));
      return std::string(buf);
    };
    std::string s = "memory per rank (local batch " + std::to_string(local_batch) + " x seq " +
                    std::to_string(local_seq) + "):\n";
    s += line("parameters (f32 master blocks)", parameters);
    s += line("gradients (stored blocks)", gradients);
    s += line("optimizer states (AdamW m, v)", optimizer);
    s += line("activations (kept for backward)", activations);
    s += line("gathered parameters at the peak", gathered);
    s += line("gradient buffers at the peak", grad_buffers);
    if (context) s += line("context parallel's K/V blocks", context);
    s += line("communication staging (approx.)", staging);
    s += line("peak", peak());
    return s;
  }
};

namespace detail {

constexpr std::int64_t arena_slot_elems(std::int64_t n) { return (n + 15) / 16 * 16; }

/// Context parallel's attention buffers for a rank's sizes d (0 without context_parallel).
constexpr std::int64_t context_bytes(const parallel_spec& p, const mesh_shape& m, const llama_dims& d) {
  return p.cp >= 0 ? 4 * parallel::cp_attention_floats(p.context, m[p.cp], d) : 0;
}

/// memory_estimate::kept_weights of the rank at `coords` (parallel_llama::keep_stored_weights):
/// its weights that bf16 operands multiply and that are computed on their stored blocks.
constexpr std::int64_t kept_weight_elements(const llama_config& cfg, const parallel_spec& p, const mesh_shape& m,
                                            const coords_t& coords) {
  const parallel::pp_rank_view v = parallel::pp_rank_view_of(cfg, p, m, coords);  // under PP: the stage's mesh
  if (!v.ok()) return 0;
  const f8_linears f8 = f8_linears_of(cfg, p.float8);
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < param_tensor_count(cfg); ++i) {
    const param_entry en = param_at(cfg, i);
    if (!v.holds(en.layer, i == 0) || !bf16_multiplied(cfg, f8, en)) continue;
    const int r = en.shape.is_vector() ? 1 : 2;
    if (parallel::computed_on_stored(p, param_style(en), r))
      n += local_box(parallel::storage_spec(p, param_style(en), r), v.mesh, param_global_shape(en), v.coords).numel();
  }
  return n;
}

/// One FSDP-unit's sizes and the staging its collectives need (elements / bytes).
struct unit_sizes {
  std::int64_t stored = 0;      ///< arena elements (padded)
  std::int64_t gathered = 0;    ///< bytes of gathered f32 tensors
  std::int64_t grad_buf = 0;    ///< bytes of gradient tensors
  std::int64_t slot01 = 0;      ///< bytes: device_mesh scratch slots 0 + 1 for one call
  std::int64_t slot2 = 0;       ///< bytes: the intermediate of a two-step plan
  std::int64_t stage = 0;       ///< bytes: the FSDP runtime's gradient staging (sharded_params::stage_)
  std::int64_t half = 0;        ///< bytes: bf16 staging (stored + gathered block)
  std::int64_t half_prefetch = 0;  ///< bytes: bf16 buffers of a prefetched unit (all its parameters)
  std::int64_t operands = 0;    ///< elements of gathered gemm-only weights in bf16 (memory_estimate::gathered_operands)
  std::int64_t overlapped_grads = 0;  ///< bytes: gradient buffers of the even reduce-scatters (left in flight)
  std::int64_t overlapped_out = 0;    ///< bytes: those reduce-scatters' outputs (this rank's blocks)
};

/// Adds parameter e (`gemm_only`: gemm_operand_only) to unit u.
constexpr void add_param(unit_sizes& u, const parallel_spec& p, const mesh_shape& m, const coords_t& c,
                         const param_entry& e, bool gemm_only) {
  const tp_style s = param_style(e);
  const int r = e.shape.is_vector() ? 1 : 2;
  const shape_t g = param_global_shape(e);
  const layout_spec cs = parallel::compute_spec(p, s, r), ss = parallel::storage_spec(p, s, r),
                    gs = parallel::grad_spec(p, s, r);
  const std::int64_t stored = local_box(ss, m, g, c).numel(), compute = local_box(cs, m, g, c).numel();
  u.stored += arena_slot_elems(stored);
  const bool direct_param = parallel::computed_on_stored(p, s, r), direct_grad = gs == ss;
  if (!direct_param) u.gathered += compute * 4;
  if (!(direct_param && direct_grad)) {
    u.grad_buf += compute * 4;
    u.stage = std::max(u.stage, stored * 4);
  }
  if (p.bf16_params && !direct_param) {
    u.half = std::max(u.half, (stored + compute) * 2);
    u.half_prefetch += (stored + compute) * 2;
    if (gemm_only) u.operands += compute;
  }
  // FSDP's all-gather / reduce-scatter along dim 0 of the TP-local block is staged (slot 0:
  // one block, slot 1: n blocks) when the blocks are uneven.
  if (p.dp_shard >= 0) {
    const std::int64_t n = m[p.dp_shard];
    const std::int64_t rows = local_box(cs, m, g, c).size[0], inner = compute / (rows > 0 ? rows : 1);
    const std::int64_t mx = split_max(rows, n) * inner;
    if (rows % n != 0) {
      u.slot01 = std::max(u.slot01, (n + 1) * mx * (p.bf16_params ? 2 : 4));  // the gather
      u.slot01 = std::max(u.slot01, (n + 1) * mx * 4);                        // the reduce-scatter
    }
    const bool two_step = p.dp_replicate >= 0 || parallel::grad_partial_over_tp(p, s);
    if (two_step) u.slot2 = std::max(u.slot2, stored * 4);
    // one even reduce-scatter: left in flight during the next block's backward (sharded_params::reduce_grads)
    if (!two_step && !(direct_param && direct_grad) && rows % n == 0) {
      u.overlapped_grads += compute * 4;
      u.overlapped_out += stored * 4;
    }
  }
}

/// add_param of config cfg's parameter e.
constexpr void add_param_of(unit_sizes& u, const llama_config& cfg, const parallel_spec& p, const mesh_shape& m,
                            const coords_t& c, const param_entry& e) {
  add_param(u, p, m, c, e, gemm_operand_only(cfg, f8_linears_of(cfg, p.float8), e));
}
constexpr unit_sizes block_unit(const llama_config& cfg, const parallel_spec& p, const mesh_shape& m,
                                const coords_t& c) {
  unit_sizes u;
  for (param_role role : block_roles) add_param_of(u, cfg, p, m, c, param_entry{role, 0, shape_of(cfg, role)});
  return u;
}
constexpr unit_sizes root_unit(const llama_config& cfg, const parallel_spec& p, const mesh_shape& m,
                               const coords_t& c) {
  unit_sizes u;
  add_param_of(u, cfg, p, m, c, param_at(cfg, 0));
  for (std::int64_t i = 1 + cfg.n_layers * n_block_params; i < param_tensor_count(cfg); ++i)
    add_param_of(u, cfg, p, m, c, param_at(cfg, i));
  return u;
}

/// Adds the TP runtime's staging for activations of a batch of dims `d` (tp size P): the
/// sequence-parallel gather / reduce-scatter (staged unless one sequence splits evenly),
/// the logits' vocabulary gather, loss parallel's in-place row statistics, and under async TP
/// (`ring`) the ring's three parts of [B, T / P, D] (parallel/tensor_parallel.hpp) and, with
/// Float8 rowwise, the whole tensors' amaxes of a region in parts (f8_part_amax_floats).
constexpr void add_activation_staging(std::int64_t& slot01, std::int64_t& stage, const llama_dims& d, std::int64_t P,
                                      bool ring) {
  const std::int64_t N = d.N();
  if (ring && d.seq_split) stage += 3 * d.Nr() * d.D * 4 + 4 * f8_part_amax_floats(d);
  if (d.seq_split && (d.B > 1 || d.T % P != 0)) slot01 = std::max(slot01, (P + 1) * d.B * split_max(d.T, P) * d.D * 4);
  if (d.gather_logits && N > 1) slot01 = std::max(slot01, (P + 1) * N * split_max(d.V, P) * 4);
  if (d.vocab_loss) stage += 2 * N * 4;
}

/// The peak bytes of the microbatches' activations a pp rank keeps in flight, walking its
/// list of the lowered schedule: F makes a stage's activations, I adds what W needs, B and
/// W free them (train/pipeline_stages.hpp does exactly this).
constexpr std::int64_t pipeline_activation_peak(const parallel::pp_plan& plan, const pipeline::schedule& s, int rank,
                                                const llama_dims& d, const ac_settings& ac = {}, bool sp = false) {
  std::int64_t live = 0, peak = 0;
  for (const pipeline::action& a : s.actions[static_cast<std::size_t>(rank)]) {
    const int st = a.stage;
    const bool embedding = st == 0, head = st == plan.stages - 1;
    const std::int64_t ctx = llama_stage_activation_bytes(d, plan.first_layer(st), plan.last_layer(st), head, ac, sp),
                       def = llama_stage_deferred_bytes(d, plan.first_layer(st), plan.last_layer(st), embedding, head,
                                                        ac, sp);
    switch (a.kind) {
      case pipeline::op::F: live += ctx; break;
      case pipeline::op::I: live += def; break;
      case pipeline::op::B: live -= ctx; break;
      case pipeline::op::W: live -= ctx + def; break;
      default: break;
    }
    peak = std::max(peak, live);
  }
  return peak;
}

/// A pipeline recipe's memory on the rank at `coords` (see estimate_memory): the stages the
/// schedule places on its pp coordinate, all gathered with their gradient buffers from
/// their UNSHARD to their RESHARD, and the peak of the microbatches' activations in flight.
constexpr memory_estimate estimate_pipeline_memory(const llama_config& cfg, const parallel_spec& p,
                                                   const mesh_shape& m, std::int64_t global_batch,
                                                   std::int64_t seq_len, const coords_t& coords) {
  memory_estimate e;
  const parallel::pp_rank_view v = parallel::pp_rank_view_of(cfg, p, m, coords);
  if (!v.ok()) return e;
  const parallel::pp_plan& plan = v.plan;
  const mesh_shape& sm = v.mesh;  // the stage's mesh: pp collapsed (train/parallel_llama.hpp)
  const coords_t& sc = v.coords;
  unit_sizes u;  // every local parameter in one: sums of sizes, maxima of staging
  for (std::int64_t i = 0; i < param_tensor_count(cfg); ++i) {
    const param_entry en = param_at(cfg, i);
    if (v.holds(en.layer, i == 0)) add_param_of(u, cfg, p, sm, sc, en);
  }
  e.parameters = e.gradients = u.stored * 4;
  e.optimizer = 2 * u.stored * 4;
  e.gathered = u.gathered, e.grad_buffers = u.grad_buf, e.gathered_operands = u.operands;
  e.block_gathered = e.root_gathered = e.block_grad_buffers = e.root_grad_buffers = 0;
  const llama_shard shard = parallel::llama_shard_of(cfg, p, sm, sc);
  const box tokens = local_box(parallel::batch_spec(p, 2), sm, shape_t{global_batch, seq_len}, sc);
  const std::int64_t B = tokens.size[0];
  const std::int64_t Bm = plan.m > 0 && B % plan.m == 0 ? B / plan.m : B;
  const llama_dims d = dims_of(cfg, shard, Bm, tokens.size[1]);
  e.context = context_bytes(p, sm, d);
  e.local_batch = Bm, e.local_seq = d.Tl, e.dims = d;
  e.activations = pipeline_activation_peak(plan, v.lowered, v.me, d, p.ac, p.sequence_parallel) +
                  4 * total_of(block_scratch_sizes(d)) + llama_recompute_bytes(d, p.ac, cfg.n_layers, p.sequence_parallel);
  // staging as without a pipeline, for one microbatch (no prefetch under PP)
  std::int64_t slot01 = u.slot01, stage = u.stage;
  add_activation_staging(slot01, stage, d, p.tp >= 0 ? m[p.tp] : 1, p.async_tp);
  e.staging = slot01 + u.slot2 + stage + u.half;
  e.kept_weights = kept_weight_elements(cfg, p, m, coords);
  return e;
}

}  // namespace detail

/// Per-rank memory of forward + backward + an AdamW step for `global_batch` sequences of
/// `seq_len` tokens, for the rank at mesh coordinates `coords` (default: rank 0, which holds
/// the largest block of every uneven split).
constexpr memory_estimate estimate_memory(const llama_config& cfg, const parallel_spec& p, const mesh_shape& m,
                                          std::int64_t global_batch, std::int64_t seq_len,
                                          const coords_t& coords = {}) {
  if (p.pp >= 0) return detail::estimate_pipeline_memory(cfg, p, m, global_batch, seq_len, coords);
  memory_estimate e;
  const detail::unit_sizes blk = detail::block_unit(cfg, p, m, coords), root = detail::root_unit(cfg, p, m, coords);
  const std::int64_t L = cfg.n_layers;
  const std::int64_t stored = L * blk.stored + root.stored;
  e.parameters = e.gradients = stored * 4;
  e.optimizer = 2 * stored * 4;
  e.block_gathered = blk.gathered, e.root_gathered = root.gathered;
  e.block_grad_buffers = blk.grad_buf, e.root_grad_buffers = root.grad_buf;
  // Backward of the last block: the root (gathered since forward, its gradients allocated
  // by its backward_begin) + block L-1 with its gradients + block L-2 prefetched; under
  // reshard::never every block is still gathered from forward.
  const std::int64_t live_blocks = p.reshard_mode == reshard::never ? L : std::min<std::int64_t>(2, L);
  e.gathered = root.gathered + live_blocks * blk.gathered;
  e.gathered_operands = root.operands + live_blocks * blk.operands;
  e.grad_buffers = root.grad_buf + blk.grad_buf;
  // Overlapped reductions (sharded_params::reduce_grads): block L-1's even reduce-scatters,
  // issued at its backward's end, add their outputs while it is still gathered; then, in
  // flight during the backward of block L-2, they hold its gradient buffers too, when block
  // L-1 is resharded (every block: under reshard::never the rest stay gathered; L = 2: block
  // 0 prefetches none).
  e.block_overlapped = blk.overlapped_grads + blk.overlapped_out;
  if (L >= 1 && blk.overlapped_out > 0) {
    e.grad_buffers += blk.overlapped_out;
    const std::int64_t live = p.reshard_mode == reshard::never ? L - 1 : std::min<std::int64_t>(2, L - 1);
    if (L >= 2 && live * blk.gathered + blk.overlapped_grads > live_blocks * blk.gathered) {
      e.gathered = root.gathered + live * blk.gathered;
      e.gathered_operands = root.operands + live * blk.operands;
      e.grad_buffers += blk.overlapped_grads;
    }
  }

  // Activations: what llama_model allocates for this rank's rows on its shard.
  const llama_shard shard = parallel::llama_shard_of(cfg, p, m, coords);
  const box tokens = local_box(parallel::batch_spec(p, 2), m, shape_t{global_batch, seq_len}, coords);
  const std::int64_t B = tokens.size[0], T = tokens.size[1];  // T: this cp rank's part of each sequence
  const llama_dims d = dims_of(cfg, shard, B, T);
  e.local_batch = B, e.local_seq = d.Tl, e.dims = d;
  e.activations = llama_activation_bytes(cfg, shard, B, T, p.ac, p.sequence_parallel);
  e.context = detail::context_bytes(p, m, d);

  // Staging: the largest call of each buffer (they grow and stay).
  std::int64_t slot01 = std::max(blk.slot01, root.slot01), slot2 = std::max(blk.slot2, root.slot2);
  std::int64_t stage = std::max(blk.stage, root.stage);  // the FSDP runtime's reduce staging
  detail::add_activation_staging(slot01, stage, d, p.tp >= 0 ? m[p.tp] : 1, p.async_tp);
  // bf16: the synchronous gathers' staging, and the prefetched block's own buffers (bound)
  e.staging = slot01 + slot2 + stage + std::max(blk.half, root.half) + (L > 1 ? blk.half_prefetch : 0);
  e.kept_weights = detail::kept_weight_elements(cfg, p, m, coords);
  return e;
}

/// Bytes of the staging arena of an asynchronous checkpoint (train::checkpointer with
/// async_mode::async) on the rank at `coords`: the f32 weights and both AdamW moments of
/// every stored block this rank writes. A block replicated over mesh axes (a norm weight
/// under TP, every block on HSDP's replicas) is written once, by its replica at coordinate
/// 0 of each of those axes; under PP a rank holds its stages' blocks only. Allocated at the
/// first save and kept (a std::vector: not in tracked_peak(); not counted by peak(), which is
/// a training step's). Sync saves write the live state and stage nothing.
constexpr std::int64_t estimate_checkpoint_staging(const llama_config& cfg, const parallel_spec& p,
                                                   const mesh_shape& m, const coords_t& coords = {}) {
  const parallel::pp_rank_view v = parallel::pp_rank_view_of(cfg, p, m, coords);  // under PP: the stage's mesh
  if (!v.ok()) return 0;
  std::int64_t bytes = 0;
  for (std::int64_t i = 0; i < param_tensor_count(cfg); ++i) {
    const param_entry en = param_at(cfg, i);
    if (!v.holds(en.layer, i == 0)) continue;
    const layout_spec ss = parallel::storage_spec(p, param_style(en), en.shape.is_vector() ? 1 : 2);
    const std::int64_t n = local_box(ss, v.mesh, param_global_shape(en), v.coords).numel();
    bool writes = n > 0;
    for (int a = 0; a < v.mesh.ndim; ++a)
      if (v.mesh[a] > 1 && !ss.is_sharded(a) && v.coords[static_cast<std::size_t>(a)] != 0) writes = false;
    if (writes) bytes += 3 * n * 4;
  }
  return bytes;
}

/// The same for a recipe on a mesh of `shape`.
template <class Recipe>
constexpr std::int64_t estimate_checkpoint_staging(const mesh_shape& shape, const coords_t& coords = {}) {
  using R = recipe_traits<Recipe>;
  return estimate_checkpoint_staging(R::config, R::spec, shape, coords);
}

/// The estimate for a recipe on a mesh of `shape` (e.g. device_mesh::shape()).
template <class Recipe>
constexpr memory_estimate estimate_memory(const mesh_shape& shape, std::int64_t global_batch, std::int64_t seq_len,
                                          const coords_t& coords = {}) {
  using R = recipe_traits<Recipe>;
  return estimate_memory(R::config, R::spec, shape, global_batch, seq_len, coords);
}

}  // namespace tessera
