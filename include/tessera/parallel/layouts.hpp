// tessera/parallel/layouts.hpp: the layouts a parallel_spec gives parameters, gradients
// and activations (constexpr values; `layout<Mesh, spec>` makes them types).
//
// Parameters. A TP style says how tensor parallel splits a weight stored as nn.Linear does
// ([out, in]): column-wise splits dim 0 (output features), row-wise dim 1 (input
// features), vocab-wise dim 0 of an embedding or output table, replicated (norms) not at
// all. FSDP then splits dim 0 of the TP-local block over its axis (nested inside TP: the
// canonical form lists tp before dp on that dimension), and under context parallel over cp
// inside dp (FSDP over dp_shard x cp). So for each parameter:
//   compute_spec  the block a rank computes with (TP only);
//   storage_spec  the block a rank keeps between steps (TP, then FSDP);
//   grad_spec     the gradient a rank's backward produces: the compute layout, partial
//                 (sum) over the batch axes and context parallel's cp, and over tp for replicated parameters under
//                 sequence parallel (each rank saw only its part of the sequence).
// Unsharding is the plan compute <- storage (all-gathers); gradient reduction is the plan
// grad_spec -> storage_spec (reduce-scatter over dp, all-reduce over HSDP's replicas and
// over tp for sequence-parallel norms): both come from the planner, never from model code.
//
// Activations [B, T, D] have the batch split over the batch axes (HSDP replicate axis
// outer, shard axis inner) and the sequence over cp; the residual stream is also split over
// the sequence by tp under sequence parallel (inside cp's part).
#pragma once

#include <cstdint>

#include <tessera/layout/layout.hpp>
#include <tessera/layout/layout_spec.hpp>
#include <tessera/parallel/policies.hpp>

namespace tessera {

/// How tensor parallel splits a parameter (TorchTitan's ParallelStyle, per weight).
enum class tp_style : std::uint8_t { replicated, colwise, rowwise, vocab };

namespace parallel {

/// The dimension tp splits for a style (-1: none). Parameters of rank 1 are replicated.
constexpr int tp_dim(tp_style s) {
  switch (s) {
    case tp_style::colwise:
    case tp_style::vocab: return 0;
    case tp_style::rowwise: return 1;
    case tp_style::replicated: return -1;
  }
  return -1;
}

constexpr layout_spec compute_spec(const parallel_spec& p, tp_style s, int rank) {
  layout_spec l = replicated_spec(rank, p.mesh_ndim);
  if (p.tp >= 0 && tp_dim(s) >= 0) l.push_shard(tp_dim(s), p.tp);
  return l;
}

constexpr layout_spec storage_spec(const parallel_spec& p, tp_style s, int rank) {
  layout_spec l = compute_spec(p, s, rank);
  if (p.dp_shard >= 0) {
    l.push_shard(0, p.dp_shard);
    if (p.cp >= 0) l.push_shard(0, p.cp);  // FSDP over dp_shard x cp (TorchTitan's dp_shard_cp)
  }
  return l;
}

/// True when a parameter is computed on the block it is stored as: nothing gathers it, and no
/// bf16 cast of mixed precision (the FSDP runtime binds the model to the stored block).
constexpr bool computed_on_stored(const parallel_spec& p, tp_style s, int rank) {
  return compute_spec(p, s, rank) == storage_spec(p, s, rank) && !p.bf16_params;
}

/// True when a parameter's gradient is partial over tp (a replicated parameter applied to
/// sequence-sharded activations).
constexpr bool grad_partial_over_tp(const parallel_spec& p, tp_style s) {
  return p.tp >= 0 && p.sequence_parallel && s == tp_style::replicated;
}

constexpr layout_spec grad_spec(const parallel_spec& p, tp_style s, int rank) {
  layout_spec l = compute_spec(p, s, rank);
  if (p.dp_replicate >= 0) l.set_partial(p.dp_replicate, reduce::sum);
  if (p.dp_shard >= 0) l.set_partial(p.dp_shard, reduce::sum);
  if (p.cp >= 0) l.set_partial(p.cp, reduce::sum);  // each cp rank saw part of every sequence
  if (grad_partial_over_tp(p, s)) l.set_partial(p.tp, reduce::sum);
  return l;
}

/// Mask of the mesh axes a parameter's stored block is split over: the ranks whose squared
/// gradient norms add up to the parameter's (a replicated copy is counted once).
constexpr unsigned norm_mask(const parallel_spec& p, tp_style s, int rank) {
  const layout_spec l = storage_spec(p, s, rank);
  unsigned m = 0;
  for (int a = 0; a < p.mesh_ndim; ++a)
    if (l.is_sharded(a)) m |= 1u << a;
  return m;
}

/// A [k] tensor partial (sum) over the axes in `mask`: reduced by the plan to replicated.
constexpr layout_spec partial_vector_spec(int mesh_ndim, unsigned mask, reduce op = reduce::sum) {
  layout_spec l = replicated_spec(1, mesh_ndim);
  for (int a = 0; a < mesh_ndim; ++a)
    if ((mask >> a) & 1u) l.set_partial(a, op);
  return l;
}

/// A tensor of `rank` dims [B, T, ...] with the batch (dim 0) split over the batch axes and,
/// under context parallel, the sequence (dim 1) over cp (which tokens of a sequence a cp
/// rank holds is cp_positions' rule; the layout counts them).
constexpr layout_spec batch_spec(const parallel_spec& p, int rank) {
  layout_spec l = replicated_spec(rank, p.mesh_ndim);
  if (p.dp_replicate >= 0) l.push_shard(0, p.dp_replicate);
  if (p.dp_shard >= 0) l.push_shard(0, p.dp_shard);
  if (p.cp >= 0 && rank >= 2) l.push_shard(1, p.cp);
  return l;
}

/// Calls `f.template operator()<S, R>()` for a style known at run time: S the style, R the
/// rank of the parameters that have it (1: the replicated norms, 2: the matrices).
template <class F>
constexpr void visit_style(tp_style s, F&& f) {
  switch (s) {
    case tp_style::replicated: f.template operator()<tp_style::replicated, 1>(); break;
    case tp_style::colwise: f.template operator()<tp_style::colwise, 2>(); break;
    case tp_style::rowwise: f.template operator()<tp_style::rowwise, 2>(); break;
    case tp_style::vocab: f.template operator()<tp_style::vocab, 2>(); break;
  }
}

/// Activation layouts of a tensor-parallel block, [B, T, X].
/// residual: where norms and the residual add run (sequence-split under SP);
/// replicated: the input of a column-parallel region (every tp rank has every token);
/// partial: the output of a row-parallel region (each tp rank holds a summand).
constexpr layout_spec residual_spec(const parallel_spec& p) {
  layout_spec l = batch_spec(p, 3);
  if (p.tp >= 0 && p.sequence_parallel) l.push_shard(1, p.tp);
  return l;
}
constexpr layout_spec tp_replicated_spec(const parallel_spec& p) { return batch_spec(p, 3); }
constexpr layout_spec tp_partial_spec(const parallel_spec& p) {
  layout_spec l = batch_spec(p, 3);
  if (p.tp >= 0) l.set_partial(p.tp, reduce::sum);
  return l;
}
/// Logits [B, T, V] split over the vocabulary by tp (the output of a vocab-wise output).
constexpr layout_spec vocab_sharded_spec(const parallel_spec& p) {
  layout_spec l = batch_spec(p, 3);
  if (p.tp >= 0) l.push_shard(2, p.tp);
  return l;
}
/// Per-token statistics [B, T, k] partial over tp with op `op` (loss parallel's row max,
/// and its sums of exponentials and target logits), and their reduced form.
constexpr layout_spec row_stat_partial_spec(const parallel_spec& p, reduce op) {
  layout_spec l = batch_spec(p, 3);
  if (p.tp >= 0) l.set_partial(p.tp, op);
  return l;
}
constexpr layout_spec row_stat_spec(const parallel_spec& p) { return batch_spec(p, 3); }

/// The layouts above for spec P on mesh type Mesh, as the layout types plan_t takes: what
/// the parallel runtime executes and the estimators cost, named once.
template <class Mesh, parallel_spec P>
struct layout_types {
  /// A parameter of style S and rank R: computed, stored and gradient layouts.
  template <tp_style S, int R>
  struct param {
    using compute = tessera::layout<Mesh, compute_spec(P, S, R)>;
    using storage = tessera::layout<Mesh, storage_spec(P, S, R)>;
    using grad = tessera::layout<Mesh, grad_spec(P, S, R)>;
  };
  using tokens = tessera::layout<Mesh, batch_spec(P, 2)>;  ///< [B, T] ids
  using residual = tessera::layout<Mesh, residual_spec(P)>;
  using replicated = tessera::layout<Mesh, tp_replicated_spec(P)>;
  using partial = tessera::layout<Mesh, tp_partial_spec(P)>;
  using vocab = tessera::layout<Mesh, vocab_sharded_spec(P)>;
  using row_stat = tessera::layout<Mesh, row_stat_spec(P)>;
  template <reduce Op>
  using row_stat_partial = tessera::layout<Mesh, row_stat_partial_spec(P, Op)>;
  /// A [k] tensor partial (sum) over the axes in Mask, and the same replicated.
  template <unsigned Mask>
  using scalar_partial = tessera::layout<Mesh, partial_vector_spec(Mesh::ndim, Mask)>;
  using scalar = tessera::layout<Mesh, replicated_spec(1, Mesh::ndim)>;
};

}  // namespace parallel
}  // namespace tessera
