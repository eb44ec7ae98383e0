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
//   - TP's activation changes run through parallel/tensor_parallel.hpp.
// Besides, it splits the global batch over the data-parallel axes, averages the loss over
// all tokens, and computes the gradient norm over every stored block.
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
#include <tessera/parallel/fsdp.hpp>
#include <tessera/parallel/llama_plan.hpp>
#include <tessera/parallel/tensor_parallel.hpp>
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
      : dm_(dm), model_(cfg, shard_of(dm), false), store_(dm, model_, param_list(model_), cfg.n_layers + 1),
        tp_(dm), hooks_{*this} {}
  parallel_llama(const parallel_llama&) = delete;
  parallel_llama& operator=(const parallel_llama&) = delete;

  device_mesh<mesh_type>& mesh() noexcept { return dm_; }
  const llama_config& config() const noexcept { return model_.config(); }
  llama_model& model() noexcept { return model_; }
  /// This rank's stored blocks (the optimizer's domain) and their gradients.
  arena<float>& params() noexcept { return store_.params(); }
  arena<float>& grads() noexcept { return store_.grads(); }
  float* stored(std::int64_t i) { return store_.stored(i); }
  float* stored_grad(std::int64_t i) { return store_.stored_grad(i); }

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
  void set_full(std::int64_t i, const float* full) { store_.set_full(i, full); }
  /// The whole parameter i, or its gradient, on every rank (collective).
  std::vector<float> full_param(std::int64_t i) { return store_.gather_whole(i, stored(i)); }
  std::vector<float> full_grad(std::int64_t i) { return store_.gather_whole(i, stored_grad(i)); }

  void zero_grad() { store_.grads().zero(); }

  /// Forward of the global batch [B, T] (every rank passes the same ids; each keeps its
  /// rows). Returns the mean loss over all tokens of the batch on every rank. `loss_scale`
  /// as llama_model::forward (1 / accumulation steps).
  float forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t B,
                std::int64_t T, bool need_backward = true, float loss_scale = 1.0f) {
    check(static_cast<std::int64_t>(inputs.size()) == B * T && static_cast<std::int64_t>(targets.size()) == B * T,
          "parallel_llama::forward: inputs and targets must hold B*T = " + std::to_string(B * T) + " ids");
    tp_.set_batch(B, T);
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
        if (static_cast<int>(store_.info(i).style) != s) continue;
        any = true;
        const float* g = stored_grad(i);
        for (std::size_t k = 0, e = store_.stored_numel(i); k < e; ++k) part += static_cast<double>(g[k]) * g[k];
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
      using L = parallel::param_layouts<mesh_type, ps, S, R>;
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

  /// Bytes of this rank's stored parameters and gradients.
  std::int64_t stored_bytes() const {
    return static_cast<std::int64_t>(store_.params().size() + store_.grads().size()) * 4;
  }

 private:
  using types = parallel::layout_types<mesh_type, ps>;
  using store_type = parallel::sharded_params<mesh_type, ps, llama_model>;

  /// The hooks the model calls: FSDP at the begin and end of each part, TP's plans where a
  /// layout changes.
  struct hooks : local_attention {
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
      o.store_.reduce_grads(u);
      o.store_.reshard(u);
    }
    const float* gather(const float* in, float* out) { return o.tp_.gather(in, out, cfg.dim); }
    const float* reduce(const float* in, float* out) { return o.tp_.reduce(in, out, cfg.dim); }
    void reduce_row_max(float* x) { o.tp_.reduce_row_max(x); }
    void reduce_row_stats(float* x) { o.tp_.reduce_row_stats(x); }
    void gather_logits(const float* in, float* out) { o.tp_.gather_logits(in, out, cfg.vocab_size); }
    void slice_logits(const float* in, float* out) { o.tp_.slice_logits(in, out, cfg.vocab_size); }
  };

  device_mesh<mesh_type>& dm_;
  llama_model model_;
  store_type store_;
  parallel::tp_activations<mesh_type, ps> tp_;
  hooks hooks_;

  static llama_shard shard_of(device_mesh<mesh_type>& dm) {
    traits::check_mesh(dm.shape());  // before the model checks the same sizes in its own words
    return parallel::llama_shard_of(cfg, ps, dm.shape(), dm.coords());
  }
  /// The FSDP runtime's view of the model's parameters: units are the model's parts.
  static std::vector<parallel::param_info> param_list(const llama_model& m) {
    std::vector<parallel::param_info> v;
    for (std::int64_t i = 0; i < m.n_tensors(); ++i)
      v.push_back({m.name(i), param_style(m.entry(i)), param_global_shape(m.entry(i)), m.part_of(i)});
    return v;
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
    double total = 0;
    redistribute_local<typename types::template scalar_partial<Mask>, typename types::scalar>(dm_, shape_t{1}, &x,
                                                                                              &total);
    return total;
  }
};

}  // namespace tessera::train
