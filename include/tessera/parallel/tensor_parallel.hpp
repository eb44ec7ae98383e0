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
//   gather_each / reduce_each / each_part  async TP (tensor_parallel's async_tp): gather and
//                                    reduce with the GEMMs of a region (model/llama_block_regions.hpp)
//                                    run on each part of the sequence as ring steps move it.
//
// Async TP. Rank r of the tp axis (size p) holds part r of each sequence: rows
// [r T/p, (r+1) T/p) of every one of the B sequences of the gathered [B, T, X]. The gather
// is p - 1 ring steps: at step k this rank passes the part it holds (its own at k = 0) to
// rank r + 1 and receives part r - k - 1 from rank r - 1, and meanwhile places the held part
// r - k in the gathered buffer and runs the region's GEMMs on its rows. The reduce-scatter is
// p steps: at step k this rank computes the GEMMs of part (r + k + 1) mod p, adds the sum
// rank r + 1 passed it (of the same part), and passes the sum on to rank r - 1; the part of
// step p - 1 is its own, summed over every rank. Each rank sends p - 1 parts either way, the
// bytes of the ring all-gather / reduce-scatter the collectives would be, as point-to-point
// sends (the traffic estimator counts them so). Ring buffers: three parts of [B, T/p, X]
// (the estimate's staging). The sequence must split evenly (T divisible by p).
// Each returns the buffer holding the result (its input when the plan is empty, e.g. with
// no TP). It knows no model: the Llama's hooks (train/parallel_llama.hpp) call it. The
// activations are in memory space Space (the host's, or a GPU's over an nccl device mesh).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>

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

  /// n floats kept for the whole tensors' amaxes of a Float8 region async TP runs in parts
  /// (model/llama_block_regions.hpp; f8_part_amax_floats, which the memory estimate counts).
  float* amax_staging(std::int64_t n) {
    reserve_buffer<float, Space>(amax_, static_cast<std::size_t>(n));
    return amax_.data();
  }

  /// Whether a region runs on parts of the sequence: async TP on a tp axis of more than one
  /// rank, and not `whole` (a region with a Float8 linear).
  bool overlaps(bool whole) {
    if constexpr (overlapped) return !whole && tp_group().size() > 1;
    else return false;
  }
  /// gather(in, out, X), then fn(rows, row0, n) on every token row of the gathered [B, T, X]
  /// (rows: the gathered data of rows row0 .. row0 + n). Overlapped: the ring (header).
  /// Returns the buffer holding every token.
  template <class F>
  const float* gather_each(const float* in, float* out, std::int64_t X, std::int64_t B, std::int64_t T, bool whole,
                           F&& fn) {
    if (!overlaps(whole)) {
      const float* g = gather(in, out, X);
      fn(g, std::int64_t{0}, B * T);
      return g;
    }
    comm::any_communicator& g = tp_group();
    const int p = g.size(), r = g.rank();
    const std::int64_t Tr = part_rows(T, p), part = B * Tr * X;
    reserve_buffer<float, Space>(ring_, static_cast<std::size_t>(3 * part));
    const float* held = in;
    for (int step = 0; step < p; ++step) {
      const std::int64_t c = (r - step + p) % p;
      float* next = ring_.data() + (step % 2) * part;
      std::vector<comm::any_request> q;
      if (step < p - 1) q = pass(g, held, next, part, (r + 1) % p, (r - 1 + p) % p, step);
      Space::copy_2d(out + c * Tr * X, static_cast<std::size_t>(T * X) * sizeof(float), held,
                     static_cast<std::size_t>(Tr * X) * sizeof(float), static_cast<std::size_t>(Tr * X) * sizeof(float),
                     static_cast<std::size_t>(B));
      for (std::int64_t b = 0; b < B; ++b) fn(out + (b * T + c * Tr) * X, b * T + c * Tr, Tr);
      for (auto& x : q) x.wait();
      held = next;
    }
    return out;
  }
  /// fn(dst, row0, n) writes the partial sums of rows row0 .. row0 + n of [B, T, X] at dst;
  /// the result is reduce(partial, out, X) of them all (partial: [B, T, X] scratch). add(y, a,
  /// b, n): y = a + b. Overlapped: the ring (header), the result in `out`. Returns the buffer
  /// holding this rank's rows.
  template <class F, class Add>
  const float* reduce_each(float* partial, float* out, std::int64_t X, std::int64_t B, std::int64_t T, bool whole,
                           F&& fn, Add&& add) {
    if (!overlaps(whole)) {
      fn(partial, std::int64_t{0}, B * T);
      return reduce(partial, out, X);
    }
    comm::any_communicator& g = tp_group();
    const int p = g.size(), r = g.rank();
    const std::int64_t Tr = part_rows(T, p), part = B * Tr * X;
    reserve_buffer<float, Space>(ring_, static_cast<std::size_t>(3 * part));
    float* arrived = ring_.data() + 2 * part;
    std::vector<comm::any_request> q;
    for (int step = 0; step < p; ++step) {
      const std::int64_t c = (r + step + 1) % p;
      float* acc = step == p - 1 ? out : ring_.data() + (step % 2) * part;
      for (std::int64_t b = 0; b < B; ++b) fn(acc + b * Tr * X, b * T + c * Tr, Tr);
      if (step > 0) {
        for (auto& x : q) x.wait();
        add(acc, acc, arrived, part);
      }
      if (step < p - 1) q = pass(g, acc, arrived, part, (r - 1 + p) % p, (r + 1) % p, step);
    }
    return out;
  }
  /// fn(rows, row0, n) on the rows of the gathered [B, T, X] at `in`, in the parts gather_each
  /// hands out (a recompute runs the same GEMMs on the same rows).
  template <class F>
  void each_part(const float* in, std::int64_t X, std::int64_t B, std::int64_t T, bool whole, F&& fn) {
    if (!overlaps(whole)) {
      fn(in, std::int64_t{0}, B * T);
      return;
    }
    const int p = tp_group().size();
    const std::int64_t Tr = part_rows(T, p);
    for (std::int64_t c = 0; c < p; ++c)
      for (std::int64_t b = 0; b < B; ++b) fn(in + (b * T + c * Tr) * X, b * T + c * Tr, Tr);
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
  space_buffer<float, Space> ring_;  // async TP: three parts of [B, T / tp, X]
  space_buffer<float, Space> amax_;  // async TP with Float8 rowwise: the whole tensors' amaxes
  static constexpr bool overlapped = P.async_tp && P.tp >= 0 && P.sequence_parallel;

  comm::any_communicator& tp_group() {
    axis_group g;
    if constexpr (P.tp >= 0) {
      constexpr int tp = P.tp;
      g.push(tp);
    }
    return dm_.group(g);
  }
  static std::int64_t part_rows(std::int64_t T, int p) {
    check(T % p == 0, "async TP: a rank's " + std::to_string(T) + " tokens of each sequence do not split evenly over "
                      "the " + std::to_string(p) + " ranks of the tp axis; use a --seq-len divisible by " +
                      std::to_string(p) + " (times the cp axis under context parallel)");
    return T / p;
  }
  /// Posts the send of `n` floats at `from` to rank `to_rank` and the receive from `from_rank`
  /// into `into` (after the kernels that wrote `from` have finished).
  static std::vector<comm::any_request> pass(comm::any_communicator& g, const float* from, float* into,
                                             std::int64_t n, int to_rank, int from_rank, int tag) {
    Space::fence();
    std::vector<comm::any_request> r;
    comm::group grp(g);
    r.push_back(comm::send(g, std::span<const float>(from, static_cast<std::size_t>(n)), to_rank, tag));
    r.push_back(comm::recv(g, std::span<float>(into, static_cast<std::size_t>(n)), from_rank, tag));
    return r;
  }

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
