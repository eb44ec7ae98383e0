// tessera/train/trainer.hpp: the training loop (TorchTitan's train step), for one rank
// (`trainer`, over a llama_model) or a recipe on a mesh (`basic_trainer<parallel_llama<R>>`).
// tessera-requires: openblas
//
// The model's kernel backend (Model::kernels, else cpu_kernels; kernels/backend.hpp) holds the
// AdamW moments and runs the norm, the clipping and AdamW: a device_llama trains on its GPU.
//
// One step: zero the gradients; for each of `accum` micro-batches take the next llm.c
// window, forward and backward with loss scale 1/accum (so the gradient is that of the mean
// loss over the whole step); global gradient norm, clipping to max_norm (0 = off); the
// scheduled learning rate; AdamW over the whole parameter arena (a parallel model's arena is
// this rank's stored blocks, so the optimizer states are sharded as the parameters are). A
// NaN or infinite loss stops the run with an error naming the step. Under data parallel
// every rank reads the same global batch and the model keeps its rows. A parallel model on
// host memory is first checked to fit (train/memory_check.hpp): a step that needs more than
// this host has available is refused before the optimizer states are allocated.
//
// Metrics: tokens_per_s counts the global batch's tokens (all micro-batches) over the
// step's time; mfu is tokens_per_s x flops_per_token / the peak of the hardware the job
// uses (sgemm_peak.hpp), measured once at construction unless given. With a trace recorder
// bound to the calling thread (core/trace.hpp) a step records the events step, forward and
// backward (per micro-batch) and optimizer (norm, clipping and AdamW).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/core/host_memory.hpp>
#include <tessera/core/trace.hpp>
#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/model/llama.hpp>
#include <tessera/tensor/memory.hpp>
#include <tessera/train/data.hpp>
#include <tessera/train/lr_schedule.hpp>
#include <tessera/train/memory_check.hpp>
#include <tessera/train/metrics.hpp>
#include <tessera/train/sgemm_peak.hpp>

namespace tessera::train {

struct optimizer_options {
  double lr = 8e-4;  // TorchTitan's debug model default
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  double max_norm = 1.0;  ///< 0 turns clipping off
  std::int64_t warmup = 2;
  std::string schedule = "linear";
};

/// `basic_trainer`'s peak argument that asks it to measure the peak itself.
inline constexpr double measure_peak = -1;

/// The kernel backend a model's parameters live on: Model::kernels, else the CPU's.
template <class Model>
struct kernels_of {
  using type = cpu_kernels;
};
template <class Model>
  requires requires { typename Model::kernels; }
struct kernels_of<Model> {
  using type = typename Model::kernels;
};

template <class Model>
class basic_trainer {
  using K = typename kernels_of<Model>::type;
  using space = typename K::space;

 public:
  /// `loader` gives the global batch of each micro-batch (a parallel model keeps its
  /// rows). `peak_flops` is the MFU denominator: the peak FLOP/s of the hardware the job
  /// uses; by default (measure_peak) it is measured here, once per host for the whole job
  /// (job_peak_flops over the model's mesh, a collective every rank takes part in; one
  /// rank's host_peak_flops for a single-rank model), or on a device backend that measures
  /// its own (K::gemm_peak_flops: each rank its GPU's). 0 turns MFU off (reported as 0).
  basic_trainer(Model& model, batch_loader& loader, std::int64_t steps, std::int64_t accum,
                optimizer_options opt, double peak_flops = measure_peak)
      : model_(model), loader_(loader), steps_(steps), accum_(accum), opt_(opt),
        peak_flops_(peak_flops), m_(checked_layout(model, loader)), v_(model.params().layout()) {
    check(steps > 0, "trainer: --steps must be positive");
    check(accum > 0, "trainer: gradient accumulation steps must be positive");
    check(opt.max_norm >= 0, "trainer: --max-norm must be >= 0 (0 turns clipping off)");
    check(peak_flops == measure_peak || peak_flops >= 0,
          "trainer: peak_flops must be >= 0 (0: no MFU) or measure_peak");
    sched_ = lr_schedule{opt.lr, opt.warmup, steps, parse_lr_decay(opt.schedule), 0.0};
    const std::int64_t n = loader.batch() * loader.seq_len();
    inputs_.resize(static_cast<std::size_t>(n));
    targets_.resize(static_cast<std::size_t>(n));
    if (peak_flops_ == measure_peak) {
      if constexpr (requires { K::gemm_peak_flops(); })  // a device backend: each rank measures its own device
        peak_flops_ = K::gemm_peak_flops();
      else if constexpr (requires { model.mesh().world(); })
        peak_flops_ = job_peak_flops(model.mesh().world());
      else
        peak_flops_ = host_peak_flops();
    }
  }

  /// The MFU denominator in FLOP/s (0: MFU off).
  double peak_flops() const { return peak_flops_; }
  std::int64_t step() const { return step_; }
  std::int64_t steps() const { return steps_; }
  const lr_schedule& schedule() const { return sched_; }
  /// AdamW's first and second moments, laid out as params() (checkpoints save them).
  arena<float, space>& exp_avg() noexcept { return m_; }
  arena<float, space>& exp_avg_sq() noexcept { return v_; }
  /// Continues from step `s` (steps done), as a resumed run does after loading a checkpoint.
  void restore_step(std::int64_t s) {
    check(s >= 0 && s <= steps_, "trainer: cannot resume at step " + std::to_string(s) + " of a run of " +
                                     std::to_string(steps_) + " steps");
    step_ = s;
  }
  /// The step the learning-rate schedule counts from: 0, where a resume started it over, or
  /// before 0 when a resume kept its progress but not the step (the schedule's step is the
  /// trainer's minus the origin; its decay ends at the run's last step). Checkpoints keep the
  /// schedule's progress.
  std::int64_t schedule_origin() const { return schedule_origin_; }
  void set_schedule_origin(std::int64_t s) {
    check(s <= steps_, "trainer: the schedule cannot start at step " + std::to_string(s) + " of a run of " +
                           std::to_string(steps_) + " steps");
    schedule_origin_ = s;
    sched_.steps = steps_ - s;
  }
  /// The same for AdamW's step count (its bias corrections): the moments hold step() -
  /// optimizer_origin() steps; a fresh optimizer of a resume starts at the resumed step.
  std::int64_t optimizer_origin() const { return optimizer_origin_; }
  void set_optimizer_origin(std::int64_t s) {
    check(s <= step_, "trainer: AdamW cannot count from step " + std::to_string(s) + " after step " + std::to_string(step_));
    optimizer_origin_ = s;
  }

  /// Runs one training step and returns its metrics.
  step_metrics train_step() {
    check(step_ < steps_, "trainer: all " + std::to_string(steps_) + " steps are done");
    const auto t0 = std::chrono::steady_clock::now();
    const std::int64_t step1 = step_ + 1;
    trace::scope step_scope("step", "step", step1);
    const std::int64_t B = loader_.batch(), T = loader_.seq_len();
    model_.zero_grad();
    double loss = 0;
    for (std::int64_t a = 0; a < accum_; ++a) {
      loader_.next(inputs_, targets_);
      {
        trace::scope s("forward", "microbatch", a);
        loss += model_.forward(inputs_, targets_, B, T, true, 1.0f / static_cast<float>(accum_));
      }
      trace::scope s("backward", "microbatch", a);
      model_.backward();
    }
    loss /= static_cast<double>(accum_);
    if (!std::isfinite(loss))
      throw error("training diverged: the loss is " + std::string(std::isnan(loss) ? "NaN" : "infinite") +
                  " at step " + std::to_string(step1) + "; lower --lr or set --max-norm");
    auto& g = model_.grads();
    trace::scope opt_scope("optimizer", "step", step1);  // norm, clipping, AdamW
    float norm;
    if constexpr (requires { model_.grad_norm(); })  // across ranks, each element counted once
      norm = static_cast<float>(model_.grad_norm());
    else
      norm = static_cast<float>(std::sqrt(K::sum_of_squares(g.data(), n_)));
    if (opt_.max_norm > 0) clip_by_norm<K>(g.data(), n_, norm, static_cast<float>(opt_.max_norm));
    const double lr = sched_.at(step_ - schedule_origin_);
    cpu::adamw_config ac;
    ac.lr = static_cast<float>(lr);
    ac.beta1 = static_cast<float>(opt_.beta1);
    ac.beta2 = static_cast<float>(opt_.beta2);
    ac.eps = static_cast<float>(opt_.eps);
    ac.weight_decay = static_cast<float>(opt_.weight_decay);
    if constexpr (requires { model_.adamw_update(g.data(), m_.data(), v_.data(), n_, step1, ac); })
      model_.adamw_update(g.data(), m_.data(), v_.data(), n_, step1 - optimizer_origin_, ac);  // kept bf16 weights too
    else
      K::adamw_update(model_.params().data(), g.data(), m_.data(), v_.data(), n_, step1 - optimizer_origin_, ac);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    step_ = step1;
    step_metrics m;
    m.step = step1;
    m.loss = loss;
    m.grad_norm = norm;
    m.lr = lr;
    m.tokens_per_s = static_cast<double>(B * T * accum_) / secs;
    if (peak_flops_ > 0)
      m.mfu = m.tokens_per_s * flops_per_token(model_.config(), T) / peak_flops_;
    m.peak_memory_bytes = memory_tracker<space>::peak_bytes();
    return m;
  }

 private:
  /// The arenas' layout, once a parallel model on host memory is known to fit: refuses a
  /// global batch x seq_len whose step needs more memory than this host has available
  /// (train/memory_check.hpp), before the optimizer states and the activations are
  /// allocated. The model's arenas exist already: what this process holds is counted as
  /// available, since the estimate counts it too (not when TESSERA_HOST_MEMORY sets the
  /// budget, which is all the job may hold).
  static auto checked_layout(Model& model, const batch_loader& loader) {
    if constexpr (space::host_accessible && requires { typename Model::traits; Model::cfg; Model::ps; }) {
      if (std::int64_t avail = host_memory_budget(); avail > 0) {
        if (!host_memory_budget_given()) avail += memory_tracker<host_space>::current_bytes();
        auto& world = model.mesh().world();
        const std::string problem =
            host_memory_problem(Model::cfg, Model::ps, Model::traits::name(), model.mesh().shape(), loader.batch(),
                                loader.seq_len(), ranks_on_this_host(world.backend(), world.size()), avail);
        if (!problem.empty()) throw error(problem);
      }
    }
    return model.params().layout();
  }

  Model& model_;
  batch_loader& loader_;
  std::int64_t steps_, accum_;
  optimizer_options opt_;
  double peak_flops_;
  arena<float, space> m_, v_;
  std::int64_t n_ = static_cast<std::int64_t>(m_.size());  ///< floats of the arenas
  lr_schedule sched_;
  std::int64_t step_ = 0;
  std::int64_t schedule_origin_ = 0;   ///< the step the schedule counts from (set_schedule_origin)
  std::int64_t optimizer_origin_ = 0;  ///< the step AdamW counts from (set_optimizer_origin)
  std::vector<std::int32_t> inputs_, targets_;
};

/// The single-rank trainer.
using trainer = basic_trainer<llama_model>;

}  // namespace tessera::train
