// tessera/train/parallel_llama.hpp: a recipe's Llama model on a device mesh.
// tessera-requires: openblas
//
// parallel_llama<Recipe> owns this rank's stored parameter blocks (f32 master weights,
// layout storage_spec: TP, then FSDP) and gradient blocks, and runs the model's forward and
// backward through hooks that move data only by the planner's plans:
//   - an FSDP unit (a block, or the root: embedding, final norm, output) is unsharded by the
//     plan storage -> compute (all-gathers over the dp axis, in bf16 under mixed precision)
//     before its forward; the next unit's gathers are issued asynchronously right after
//     (prefetch, as FSDP2) and waited for when that unit begins, so they run while this unit
//     computes where the backend progresses them (a plan of one even all-gather along dim 0,
//     the FSDP case; other plans run when issued); a unit is freed after forward as
//     reshard_after_forward says (the root stays until its backward);
//   - after a unit's backward its gradients, laid out as grad_spec (partial over the batch
//     axes, and over tp for sequence-parallel norms), go through the plan grad -> storage
//     (reduce-scatter / all-reduce) and are added to the stored gradient blocks;
//   - TP's activation changes are the plans residual <-> replicated <-> partial, the
//     logits' vocab gather, and loss parallel's row-statistic reductions.
// Where a plan moves nothing (no FSDP, no TP) the model is bound straight to the stored
// blocks and nothing is copied.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tessera/comm/communicator.hpp>
#include <tessera/core/error.hpp>
#include <tessera/layout/print.hpp>
#include <tessera/model/llama.hpp>
#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/device_mesh.hpp>
#include <tessera/tensor/dtype.hpp>
#include <tessera/tensor/redistribute.hpp>
#include <tessera/train/recipe.hpp>

namespace tessera::train {

template <class Recipe>
class parallel_llama {
 public:
  using traits = recipe_traits<Recipe>;
  using mesh_type = typename traits::mesh_type;
  static constexpr parallel_spec ps = traits::spec;
  static constexpr llama_config cfg = traits::config;

  explicit parallel_llama(device_mesh<mesh_type>& dm)
      : dm_(dm), model_(cfg, shard_of(dm), false), hooks_{*this} {
    const std::int64_t n = model_.n_tensors();
    arena_layout layout;
    for (std::int64_t i = 0; i < n; ++i) {
      const box b = storage_box(i);
      std::vector<std::int64_t> shape(b.size.begin(), b.size.begin() + b.rank);
      layout.add(model_.name(i), std::span<const std::int64_t>(shape));
    }
    master_ = arena<float>(layout);
    grads_ = arena<float>(layout);
    units_.resize(static_cast<std::size_t>(cfg.n_layers + 1));
    for (std::int64_t i = 0; i < n; ++i) units_[static_cast<std::size_t>(model_.unit_of(i))].params.push_back(i);
  }
  parallel_llama(const parallel_llama&) = delete;
  parallel_llama& operator=(const parallel_llama&) = delete;

  device_mesh<mesh_type>& mesh() noexcept { return dm_; }
  const llama_config& config() const noexcept { return model_.config(); }
  llama_model& model() noexcept { return model_; }
  /// This rank's stored blocks (the optimizer's domain) and their gradients.
  arena<float>& params() noexcept { return master_; }
  arena<float>& grads() noexcept { return grads_; }
  float* stored(std::int64_t i) { return master_.data() + slot(i).offset; }
  float* stored_grad(std::int64_t i) { return grads_.data() + slot(i).offset; }

  /// The same values on every layout as llama_model::init_weights on one rank.
  void init_weights(std::uint64_t seed) {
    std::vector<float> full;
    for (std::int64_t i = 0; i < model_.n_tensors(); ++i) {
      full.resize(static_cast<std::size_t>(model_.entry(i).shape.numel()));
      init_param(cfg, i, seed, full.data());
      set_full(i, full.data());
    }
  }
  /// Keeps this rank's block of the whole parameter `full` (every rank passes the same).
  void set_full(std::int64_t i, const float* full) {
    const shape_t g = global_shape(i);
    const box b = storage_box(i);
    box whole;
    whole.rank = g.rank;
    whole.size = g.extent;
    tessera::detail::copy_region(full, whole, stored(i), b, b);
  }
  /// The whole parameter i, or its gradient, on every rank (collective).
  std::vector<float> full_param(std::int64_t i) { return gather_whole(i, stored(i)); }
  std::vector<float> full_grad(std::int64_t i) { return gather_whole(i, stored_grad(i)); }

  void zero_grad() { grads_.zero(); }

  /// Forward of the global batch [B, T] (every rank passes the same ids; each keeps its
  /// rows). Returns the mean loss over all tokens of the batch on every rank. `loss_scale`
  /// as llama_model::forward (1 / accumulation steps).
  float forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t B,
                std::int64_t T, bool need_backward = true, float loss_scale = 1.0f) {
    check(static_cast<std::int64_t>(inputs.size()) == B * T && static_cast<std::int64_t>(targets.size()) == B * T,
          "parallel_llama::forward: inputs and targets must hold B*T = " + std::to_string(B * T) + " ids");
    B_ = B, T_ = T;
    const shape_t tok_shape{B, T};
    const box b = local_box(types::tokens::spec, dm_.shape(), tok_shape, dm_.coords());
    check(b.size[0] > 0, "parallel_llama: the global batch (" + std::to_string(B) + ") is smaller than the " +
                             std::to_string(group_size(dm_.shape(), batch_group())) +
                             " data-parallel ranks; raise --batch");
    const auto lo = static_cast<std::size_t>(b.offset[0] * T), n = static_cast<std::size_t>(b.size[0] * T);
    const std::int64_t count_all = cpu::count_targets(targets.data(), B * T, cfg.vocab_size);
    const std::int64_t count_mine = cpu::count_targets(targets.data() + lo, b.size[0] * T, cfg.vocab_size);
    const float share = count_all ? static_cast<float>(count_mine) / static_cast<float>(count_all) : 0.0f;
    const float local = model_.forward(inputs.subspan(lo, n), targets.subspan(lo, n), b.size[0], T, need_backward,
                                       loss_scale * share, hooks_);
    // the mean over all tokens: this rank's mean weighted by its share, summed over the batch axes
    return static_cast<float>(sum_over<ps.batch_mask()>(static_cast<double>(local) * share));
  }
  void backward() { model_.backward(hooks_); }

  /// The global L2 norm of the gradient: each stored block's squares summed over the axes
  /// that split it (a replicated copy counts once).
  double grad_norm() {
    double total = 0;
    for (int s = 0; s < 4; ++s) {
      double part = 0;
      bool any = false;
      for (std::int64_t i = 0; i < model_.n_tensors(); ++i) {
        if (static_cast<int>(style_of(i)) != s) continue;
        any = true;
        const float* g = stored_grad(i);
        for (std::size_t k = 0, e = slot(i).numel; k < e; ++k) part += static_cast<double>(g[k]) * g[k];
      }
      if (!any) continue;
      parallel::visit_style(static_cast<tp_style>(s), [&]<tp_style S, int R>() {
        total += sum_over<parallel::norm_mask(ps, S, R)>(part);
      });
    }
    return std::sqrt(total);
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
      using L = style_layouts<S, R>;
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
    out += "activations [B, T, D]: residual " + to_canonical_string(residual_l::spec, names) + "; into a column-parallel "
           "region = " + steps.template operator()<plan_t<residual_l, replicated_l, float>>() +
           "; out of a row-parallel region = " + steps.template operator()<plan_t<partial_l, residual_l, float>>() + "\n";
    return out;
  }

  /// Bytes of this rank's stored parameters and gradients.
  std::int64_t stored_bytes() const { return static_cast<std::int64_t>(master_.size() + grads_.size()) * 4; }

 private:
  using types = parallel::layout_types<mesh_type, ps>;
  template <tp_style S, int R>
  struct style_layouts {
    using compute = typename types::template param<S, R>::compute;
    using storage = typename types::template param<S, R>::storage;
    using grad = typename types::template param<S, R>::grad;
    static constexpr bool direct_param = compute::spec == storage::spec && !ps.bf16_params;
    static constexpr bool direct_grad = grad::spec == storage::spec;
    using param_t = std::conditional_t<ps.bf16_params, bf16, float>;
    using unshard_plan = plan_t<storage, compute, param_t>;
    /// One all-gather along dim 0: with even blocks, rank k's block lands at k * block of
    /// the output, so the call can be issued on the buffers and waited for later.
    static constexpr bool async_gather = unshard_plan::size == 1 && unshard_plan::value[0].kind == step_kind::all_gather &&
                                         unshard_plan::value[0].dim == 0;
  };
  using residual_l = typename types::residual;
  using replicated_l = typename types::replicated;
  using partial_l = typename types::partial;
  using vocab_l = typename types::vocab;

  struct unit_state {
    std::vector<std::int64_t> params;
    std::vector<tensor<float>> p, g;  // gathered parameters / their gradients (empty when bound directly)
    bool gathered = false;
    std::vector<comm::any_request> pending;  // prefetch gathers not yet waited for
    std::vector<std::pair<std::size_t, std::vector<bf16>>> half;  // bf16 gathers of those, by parameter
  };

  /// The hooks the model calls; every one runs a plan.
  struct hooks {
    parallel_llama& o;
    void forward_begin(std::int64_t u) {
      o.unshard(u);
      if (u < cfg.n_layers - 1) o.unshard(u + 1, true);  // prefetch: the next block's gathers run while this one does
      if (u == o.model_.root_unit() && cfg.n_layers > 0) o.unshard(0, true);
    }
    void forward_end(std::int64_t u) {
      if (u == o.model_.root_unit()) return;  // the root's output layer runs first in backward
      const bool keep = ps.reshard_mode == reshard::never ||
                        (ps.reshard_mode == reshard::all_but_last && u == cfg.n_layers - 1);
      if (!keep) o.reshard(u);
    }
    void backward_begin(std::int64_t u) {
      o.unshard(u);
      o.alloc_grads(u);
      if (u < o.model_.root_unit() && u > 0) o.unshard(u - 1, true);  // prefetch for backward
    }
    void backward_end(std::int64_t u) {
      o.reduce_grads(u);
      o.reshard(u);
    }
    const float* gather(const float* in, float* out) { return o.move<residual_l, replicated_l>(in, out, cfg.dim); }
    const float* reduce(const float* in, float* out) { return o.move<partial_l, residual_l>(in, out, cfg.dim); }
    void reduce_row_max(float* x) {
      o.move_inplace<typename types::template row_stat_partial<reduce::max>, typename types::row_stat>(x, 1);
    }
    void reduce_row_stats(float* x) {
      o.move_inplace<typename types::template row_stat_partial<reduce::sum>, typename types::row_stat>(x, 2);
    }
    void gather_logits(const float* in, float* out) { o.move<vocab_l, replicated_l>(in, out, cfg.vocab_size); }
    void slice_logits(const float* in, float* out) { o.move<replicated_l, vocab_l>(in, out, cfg.vocab_size); }
  };

  device_mesh<mesh_type>& dm_;
  llama_model model_;
  hooks hooks_;
  arena<float> master_, grads_;
  std::vector<unit_state> units_;
  std::int64_t B_ = 0, T_ = 0;
  std::vector<float> stage_;
  std::vector<bf16> half_in_, half_out_;

  static llama_shard shard_of(device_mesh<mesh_type>& dm) {
    traits::check_mesh(dm.shape());  // before the model checks the same sizes in its own words
    llama_shard s;
    if constexpr (ps.tp >= 0) {
      s.tp_size = dm.shape()[ps.tp];
      s.tp_rank = dm.coords()[static_cast<std::size_t>(ps.tp)];
    }
    s.sequence_parallel = ps.sequence_parallel;
    s.loss_parallel = ps.loss_parallel;
    return s;
  }
  static axis_group batch_group() {
    axis_group g;
    if (ps.dp_replicate >= 0) g.push(ps.dp_replicate);
    if (ps.dp_shard >= 0) g.push(ps.dp_shard);
    return g;
  }

  const arena_slot& slot(std::int64_t i) const { return master_.layout().slots()[static_cast<std::size_t>(i)]; }
  tp_style style_of(std::int64_t i) const { return param_style(model_.entry(i)); }
  shape_t global_shape(std::int64_t i) const { return param_global_shape(model_.entry(i)); }
  box storage_box(std::int64_t i) const {
    box b;
    parallel::visit_style(style_of(i), [&]<tp_style S, int R>() {
      b = local_box(style_layouts<S, R>::storage::spec, dm_.shape(), global_shape(i), dm_.coords());
    });
    return b;
  }
  /// Calls f.template operator()<S, R>() for parameter i's style.
  template <class F>
  void with_style(std::int64_t i, F&& f) const {
    parallel::visit_style(style_of(i), f);
  }

  /// Parameter i's stored block `block` (values or gradients) gathered whole on every rank.
  std::vector<float> gather_whole(std::int64_t i, const float* block) {
    std::vector<float> out(static_cast<std::size_t>(model_.entry(i).shape.numel()));
    with_style(i, [&]<tp_style S, int R>() {
      redistribute_local<typename style_layouts<S, R>::storage, layout<mesh_type, replicated_spec(R, mesh_type::ndim)>>(
          dm_, global_shape(i), block, out.data());
    });
    return out;
  }
  /// The sum of `x` over the ranks of the axes in Mask (a [1] tensor partial over them, reduced by its plan).
  template <unsigned Mask>
  double sum_over(double x) {
    double total = 0;
    redistribute_local<typename types::template scalar_partial<Mask>, typename types::scalar>(dm_, shape_t{1}, &x,
                                                                                              &total);
    return total;
  }

  /// An activation [B, T, X] from layout Src to Dst; returns `in` when the plan is empty.
  template <class Src, class Dst>
  const float* move(const float* in, float* out, std::int64_t X) {
    if constexpr (plan_t<Src, Dst, float>::size == 0) {
      return in;
    } else {
      redistribute_local<Src, Dst>(dm_, shape_t{B_, T_, X}, in, out);
      return out;
    }
  }
  template <class Src, class Dst>
  void move_inplace(float* x, std::int64_t X) {
    if constexpr (plan_t<Src, Dst, float>::size != 0) {
      const shape_t g{B_, T_, X};
      stage_.resize(static_cast<std::size_t>(local_numel<Dst>(dm_, g)));
      redistribute_local<Src, Dst>(dm_, g, x, stage_.data());
      std::copy(stage_.begin(), stage_.end(), x);
    }
  }

  /// Gathers unit u's parameters (plan storage -> compute) and binds the model to them.
  /// `prefetch`: issue what can run asynchronously and return; unshard(u) waits for it.
  void unshard(std::int64_t u, bool prefetch = false) {
    unit_state& st = units_[static_cast<std::size_t>(u)];
    if (st.gathered) {
      if (!prefetch) ready(st);
      return;
    }
    st.p.resize(st.params.size());
    for (std::size_t k = 0; k < st.params.size(); ++k) {
      const std::int64_t i = st.params[k];
      with_style(i, [&]<tp_style S, int R>() {
        using L = style_layouts<S, R>;
        if constexpr (L::direct_param) {
          model_.bind(i, stored(i), model_.grad(i));
        } else {
          const shape_t g = global_shape(i);
          st.p[k] = tensor<float>({local_numel<typename L::compute>(dm_, g)});
          float* out = st.p[k].data();
          model_.bind(i, out, model_.grad(i));
          const std::size_t n_in = slot(i).numel, n_out = static_cast<std::size_t>(st.p[k].numel());
          if constexpr (L::async_gather) {
            if (prefetch && is_even(L::storage::spec, dm_.shape(), g)) {
              auto& c = dm_.group(L::unshard_plan::value[0].group);
              if constexpr (ps.bf16_params) {
                auto& h = st.half.emplace_back(k, std::vector<bf16>(n_in + n_out)).second;
                for (std::size_t e = 0; e < n_in; ++e) h[e] = bf16(stored(i)[e]);
                st.pending.push_back(comm::all_gather(c, std::span<const bf16>(h.data(), n_in),
                                                      std::span<bf16>(h.data() + n_in, n_out)));
              } else {
                st.pending.push_back(
                    comm::all_gather(c, std::span<const float>(stored(i), n_in), std::span<float>(out, n_out)));
              }
              return;
            }
          }
          if constexpr (ps.bf16_params) {  // gathered in bf16, computed in f32 (FSDP2 MixedPrecisionPolicy)
            half_in_.resize(n_in), half_out_.resize(n_out);
            for (std::size_t e = 0; e < n_in; ++e) half_in_[e] = bf16(stored(i)[e]);
            redistribute_local<typename L::storage, typename L::compute>(dm_, g, half_in_.data(), half_out_.data());
            for (std::size_t e = 0; e < n_out; ++e) out[e] = static_cast<float>(half_out_[e]);
          } else {
            redistribute_local<typename L::storage, typename L::compute>(dm_, g, stored(i), out);
          }
        }
      });
    }
    st.gathered = true;
    if (!prefetch) ready(st);
  }
  /// Waits for a unit's prefetch gathers (and widens bf16 ones to the f32 compute copies).
  void ready(unit_state& st) {
    for (auto& r : st.pending) r.wait();
    st.pending.clear();
    for (auto& [k, h] : st.half) {
      float* out = st.p[k].data();
      const std::size_t n_out = static_cast<std::size_t>(st.p[k].numel()), n_in = h.size() - n_out;
      for (std::size_t e = 0; e < n_out; ++e) out[e] = static_cast<float>(h[n_in + e]);
    }
    st.half.clear();
  }
  void reshard(std::int64_t u) {
    unit_state& st = units_[static_cast<std::size_t>(u)];
    ready(st);  // (every prefetched unit is begun before it is freed; this keeps buffers alive regardless)
    st.p.clear();
    st.gathered = false;
  }
  void alloc_grads(std::int64_t u) {
    unit_state& st = units_[static_cast<std::size_t>(u)];
    if (!st.g.empty()) return;
    st.g.resize(st.params.size());
    for (std::size_t k = 0; k < st.params.size(); ++k) {
      const std::int64_t i = st.params[k];
      with_style(i, [&]<tp_style S, int R>() {
        using L = style_layouts<S, R>;
        if constexpr (L::direct_grad && L::direct_param) {
          model_.bind(i, model_.param(i), stored_grad(i));
        } else {
          st.g[k] = tensor<float>({local_numel<typename L::compute>(dm_, global_shape(i))});  // zero-filled
          model_.bind(i, model_.param(i), st.g[k].data());
        }
      });
    }
  }
  void reduce_grads(std::int64_t u) {
    unit_state& st = units_[static_cast<std::size_t>(u)];
    for (std::size_t k = 0; k < st.params.size(); ++k) {
      const std::int64_t i = st.params[k];
      if (st.g[k].numel() == 0 && model_.grad(i) == stored_grad(i)) continue;  // accumulated in place
      with_style(i, [&]<tp_style S, int R>() {
        using L = style_layouts<S, R>;
        stage_.resize(slot(i).numel);
        redistribute_local<typename L::grad, typename L::storage>(dm_, global_shape(i), st.g[k].data(), stage_.data());
        float* dst = stored_grad(i);
        for (std::size_t e = 0; e < stage_.size(); ++e) dst[e] += stage_[e];
      });
    }
    st.g.clear();
  }
};

}  // namespace tessera::train
