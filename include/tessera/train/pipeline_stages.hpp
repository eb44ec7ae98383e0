// tessera/train/pipeline_stages.hpp: a pipeline recipe's stages on one rank -- the
// callbacks the pipeline executor (pipeline/executor.hpp) runs, made of the model's parts.
// tessera-requires: openblas
//
// `pipeline_stages<Owner>` belongs to a parallel_llama (its Owner). For one step it splits
// this rank's rows of the global batch into the schedule's m microbatches and runs the
// lowered schedule on the pp axis's communicator:
//   F(s, mb)  stage s's parts on microbatch mb, on activations of its own
//             (llama_model::make_activations over the stage's blocks): the embedding on
//             stage 0, the blocks, the head with its loss on the last stage;
//   B(s, mb)  the whole backward of those parts (the model's backward_*), then the
//             activations are freed;
//   I, W      the split backward (llama_split_backward.hpp): I passes the input gradient
//             on and keeps what W needs; W accumulates the weight gradients and frees;
//   UNSHARD / RESHARD / REDUCE_GRAD   the FSDP runtime on the stage's unit (gather the
//             stage's parameters and bind its gradients / free the gathered copies / reduce
//             the gradients once, after the stage's last backward).
// The tensors between stages are the residual stream of a microbatch on this rank's TP
// shard ([Bm x T/tp, D] under sequence parallel); stage 0's input and the last stage's output
// are one float (the ids and targets are read here; the output is the loss). Each
// microbatch's loss is scaled by its share of the step's counted targets, so the gradients
// are those of the mean over the whole global batch, as on one rank.
// On a kernel backend whose memory is not the host's (parallel_llama<Recipe, cuda_kernels>)
// the tensors between stages, the activations and what I keeps for W are in its memory: the
// executor sends device buffers (comm/nccl.hpp), the stage copies them with the backend's
// copies, and only the ids, the targets and the losses are on the host.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tessera/comm/any_communicator.hpp>
#include <tessera/comm/communicator.hpp>
#include <tessera/core/clock.hpp>
#include <tessera/core/error.hpp>
#include <tessera/core/trace.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/model/llama.hpp>
#include <tessera/parallel/pipeline_parallel.hpp>
#include <tessera/pipeline/executor.hpp>

namespace tessera::train {

using parallel::pipeline_choice;
using parallel::pipeline_layout;

/// The FSDP actions one step ran on this rank (TorchTitan's FSDP under PP: one gather and
/// one gradient reduction per stage and step, not per microbatch).
struct pipeline_fsdp_counts {
  int unshards = 0, reshards = 0, reduces = 0;
};

/// One compute action as it ran (for measured timelines: bench/pipeline/pp_timeline.cpp).
struct pipeline_timing {
  pipeline::op kind = pipeline::op::F;
  int stage = 0, mb = 0;
  std::int64_t start_us = 0, end_us = 0;  ///< core/clock.hpp's steady clock
};

template <class Owner>
class pipeline_stages {
 public:
  using kernels = typename Owner::kernels;
  using space = typename kernels::space;  // where the executor keeps the tensors between stages
  using model_type = typename Owner::model_type;
  using activations_type = basic_llama_activations<kernels>;

  explicit pipeline_stages(Owner& o) : o_(o) {}

  /// One step over this rank's rows [B, T] of the global batch (`count_all`: the counted
  /// targets of the whole global batch). Returns this rank's part of the mean loss (non-zero
  /// on the last stage's ranks only: the sum over the batch and pp axes is the loss).
  float run(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t B,
            std::int64_t T, std::int64_t count_all, bool need_backward, float loss_scale) {
    const pipeline_layout& L = o_.pp_;
    const int m = L.microbatches();
    check(B % m == 0, "pipeline_stages: the local batch must split into the microbatches (checked by the caller)");
    Bm_ = B / m, T_ = T;
    inputs_ = inputs, targets_ = targets;
    count_all_ = count_all;
    loss_scale_ = loss_scale;
    need_backward_ = need_backward;
    loss_ = 0;
    counts_ = {};
    peak_in_flight_ = 0;
    // TP's activations are those of one microbatch: [B/m, T, .] over the batch axes (and
    // under context parallel T is this rank's part of sequences cp times as long).
    o_.tp_.set_batch(Bm_ * o_.data_parallel_size(), T * o_.context_parallel_size());
    auto& comm = pp_comm();
    if (need_backward) {
      if (!exec_ || exec_B_ != Bm_ || exec_T_ != T) {
        std::vector<std::size_t> sizes(static_cast<std::size_t>(L.stages()) + 1, residual_floats());
        sizes.front() = sizes.back() = 1;
        exec_.emplace(L.lowered, std::move(sizes));
        exec_B_ = Bm_, exec_T_ = T;
      }
      const space_buffer<float, space> dummy(static_cast<std::size_t>(m));  // stage 0 reads the ids instead
      exec_->run(comm, *this, std::span<const float>(dummy.data(), dummy.size()), std::span<float>());
    } else {
      forward_only(comm);
    }
    acts_.clear();
    o_.model_.use_own();
    return loss_;
  }

  // ---- the executor's callbacks ----
  void forward(int s, int mb, std::span<const float> in, std::span<float> out) {
    trace::scope t("forward stage", "stage", s);
    timed tm(timing_, pipeline::op::F, s, mb);
    if (need_backward_) require_gathered(s);
    o_.attention_rows(mb * Bm_, Bm_);  // context parallel's documents: this microbatch's rows
    const pipeline_layout& L = o_.pp_;
    const int first = L.first_layer(s), last = L.last_layer(s);
    const bool head = s == L.stages() - 1;
    model_type& md = o_.model_;
    activations_type& a = acts_[{s, mb}] = md.make_activations(Bm_, T_, first, last, s == 0, head);
    md.use(a);
    if (s == 0)
      md.forward_embedding(rows(inputs_, mb), Bm_, T_, o_.hooks_);
    else
      kernels::copy(md.residual(first), in.data(), static_cast<std::int64_t>(in.size()));
    for (int l = first; l < last; ++l) md.forward_block(l, o_.hooks_);
    if (head) {
      const auto tg = rows(targets_, mb);
      const std::int64_t count = cpu::count_targets(tg.data(), Bm_ * T_, Owner::cfg.vocab_size);
      const float share = count_all_ ? static_cast<float>(count) / static_cast<float>(count_all_) : 0.0f;
      const float loss = md.forward_head(tg, need_backward_, loss_scale_ * share, o_.hooks_);
      loss_ += loss * share;
      kernels::to_device(out.data(), &loss, 1);
    } else {
      kernels::copy(out.data(), md.residual(last), static_cast<std::int64_t>(out.size()));
    }
    note_peak();
    if (!need_backward_) acts_.erase({s, mb});
  }
  /// B: the whole backward of stage s for microbatch mb.
  void backward(int s, int mb, std::span<const float> grad_out, std::span<float> grad_in) {
    trace::scope t("backward stage", "stage", s);
    timed tm(timing_, pipeline::op::B, s, mb);
    run_backward(s, mb, grad_out, grad_in, false);
    acts_.erase({s, mb});
  }
  /// I: the input gradient; what W needs stays in the microbatch's activations.
  void backward_input(int s, int mb, std::span<const float> grad_out, std::span<float> grad_in) {
    trace::scope t("backward input stage", "stage", s);
    timed tm(timing_, pipeline::op::I, s, mb);
    run_backward(s, mb, grad_out, grad_in, true);
    note_peak();
  }
  /// W: the weight gradients from what I kept; frees the microbatch's activations.
  void backward_weight(int s, int mb) {
    trace::scope t("backward weight stage", "stage", s);
    timed tm(timing_, pipeline::op::W, s, mb);
    require_gathered(s);
    model_type& md = o_.model_;
    md.use(at(s, mb));
    const int first = o_.pp_.first_layer(s), last = o_.pp_.last_layer(s);
    if (s == o_.pp_.stages() - 1) md.backward_head_weight();
    for (int l = last - 1; l >= first; --l) md.backward_block_weight(l, o_.hooks_);
    if (s == 0) md.backward_embedding_weight();
    acts_.erase({s, mb});
  }
  void unshard(int s) {
    o_.store_.unshard(s);
    o_.store_.alloc_grads(s);
    gathered(s) = 1;
    ++counts_.unshards;
  }
  void reshard(int s) {
    o_.store_.reshard(s);
    gathered(s) = 0;
    ++counts_.reshards;
  }
  void reduce_grad(int s) {
    o_.store_.reduce_grads(s);
    ++counts_.reduces;
  }
  /// Records every compute action of the following steps into `out` (nullptr: stop).
  void record_timing(std::vector<pipeline_timing>* out) noexcept { timing_ = out; }
  /// The FSDP actions of the last step.
  const pipeline_fsdp_counts& fsdp_counts() const noexcept { return counts_; }

  /// Bytes of the activations in flight now, and their peak during the last step (what the
  /// memory estimator predicts from the schedule).
  std::int64_t activation_bytes_in_flight() const {
    std::int64_t n = 0;
    for (const auto& [k, a] : acts_) n += a.bytes + a.deferred_bytes();
    return n;
  }
  std::int64_t peak_activation_bytes() const noexcept { return peak_in_flight_; }

 private:
  Owner& o_;
  std::map<std::pair<int, int>, activations_type> acts_;  // (stage, microbatch) in flight
  std::optional<pipeline::executor> exec_;
  std::vector<char> gathered_;  // per stage: its parameters are gathered (between UNSHARD and RESHARD)
  pipeline_fsdp_counts counts_;
  std::int64_t peak_in_flight_ = 0;
  std::vector<pipeline_timing>* timing_ = nullptr;
  struct timed {
    std::vector<pipeline_timing>* out;
    pipeline_timing t;
    timed(std::vector<pipeline_timing>* o, pipeline::op k, int s, int mb) : out(o) {
      if (out) t = {k, s, mb, steady_now_us(), 0};
    }
    ~timed() {
      if (out) t.end_us = steady_now_us(), out->push_back(t);
    }
    timed(const timed&) = delete;
    timed& operator=(const timed&) = delete;
  };
  void note_peak() { peak_in_flight_ = std::max(peak_in_flight_, activation_bytes_in_flight()); }
  std::int64_t exec_B_ = 0, exec_T_ = 0;
  std::int64_t Bm_ = 0, T_ = 0, count_all_ = 0;
  std::span<const std::int32_t> inputs_, targets_;
  float loss_scale_ = 1, loss_ = 0;
  bool need_backward_ = true;

  /// Floats of the tensor between two stages: one microbatch's residual stream on this shard.
  std::size_t residual_floats() const {
    return static_cast<std::size_t>(o_.model_.batch_dims(Bm_, T_).Nr() * Owner::cfg.dim);
  }
  comm::any_communicator& pp_comm() {
    return o_.dm_.group(Owner::pp_axis_group());
  }
  std::span<const std::int32_t> rows(std::span<const std::int32_t> ids, int mb) const {
    return ids.subspan(static_cast<std::size_t>(mb * Bm_ * T_), static_cast<std::size_t>(Bm_ * T_));
  }
  char& gathered(int s) {
    gathered_.resize(static_cast<std::size_t>(o_.pp_.stages()), 0);
    return gathered_[static_cast<std::size_t>(s)];
  }
  /// Compute on a stage whose parameters are not gathered is the FSDP-under-PP defect of
  /// pytorch#164756; the lowered schedule rules it out, and this check would say so.
  void require_gathered(int s) {
    check(gathered(s), "pipeline_stages: stage " + std::to_string(s) +
                                              " computes without its parameters gathered (no UNSHARD before it)");
  }
  activations_type& at(int s, int mb) {
    auto it = acts_.find({s, mb});
    check(it != acts_.end(), "pipeline_stages: no activations of stage " + std::to_string(s) + ", microbatch " +
                                 std::to_string(mb) + " (its forward has not run on this rank)");
    return it->second;
  }
  /// The backward of stage s's parts for microbatch mb: whole (B), or only the input
  /// gradient with what W needs kept (`input_only`, I).
  void run_backward(int s, int mb, std::span<const float> grad_out, std::span<float> grad_in, bool input_only) {
    require_gathered(s);
    o_.attention_rows(mb * Bm_, Bm_);
    model_type& md = o_.model_;
    md.use(at(s, mb));
    auto& h = o_.hooks_;
    const int first = o_.pp_.first_layer(s), last = o_.pp_.last_layer(s);
    if (s < o_.pp_.stages() - 1)
      kernels::copy(md.residual_grad(), grad_out.data(), static_cast<std::int64_t>(grad_out.size()));
    else if (input_only)
      md.backward_head_input(h);
    else
      md.backward_head(h);
    for (int l = last - 1; l >= first; --l) {
      if (input_only)
        md.backward_block_input(l, h);
      else
        md.backward_block(l, h);
    }
    if (s > 0)
      kernels::copy(grad_in.data(), md.residual_grad(), static_cast<std::int64_t>(grad_in.size()));
    else if (input_only)
      md.backward_embedding_input(h);
    else
      md.backward_embedding(h);
  }

  /// Forward only (need_backward = false): microbatch by microbatch, stage by stage, every
  /// rank in that one order, activations sent on as they come out.
  void forward_only(comm::any_communicator& comm) {
    const pipeline_layout& L = o_.pp_;
    space_buffer<float, space> in(residual_floats()), out(residual_floats()), loss(1);
    auto view = [](space_buffer<float, space>& b) { return std::span<float>(b.data(), b.size()); };
    for (int s = 0; s < L.stages(); ++s)
      if (L.local(s)) o_.store_.unshard(s);
    for (int mb = 0; mb < L.microbatches(); ++mb)
      for (int s = 0; s < L.stages(); ++s) {
        if (!L.local(s)) continue;
        if (s > 0 && !L.local(s - 1))
          comm::recv(comm, view(in), L.rank_of(s - 1), (mb * L.stages() + s) % 32768).wait();
        const bool last = s == L.stages() - 1;
        forward(s, mb, view(in), last ? view(loss) : view(out));
        if (!last && !L.local(s + 1)) {
          space::fence();  // the stage's kernels have written `out`
          comm::send(comm, std::span<const float>(view(out)), L.rank_of(s + 1), (mb * L.stages() + s + 1) % 32768).wait();
        }
        std::swap(in, out);
      }
    for (int s = 0; s < L.stages(); ++s)
      if (L.local(s)) o_.store_.reshard(s);
  }
};

}  // namespace tessera::train
