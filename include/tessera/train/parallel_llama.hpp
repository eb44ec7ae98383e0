// tessera/train/parallel_llama.hpp: a recipe's Llama model on a device mesh -- where the
// model template and the parallel runtime meet (TorchTitan's parallelize_llama).
// tessera-requires: openblas
//
// parallel_llama<Recipe> builds this rank's llama_model on the shard the policies give it
// (parallel/llama_plan.hpp), keeps its parameters sharded with the FSDP runtime
// (parallel/fsdp.hpp: FSDP units are the model's parts -- each block, and the ends) and
// runs its forward and backward through hooks that move data only by the planner's plans:
//   - a unit is unshard before its forward, the next unit's gathers are prefetched right
//     after (FSDP2), and it is freed after forward as reshard_after_forward says (the ends
//     stay until their backward); after a unit's backward its gradients are reduced to the
//     stored blocks and its gathered parameters freed;
//   - TP's activation changes run through parallel/tensor_parallel.hpp;
//   - under context_parallel each rank computes its cp part of every sequence (its tokens,
//     labels and RoPE positions) and attention runs as ring attention (parallel/cp_attention.hpp).
// Besides, it splits the global batch over the data-parallel axes, averages the loss over
// all tokens, and computes the gradient norm over every stored block.
//
// With pipeline_parallel (parallel/pipeline_parallel.hpp) this rank holds the stages the
// schedule places on its pp coordinate: their parameters only (FSDP units are the stages),
// and forward() runs the whole lowered schedule over the microbatches (train/pipeline_stages.hpp):
// each stage a range of the model's parts on activations of its own per microbatch, the
// FSDP actions at the schedule's UNSHARD / RESHARD / REDUCE_GRAD, I and W apart where the
// schedule splits them. backward() then has nothing left to do (PyTorch's schedule.step()).
//
// parallel_llama<Recipe, K> runs the model on kernel backend K (cpu_kernels unless named):
// its parameters, gradients and activations in K's memory, the FSDP and TP plans executed
// there (cuda_kernels: on a device mesh whose communicator is nccl's, one GPU per rank).
// Pipeline parallel, context parallel and Float8's FP8 all-gather run there too (the stages'
// activations and transfers, the ring attention's blocks and spans, the gathers' amaxes,
// casts and codes in K's memory): every policy composes on every backend.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tessera/comm/communicator.hpp>
#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/layout/print.hpp>
#include <tessera/model/llama.hpp>
#include <tessera/model/llama_float8.hpp>
#include <tessera/parallel/cp_attention.hpp>
#include <tessera/parallel/fsdp.hpp>
#include <tessera/parallel/llama_plan.hpp>
#include <tessera/parallel/tensor_parallel.hpp>
#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/device_mesh.hpp>
#include <tessera/tensor/dtype.hpp>
#include <tessera/tensor/redistribute.hpp>
#include <tessera/train/pipeline_stages.hpp>
#include <tessera/train/recipe.hpp>

namespace tessera::train {

template <class Recipe, kernel_backend K = cpu_kernels>
class parallel_llama {
 public:
  using traits = recipe_traits<Recipe>;
  using mesh_type = typename traits::mesh_type;
  static constexpr parallel_spec ps = traits::spec;
  static constexpr llama_config cfg = traits::config;
  using kernels = K;  // train::basic_trainer runs its optimizer with them
  using space = typename K::space;
  using model_type = basic_llama_model<K>;

  /// `pipeline`: run-time choices of a pipeline recipe (a schedule, stages per rank or a
  /// microbatch count other than the policy's), checked at start-up as the policy's are.
  explicit parallel_llama(device_mesh<mesh_type>& dm, const pipeline_choice& choice = {})
      : dm_(dm), pp_(pipeline_of(dm, choice)), own_sdm_(stage_mesh_of(dm)), sdm_(stage_mesh_ref(dm, own_sdm_)),
        model_(cfg, shard_of(dm, sdm_), false),
        store_(sdm_, model_, param_list(model_, pp_), ps.pp >= 0 ? pp_.plan.stages : cfg.n_layers + 1), tp_(sdm_),
        cp_(cp_of(sdm_)), hooks_{*this} {
    if constexpr (ps.ac.any()) model_.set_checkpointing(ps.ac, ps.sequence_parallel);
    keep_stored_weights();
  }
  parallel_llama(const parallel_llama&) = delete;
  parallel_llama& operator=(const parallel_llama&) = delete;

  device_mesh<mesh_type>& mesh() noexcept { return dm_; }
  const llama_config& config() const noexcept { return model_.config(); }
  model_type& model() noexcept { return model_; }
  /// This rank's stored blocks (the optimizer's domain) and their gradients, in K's memory.
  /// params() and stored(i) hand the weights out for writing: the kept bf16 copies round again.
  arena<float, space>& params() noexcept { return model_.weights_changed(), store_.params(); }
  arena<float, space>& grads() noexcept { return store_.grads(); }
  float* stored(std::int64_t i) { return model_.weights_changed(), store_.stored(i); }
  float* stored_grad(std::int64_t i) { return store_.stored_grad(i); }
  /// This rank's block of parameter i in global coordinates (what stored(i) holds; empty
  /// where another pipeline stage holds it). Checkpoints save and load these boxes.
  box storage_box(std::int64_t i) const { return store_.storage_box(i); }
  /// Parameter i's global shape.
  shape_t global_shape(std::int64_t i) const { return param_global_shape(model_.entry(i)); }

  /// The same values on every layout as llama_model::init_weights on one rank; each rank
  /// draws only up to the end of its own blocks (init_param_boxes: host threads, no whole tensor).
  void init_weights(std::uint64_t seed) {
    model_.weights_changed();
    init_param_boxes(
        cfg, seed, [this](std::int64_t i) { return store_.storage_box(i); },
        [this](std::int64_t i) -> float* { return K::space::host_accessible ? store_.stored(i) : nullptr; },
        [this](std::int64_t i, const float* v) {
          K::to_device(store_.stored(i), v, static_cast<std::int64_t>(store_.stored_numel(i)));
        });
  }
  /// Keeps this rank's block of the whole parameter `full` (every rank passes the same).
  void set_full(std::int64_t i, const float* full) { model_.weights_changed(), store_.set_full(i, full); }
  /// One AdamW step over the stored blocks (basic_trainer's optimizer; n = params().size()),
  /// which with bf16 operands writes the kept copies of the weights too (keep_stored_weights).
  void adamw_update(const float* g, float* m, float* v, std::int64_t n, std::int64_t step,
                    const cpu::adamw_config& cfg) {
    model_.adamw_update(store_.params().data(), g, m, v, n, step, cfg);
  }
  /// The whole parameter i, or its gradient, on every rank (collective; under a pipeline
  /// the stage that holds it sends it to the others).
  std::vector<float> full_param(std::int64_t i) { return over_stages(store_.gather_whole(i, store_.stored(i))); }
  std::vector<float> full_grad(std::int64_t i) { return over_stages(store_.gather_whole(i, stored_grad(i))); }
  /// The pipeline (stages, their layers and ranks, the schedule; a single stage without
  /// pipeline_parallel).
  const pipeline_layout& stage_layout() const noexcept { return pp_; }
  /// Under a pipeline: the peak bytes of the microbatches' activations in flight in the last
  /// step (0 without a pipeline: the model's own activations, model().activation_bytes()).
  std::int64_t pipeline_activation_peak() const noexcept { return stages_.peak_activation_bytes(); }
  /// Under a pipeline: records every compute action (kind, stage, microbatch, start, end)
  /// of the following steps into `out` (nullptr stops).
  void record_pipeline_timing(std::vector<pipeline_timing>* out) noexcept { stages_.record_timing(out); }
  /// Under a pipeline: the FSDP actions (gathers, frees, gradient reductions) of the last step.
  const pipeline_fsdp_counts& pipeline_fsdp() const noexcept { return stages_.fsdp_counts(); }

  void zero_grad() { K::zero(store_.grads().data(), static_cast<std::int64_t>(store_.grads().size())); }

  /// Forward of the global batch [B, T] (every rank passes the same ids; each keeps its
  /// rows). Returns the mean loss over all tokens of the batch on every rank. `loss_scale`
  /// as llama_model::forward (1 / accumulation steps).
  float forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t B,
                std::int64_t T, bool need_backward = true, float loss_scale = 1.0f) {
    check(static_cast<std::int64_t>(inputs.size()) == B * T && static_cast<std::int64_t>(targets.size()) == B * T,
          "parallel_llama::forward: inputs and targets must hold B*T = " + std::to_string(B * T) + " ids");
    tp_.set_batch(B, T);
    const shape_t tok_shape{B, T};
    const box b = local_box(types::tokens::spec, sdm_.shape(), tok_shape, sdm_.coords());
    check(b.size[0] > 0, "parallel_llama: the global batch (" + std::to_string(B) + ") is smaller than the " +
                             std::to_string(data_parallel_size()) +
                             " data-parallel ranks; raise --batch");
    const auto [in_mine, tg_mine, Tm] = my_tokens(inputs, targets, b.offset[0], b.size[0], T);
    const std::int64_t count_all = cpu::count_targets(targets.data(), B * T, cfg.vocab_size);
    if constexpr (ps.pp >= 0) {
      const std::string problem = parallel::pp_batch_problem(B, data_parallel_size(), pp_.microbatches());
      if (!problem.empty()) throw error(problem);
      const float local = stages_.run(in_mine, tg_mine, b.size[0], Tm, count_all, need_backward, loss_scale);
      return static_cast<float>(sum_pp(sum_over<ps.token_mask()>(static_cast<double>(local))));
    }
    const std::int64_t count_mine = cpu::count_targets(tg_mine.data(), b.size[0] * Tm, cfg.vocab_size);
    const float share = count_all ? static_cast<float>(count_mine) / static_cast<float>(count_all) : 0.0f;
    const float local = model_.forward(in_mine, tg_mine, b.size[0], Tm, need_backward, loss_scale * share, hooks_);
    // the mean over all tokens: this rank's mean weighted by its share, summed over the batch and cp axes
    return static_cast<float>(sum_over<ps.token_mask()>(static_cast<double>(local) * share));
  }
  /// The backward of the last forward (under a pipeline it ran inside forward()).
  void backward() {
    if constexpr (ps.pp < 0) model_.backward(hooks_);
  }

  /// The global L2 norm of the gradient: each stored block's squares summed over the axes
  /// that split it (a replicated copy counts once).
  double grad_norm() {
    double total = 0;
    for (int s = 0; s < 4; ++s) {
      double part = 0;
      bool any = false;
      for (std::int64_t i = 0; i < model_.n_tensors(); ++i) {
        if (static_cast<int>(store_.info(i).style) != s) continue;
        any = true;
        part += K::sum_of_squares(stored_grad(i), static_cast<std::int64_t>(store_.stored_numel(i)));
      }
      if (!any) continue;
      parallel::visit_style(static_cast<tp_style>(s), [&, this]<tp_style S, int R>() {
        total += this->template sum_over<parallel::norm_mask(ps, S, R)>(part);
      });
    }
    return std::sqrt(sum_pp(total));
  }

  /// What the recipe compiled to: per TP style, the parameter layouts and the plans that
  /// unshard a parameter and reduce its gradient; the activation plans of a TP region.
  static std::string summary() {
    const std::span<const std::string_view> names(mesh_type::names);
    auto steps = [&]<class P>() {
      std::string t;
      for (int k = 0; k < P::size; ++k) t += (k ? ", " : "") + to_string(P::value[k], mesh_type::names);
      return P::size ? t : std::string("nothing");
    };
    std::string out;
    auto style_line = [&]<tp_style S, int R>(std::string_view what) {
      using L = parallel::param_layouts<stage_mesh_type, ps, S, R>;
      out += std::string(what) + ": stored " + to_canonical_string(L::storage::spec, names) + ", computed " +
             to_canonical_string(L::compute::spec, names) + "; unshard = " +
             steps.template operator()<plan_t<typename L::storage, typename L::compute, float>>() +
             "; gradient " + to_canonical_string(L::grad::spec, names) + " -> stored = " +
             steps.template operator()<plan_t<typename L::grad, typename L::storage, float>>() + "\n";
    };
    style_line.template operator()<tp_style::colwise, 2>("column-wise (wq wk wv w1 w3)");
    style_line.template operator()<tp_style::rowwise, 2>("row-wise (wo w2)");
    style_line.template operator()<tp_style::vocab, 2>("vocabulary (embedding, output)");
    style_line.template operator()<tp_style::replicated, 1>("norms");
    using residual_l = typename types::residual;
    out += "activations [B, T, D]: residual " + to_canonical_string(residual_l::spec, names) + "; into a column-parallel "
           "region = " + steps.template operator()<plan_t<residual_l, typename types::replicated, float>>() +
           "; out of a row-parallel region = " +
           steps.template operator()<plan_t<typename types::partial, residual_l, float>>() + "\n";
    return out;
  }

  /// Under context_parallel: its attention (the cp group, this rank's token positions).
  const parallel::basic_cp_attention<K>& context() const { return *cp_; }

  /// Under cp_documents: attention runs on this rank's rows [first, first + n) next (a
  /// pipeline's microbatch; pipeline_stages calls it).
  void attention_rows(std::int64_t first, std::int64_t n) {
    if constexpr (ps.cp >= 0) {
      cp_->use_rows(first, n);
      if constexpr (ps.context.balance == cp_balance_kind::per_document)  // the rows' own RoPE positions
        model_.set_positions(std::vector<std::int64_t>(cp_->row_positions(cp_->rank(), first),
                                                       cp_->row_positions(cp_->rank(), first + n)));
    }
  }

  /// The size of the cp axis (1 without context_parallel).
  std::int64_t context_parallel_size() const { return ps.cp >= 0 ? sdm_.shape()[ps.cp] : 1; }

  /// The number of data-parallel ranks (the batch axes' group).
  std::int64_t data_parallel_size() const { return group_size(sdm_.shape(), batch_group()); }

  /// Bytes of this rank's stored parameters and gradients.
  std::int64_t stored_bytes() const {
    return static_cast<std::int64_t>(store_.params().size() + store_.grads().size()) * 4;
  }

 private:
  /// The mesh a pipeline stage spans: the recipe's with the pp axis of size 1 (the mesh
  /// itself without pipeline_parallel). Parameters and activations have their layouts, and
  /// plans their collectives, on it: inside a stage nothing is replicated over pp.
  using stage_mesh_type = collapse_axis_t<mesh_type, ps.pp>;
  using types = parallel::layout_types<stage_mesh_type, ps>;
  using store_type = parallel::sharded_params<stage_mesh_type, ps, model_type, K>;
  static constexpr bool own_stage_mesh = !std::is_same_v<stage_mesh_type, mesh_type>;
  friend class pipeline_stages<parallel_llama>;

  /// The hooks the model calls: FSDP at the begin and end of each part, TP's plans where a
  /// layout changes.
  struct hooks : basic_local_attention<K> {
    parallel_llama& o;
    explicit hooks(parallel_llama& p) : o(p) {}
    void forward_begin(std::int64_t u) {
      o.store_.unshard(u);
      if (u < cfg.n_layers - 1) o.store_.unshard(u + 1, true);  // prefetch: the next block's gathers run while this one does
      if (u == o.model_.ends_part() && cfg.n_layers > 0) o.store_.unshard(0, true);
    }
    void forward_end(std::int64_t u) {
      if (u == o.model_.ends_part()) return;  // the head's output layer runs first in backward
      const bool keep = ps.reshard_mode == reshard::never ||
                        (ps.reshard_mode == reshard::all_but_last && u == cfg.n_layers - 1);
      if (!keep) o.store_.reshard(u);
    }
    void backward_begin(std::int64_t u) {
      o.store_.unshard(u);
      o.store_.alloc_grads(u);
      if (u < o.model_.ends_part() && u > 0) o.store_.unshard(u - 1, true);  // prefetch for backward
    }
    void backward_end(std::int64_t u) {
      // a block's FSDP reduce-scatters stay in flight during the next block's backward; the root's, the
      // last, runs at once and finishes them
      o.store_.reduce_grads(u, u != o.model_.ends_part());
      o.store_.reshard(u);
    }
    const float* gather(const float* in, float* out) { return o.tp_.gather(in, out, cfg.dim); }
    const float* reduce(const float* in, float* out) { return o.tp_.reduce(in, out, cfg.dim); }
    bool overlaps(bool whole) { return o.tp_.overlaps(whole); }
    template <class F>
    const float* gather_each(const float* in, float* out, std::int64_t X, std::int64_t B, std::int64_t T, bool whole,
                             F&& fn) {
      return o.tp_.gather_each(in, out, X, B, T, whole, fn);
    }
    template <class F, class Add>
    const float* reduce_each(float* partial, float* out, std::int64_t X, std::int64_t B, std::int64_t T, bool whole,
                             F&& fn, Add&& add) {
      return o.tp_.reduce_each(partial, out, X, B, T, whole, fn, add);
    }
    template <class F>
    void each_part(const float* in, std::int64_t X, std::int64_t B, std::int64_t T, bool whole, F&& fn) {
      o.tp_.each_part(in, X, B, T, whole, fn);
    }
    void reduce_row_max(float* x) { o.tp_.reduce_row_max(x); }
    void reduce_row_stats(float* x) { o.tp_.reduce_row_stats(x); }
    void gather_logits(const float* in, float* out) { o.tp_.gather_logits(in, out, cfg.vocab_size); }
    void slice_logits(const float* in, float* out) { o.tp_.slice_logits(in, out, cfg.vocab_size); }
    void reduce_amax(float* amax, std::int64_t n) { o.tp_.reduce_amax(amax, n); }
    float* amax_staging(std::int64_t n) { return o.tp_.amax_staging(n); }
    void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                           const llama_dims& d) {
      if constexpr (ps.cp >= 0)
        o.cp_->forward(out, lse, q, k, v, d);
      else
        basic_local_attention<K>::attention_forward(out, lse, q, k, v, d);
    }
    void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                            const float* v, const float* out, const float* lse, const llama_dims& d) {
      if constexpr (ps.cp >= 0)
        o.cp_->backward(dq, dk, dv, dout, q, k, v, out, lse, d);
      else
        basic_local_attention<K>::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, d);
    }
  };

  device_mesh<mesh_type>& dm_;
  pipeline_layout pp_;
  std::unique_ptr<device_mesh<stage_mesh_type>> own_sdm_;  // under a pipeline: the stage's ranks
  device_mesh<stage_mesh_type>& sdm_;                      // the stage's mesh (dm_ without a pipeline)
  model_type model_;
  store_type store_;
  parallel::tp_activations<stage_mesh_type, ps, space> tp_;
  std::unique_ptr<parallel::basic_cp_attention<K>> cp_;  // under context_parallel
  std::vector<std::int32_t> cp_inputs_, cp_targets_;  // this rank's tokens of the batch's sequences
  space_buffer<double, space> scalars_;  // a device backend's loss and norm sums (sum_over), kept
  hooks hooks_;
  pipeline_stages<parallel_llama> stages_{*this};

  /// With bf16 operands (a backend that rounds them): the model keeps the bf16 copies of the
  /// weights computed on their stored blocks -- those no FSDP gather moves: TP, PP and CP shards
  /// -- as a model that owns its arena does (kernels/rounded_weights.hpp); a gathered weight is
  /// rounded for each GEMM. memory_estimate::kept_weights counts the same elements.
  void keep_stored_weights() {
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < model_.n_tensors(); ++i) {
      const parallel::param_info& p = store_.info(i);
      if (p.local && parallel::computed_on_stored(ps, p.style, p.shape.rank) &&
          bf16_multiplied(cfg, model_.shard().float8, model_.entry(i)))
        n += static_cast<std::int64_t>(store_.stored_numel(i));
    }
    model_.keep_rounded_weights(store_.params().data(), static_cast<std::int64_t>(store_.params().size()), n);
  }

  static std::unique_ptr<device_mesh<stage_mesh_type>> stage_mesh_of(device_mesh<mesh_type>& dm) {
    if constexpr (own_stage_mesh) {
      axis_group g;
      for (int a = 0; a < mesh_type::ndim; ++a)
        if (a != ps.pp) g.push(a);
      mesh_shape s = dm.shape();
      s.size[static_cast<std::size_t>(ps.pp)] = 1;
      if (g.n == 0) {  // the pp axis alone: a stage is one rank (its pp group split down to itself)
        auto& pp_group = dm.group(pp_axis_group());
        const int self = pp_group.rank();
        return std::make_unique<device_mesh<stage_mesh_type>>(stage_mesh_type(s),
                                                               pp_group.split(std::span<const int>(&self, 1)));
      }
      return std::make_unique<device_mesh<stage_mesh_type>>(stage_mesh_type(s), dm.group(g));
    } else {
      return nullptr;
    }
  }
  static axis_group pp_axis_group() {
    axis_group g;
    g.push(ps.pp < 0 ? 0 : ps.pp);
    return g;
  }
  static device_mesh<stage_mesh_type>& stage_mesh_ref(device_mesh<mesh_type>& dm,
                                                      std::unique_ptr<device_mesh<stage_mesh_type>>& own) {
    if constexpr (own_stage_mesh)
      return *own;
    else
      return dm;
  }
  /// The sum over the pp axis (the identity without a pipeline).
  double sum_pp(double x) { return over_stages(std::vector<double>{x})[0]; }
  static pipeline_layout pipeline_of(device_mesh<mesh_type>& dm, const pipeline_choice& c) {
    if constexpr (ps.pp >= 0) {
      const int pp = static_cast<int>(dm.shape()[ps.pp]);
      return pipeline_layout(traits::pipeline(pp, c), traits::pipeline_settings(c),
                             static_cast<int>(dm.coords()[ps.pp]));
    } else {
      check(c.empty(), "parallel_llama: pipeline choices given to a recipe without pipeline_parallel");
      return pipeline_layout::single(cfg);
    }
  }
  /// Under a pipeline: the sum over the pp axis (for a parameter, only the stage holding it
  /// filled `v`; the others hold zeros, so the sum is exact); the identity without one. A
  /// device backend's communicator moves device buffers (NCCL), so the values go through
  /// device memory there, as sum_over's do.
  template <class T>
  std::vector<T> over_stages(std::vector<T> v) {
    if constexpr (ps.pp >= 0) {
      std::vector<T> out(v.size());
      auto& group = dm_.group(pp_axis_group());
      if constexpr (space::host_accessible) {
        comm::all_reduce(group, std::span<const T>(v), std::span<T>(out), reduce_op::sum).wait();
      } else {
        const std::size_t n = v.size();
        space_vector<T, space> d(2 * n);
        space::from_host(d.data(), v.data(), n * sizeof(T));
        comm::all_reduce(group, std::span<const T>(d.data(), n), std::span<T>(d.data() + n, n), reduce_op::sum).wait();
        space::to_host(out.data(), d.data() + n, n * sizeof(T));
      }
      return out;
    } else {
      return v;
    }
  }

  static llama_shard shard_of(device_mesh<mesh_type>& dm, device_mesh<stage_mesh_type>& sdm) {
    traits::check_mesh(dm.shape());  // before the model checks the same sizes in its own words
    return parallel::llama_shard_of(cfg, ps, sdm.shape(), sdm.coords());
  }
  /// The FSDP runtime's view of the model's parameters: units are the model's parts, or
  /// under a pipeline its stages (only this rank's are local).
  static std::vector<parallel::param_info> param_list(const model_type& m, const pipeline_layout& pp) {
    std::vector<parallel::param_info> v;
    for (std::int64_t i = 0; i < m.n_tensors(); ++i) {
      const std::int64_t unit = ps.pp >= 0 ? pp.stage_of(m.entry(i).layer, i == 0) : m.part_of(i);
      v.push_back({m.name(i), param_style(m.entry(i)), param_global_shape(m.entry(i)), unit,
                   ps.pp < 0 || pp.local(static_cast<int>(unit)),
                   ps.float8.all_gather && m.shard().float8.covers(m.entry(i).role),
                   gemm_operand_only(cfg, m.shard().float8, m.entry(i))});
    }
    return v;
  }
  static std::unique_ptr<parallel::basic_cp_attention<K>> cp_of(device_mesh<stage_mesh_type>& sdm) {
    if constexpr (ps.cp >= 0) {
      axis_group g;
      g.push(ps.cp);
      return std::make_unique<parallel::basic_cp_attention<K>>(sdm.group(g), ps.context);
    } else {
      return nullptr;
    }
  }
  /// The ids and targets of this rank's rows [row0, row0 + rows) of the global batch: whole
  /// sequences, or under context_parallel the tokens at this cp rank's positions (which the
  /// model's RoPE then uses); and the tokens per sequence.
  struct token_part {
    std::span<const std::int32_t> inputs, targets;
    std::int64_t T;
  };
  token_part my_tokens(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                       std::int64_t row0, std::int64_t rows, std::int64_t T) {
    const auto lo = static_cast<std::size_t>(row0 * T), n = static_cast<std::size_t>(rows * T);
    if constexpr (ps.cp < 0) {
      return {inputs.subspan(lo, n), targets.subspan(lo, n), T};
    } else {
      cp_->set_sequence(T, parallel::cp_tp_split(ps, sdm_.shape()));
      cp_->set_documents(inputs.subspan(lo, n), rows);
      // balanced per document every row has its own positions (positions() holds them row after
      // row); under a pipeline each microbatch sets its rows' (attention_rows)
      constexpr bool per_row = ps.context.balance == cp_balance_kind::per_document;
      if constexpr (!per_row || ps.pp < 0) model_.set_positions(cp_->positions());
      const std::int64_t Tm = cp_->local_length();
      cp_inputs_.resize(static_cast<std::size_t>(rows * Tm));
      cp_targets_.resize(cp_inputs_.size());
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t* p = cp_->row_positions(cp_->rank(), r);
        for (std::int64_t j = 0; j < Tm; ++j) {
          const auto from = static_cast<std::size_t>((row0 + r) * T + p[j]);
          cp_inputs_[static_cast<std::size_t>(r * Tm + j)] = inputs[from];
          cp_targets_[static_cast<std::size_t>(r * Tm + j)] = targets[from];
        }
      }
      return {cp_inputs_, cp_targets_, Tm};
    }
  }
  static axis_group batch_group() {
    axis_group g;
    if (ps.dp_replicate >= 0) g.push(ps.dp_replicate);
    if (ps.dp_shard >= 0) g.push(ps.dp_shard);
    return g;
  }

  /// The sum of `x` over the ranks of the axes in Mask (a [1] tensor partial over them, reduced by its plan).
  template <unsigned Mask>
  double sum_over(double x) {
    using from = typename types::template scalar_partial<Mask>;
    using to = typename types::scalar;
    double total = 0;
    if constexpr (space::host_accessible) {
      redistribute_local<from, to>(sdm_, shape_t{1}, &x, &total);
    } else {  // the mesh's communicator moves device buffers
      reserve_buffer<double, space>(scalars_, 2);
      space::from_host(scalars_.data(), &x, sizeof x);
      redistribute_local<from, to, default_cost_model, space>(sdm_, shape_t{1}, scalars_.data(), scalars_.data() + 1);
      space::to_host(&total, scalars_.data() + 1, sizeof total);
    }
    return total;
  }
};

}  // namespace tessera::train
