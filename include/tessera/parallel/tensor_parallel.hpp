// tessera/parallel/tensor_parallel.hpp: the tensor-parallel runtime -- the activation
// layout changes of a TP region, each the planner's plan for the layouts of
// parallel/layouts.hpp (Megatron's f / g operators, with sequence and loss parallel).
//
// `parallel::tp_activations<Mesh, Spec>` moves activations [B, T, X] of the current batch:
//   gather  residual -> replicated  (in front of a column-parallel region: all-gather over
//                                    the sequence under SP, nothing without)
//   reduce  partial -> residual     (after a row-parallel region: reduce-scatter under SP,
//                                    all-reduce without)
//   reduce_row_max / reduce_row_stats  loss parallel's row statistics (max, then sums)
//   gather_logits / slice_logits       the logits' vocabulary split without loss parallel
//   reduce_amax                        Float8's amaxes of TP-split operands (max over tp)
// Each returns the buffer holding the result (its input when the plan is empty, e.g. with
// no TP). It knows no model: the Llama's hooks (train/parallel_llama.hpp) call it. The
// activations are in memory space Space (the host's, or a GPU's over an nccl device mesh).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <tessera/comm/communicator.hpp>
#include <tessera/parallel/layouts.hpp>
#include <tessera/tensor/device_mesh.hpp>
#include <tessera/tensor/redistribute.hpp>

namespace tessera::parallel {

template <class Mesh, parallel_spec P, data_space Space = host_space>
class tp_activations {
 public:
  using types = layout_types<Mesh, P>;

  explicit tp_activations(device_mesh<Mesh>& dm) : dm_(dm) {}

  /// The global batch of the activations that follow: [B, T, .].
  void set_batch(std::int64_t B, std::int64_t T) { B_ = B, T_ = T; }

  const float* gather(const float* in, float* out, std::int64_t X) {
    return move<typename types::residual, typename types::replicated>(in, out, X);
  }
  const float* reduce(const float* in, float* out, std::int64_t X) {
    return move<typename types::partial, typename types::residual>(in, out, X);
  }
  void reduce_row_max(float* x) {
    move_inplace<typename types::template row_stat_partial<reduce::max>, typename types::row_stat>(x, 1);
  }
  void reduce_row_stats(float* x) {
    move_inplace<typename types::template row_stat_partial<reduce::sum>, typename types::row_stat>(x, 2);
  }
  void gather_logits(const float* in, float* out, std::int64_t V) {
    move<typename types::vocab, typename types::replicated>(in, out, V);
  }
  void slice_logits(const float* in, float* out, std::int64_t V) {
    move<typename types::replicated, typename types::vocab>(in, out, V);
  }
  /// Float8 scales of TP-split operands: amaxes [n] max-reduced over the TP axis, in place
  /// (the amax of a sharded DTensor in torchao).
  void reduce_amax(float* amax, std::int64_t n) {
    if constexpr (P.tp >= 0) {
      axis_group g;
      constexpr int tp = P.tp;  // a compile-time copy (clang 14 can misread P's members at run time)
      g.push(tp);
      Space::fence();  // the amaxes' kernels before the collective reads them
      comm::all_reduce(dm_.group(g), std::span<float>(amax, static_cast<std::size_t>(n)), reduce_op::max).wait();
    }
  }

  /// An activation [B, T, X] from layout Src to Dst; returns `in` when the plan is empty.
  template <class Src, class Dst>
  const float* move(const float* in, float* out, std::int64_t X) {
    if constexpr (plan_t<Src, Dst, float>::size == 0) {
      return in;
    } else {
      redistribute_local<Src, Dst, default_cost_model, Space>(dm_, shape_t{B_, T_, X}, in, out);
      return out;
    }
  }

 private:
  device_mesh<Mesh>& dm_;
  std::int64_t B_ = 0, T_ = 0;
  space_buffer<float, Space> stage_;

  template <class Src, class Dst>
  void move_inplace(float* x, std::int64_t X) {
    if constexpr (plan_t<Src, Dst, float>::size != 0) {
      const shape_t g{B_, T_, X};
      const auto n = static_cast<std::size_t>(local_numel<Dst>(dm_, g));
      reserve_buffer<float, Space>(stage_, n);
      redistribute_local<Src, Dst, default_cost_model, Space>(dm_, g, x, stage_.data());
      Space::copy(x, stage_.data(), n * sizeof(float));
    }
  }
};

}  // namespace tessera::parallel
