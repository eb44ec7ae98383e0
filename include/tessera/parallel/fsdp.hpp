// tessera/parallel/fsdp.hpp: the FSDP runtime -- parameters stored sharded, gathered per
// unit before use, gradients reduced back to the shards (FSDP2's fully_shard, and HSDP).
//
// `parallel::sharded_params<Mesh, Spec>` knows no model. It is given a list of parameters
// (name, TP style, global shape, unit) and a model to bind (anything with
// bind(i, param, grad), param(i) and grad(i)), and keeps this rank's stored blocks (f32
// master weights in layout storage_spec: TP, then FSDP) and their gradients in two arenas:
//   - unshard(u) runs the plan storage -> compute for unit u's parameters (all-gathers over
//     the dp axis, in bf16 under mixed precision) and binds the model to the result;
//     unshard(u, prefetch = true) issues what can run asynchronously and returns (one even
//     all-gather along dim 0, the FSDP case; other plans run when issued), and the next
//     unshard(u) waits for it (FSDP2's prefetch);
//   - reshard(u) frees the gathered copies;
//   - alloc_grads(u) gives unit u's parameters gradient buffers in the compute layout, and
//     reduce_grads(u) runs the plan grad_spec -> storage_spec on them (reduce-scatter over
//     dp, all-reduce over HSDP's replicas and over tp for sequence-parallel norms) and adds
//     the result to the stored gradients; reduce_grads(u, overlap = true) leaves FSDP's
//     reduce-scatters in flight while the next unit's backward runs, and the next
//     reduce_grads (or finish_reductions()) adds them.
// Where a plan moves nothing (no FSDP, no TP) the model is bound straight to the stored
// blocks and nothing is copied. A gather in bf16 of a weight only GEMMs read (gemm_operand)
// is those GEMMs' operands on a backend that rounds them: the model's store of rounded
// weights adopts it until reshard(u), so its linears round nothing; where the operands are
// bf16 codes (cuda_bf16_kernels) the unit keeps the gathered codes only, half the f32
// copy's bytes (gathered_operands; memory_estimate::gathered_operands). Which unit runs
// when is the caller's (the model's hooks, or a pipeline schedule's UNSHARD / RESHARD /
// REDUCE_GRAD actions).
// The blocks live in kernel backend K's memory (cpu_kernels: the host's; cuda_kernels: the
// GPU's, over an nccl device mesh): gathers and reductions run the plans in K's space, bf16
// casts and gradient sums are K's kernels, and the space's fence runs before a collective is
// issued on buffers the backend's kernels wrote; the FP8 all-gather's amax, casts and codes too.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <tessera/comm/communicator.hpp>
#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/parallel/fsdp_params.hpp>
#include <tessera/parallel/layouts.hpp>
#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/detail/box_copy.hpp>
#include <tessera/tensor/device_mesh.hpp>
#include <tessera/tensor/dtype.hpp>
#include <tessera/tensor/redistribute.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera::parallel {

template <class Mesh, parallel_spec P, bindable_model Model, kernel_backend K = cpu_kernels>
class sharded_params {
 public:
  using space = typename K::space;
  /// How unit gathers of gemm_operand parameters reach the model's linears.
  static constexpr gathered_operands operands = adopting_model<Model, K> ? gathered_operands_of<K>(P.bf16_params)
                                                                          : gathered_operands::none;
  sharded_params(device_mesh<Mesh>& dm, Model& model, std::vector<param_info> params, std::int64_t n_units)
      : dm_(dm), model_(model), params_(std::move(params)), units_(static_cast<std::size_t>(n_units)) {
    arena_layout layout;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const box b = storage_box(static_cast<std::int64_t>(i));
      std::vector<std::int64_t> shape(b.size.begin(), b.size.begin() + b.rank);
      layout.add(params_[i].name, std::span<const std::int64_t>(shape));
      if (params_[i].local) units_[static_cast<std::size_t>(params_[i].unit)].params.push_back(static_cast<std::int64_t>(i));
    }
    master_ = arena<float, space>(layout);
    grads_ = arena<float, space>(layout);
  }
  sharded_params(const sharded_params&) = delete;
  sharded_params& operator=(const sharded_params&) = delete;

  std::int64_t size() const noexcept { return static_cast<std::int64_t>(params_.size()); }
  const param_info& info(std::int64_t i) const { return params_[static_cast<std::size_t>(i)]; }
  /// This rank's stored blocks (the optimizer's domain) and their gradients.
  arena<float, space>& params() noexcept { return master_; }
  arena<float, space>& grads() noexcept { return grads_; }
  const arena<float, space>& params() const noexcept { return master_; }
  const arena<float, space>& grads() const noexcept { return grads_; }
  float* stored(std::int64_t i) { return master_.data() + slot(i).offset; }
  float* stored_grad(std::int64_t i) { return grads_.data() + slot(i).offset; }
  std::size_t stored_numel(std::int64_t i) const { return slot(i).numel; }
  /// This rank's box of parameter i in the storage layout (empty when it is not local).
  box storage_box(std::int64_t i) const {
    box b;
    if (!info(i).local) {
      b.rank = static_cast<std::int8_t>(info(i).shape.rank);
      return b;
    }
    visit(i, [&, this]<tp_style S, int R>() {
      b = local_box(param_layouts<Mesh, P, S, R>::storage::spec, dm_.shape(), info(i).shape, dm_.coords());
    });
    return b;
  }

  /// Keeps this rank's block of the whole parameter `full` (every rank passes the same).
  void set_full(std::int64_t i, const float* full) {
    if (!info(i).local) return;
    const shape_t& g = info(i).shape;
    const box b = storage_box(i);
    const box whole = whole_box(g);
    if constexpr (space::host_accessible) {
      tessera::detail::copy_region(full, whole, stored(i), b, b);
    } else {  // the block on the host, then copied in
      std::vector<float> block(static_cast<std::size_t>(b.numel()));
      tessera::detail::copy_region(full, whole, block.data(), b, b);
      K::to_device(stored(i), block.data(), b.numel());
    }
  }
  /// Parameter i's stored block `block` (values or gradients, in K's memory) gathered whole
  /// on every rank, in host memory (zeros where it is not local: every rank of a dp / tp
  /// group holds the same stages).
  std::vector<float> gather_whole(std::int64_t i, const float* block) {
    std::vector<float> out(static_cast<std::size_t>(info(i).shape.numel()));
    if (!info(i).local) return out;
    space_buffer<float, space> whole;  // device memory: gathered there, then copied out
    float* to = out.data();
    if constexpr (!space::host_accessible) {
      reserve_buffer<float, space>(whole, out.size());
      to = whole.data();
    }
    visit(i, [&, this]<tp_style S, int R>() {
      using L = param_layouts<Mesh, P, S, R>;
      redistribute_local<typename L::storage, layout<Mesh, replicated_spec(R, Mesh::ndim)>, default_cost_model, space>(
          dm_, info(i).shape, block, to);
    });
    if constexpr (!space::host_accessible) K::to_host(out.data(), to, static_cast<std::int64_t>(out.size()));
    return out;
  }

  /// Gathers unit u's parameters (plan storage -> compute) and binds the model to them.
  /// `prefetch`: issue what can run asynchronously and return; unshard(u) waits for it.
  void unshard(std::int64_t u, bool prefetch = false) {
    unit_state& st = unit(u);
    if (st.gathered) {
      if (!prefetch) ready(st);
      return;
    }
    st.p.resize(st.params.size());
    if constexpr (operands == gathered_operands::codes) st.c.resize(st.params.size());
    for (std::size_t k = 0; k < st.params.size(); ++k) gather_param(st, k, prefetch);
    st.gathered = true;
    if (!prefetch) ready(st);
  }
  /// Frees unit u's gathered parameters.
  void reshard(std::int64_t u) {
    unit_state& st = unit(u);
    ready(st);  // (every prefetched unit is begun before it is freed; this keeps buffers alive regardless)
    if constexpr (operands != gathered_operands::none) {
      for (const float* w : st.adopted) model_.kept_store().release(w);
      st.adopted.clear();
    }
    st.p.clear();
    st.c.clear();
    st.gathered = false;
  }
  /// Binds unit u's gradients: to the stored gradients where the layouts agree, else to
  /// zeroed buffers of the compute layout.
  void alloc_grads(std::int64_t u) {
    unit_state& st = unit(u);
    if (!st.g.empty()) return;
    st.g.resize(st.params.size());
    for (std::size_t k = 0; k < st.params.size(); ++k) {
      const std::int64_t i = st.params[k];
      visit(i, [&, this]<tp_style S, int R>() {
        using L = param_layouts<Mesh, P, S, R>;
        if constexpr (L::direct_grad && L::direct_param) {
          bind_grad(i, stored_grad(i));
        } else {
          st.g[k] = tensor<float, space>({local_numel<typename L::compute>(dm_, info(i).shape)});  // zero-filled
          bind_grad(i, st.g[k].data());
        }
      });
    }
  }
  /// Reduces unit u's gradients (plan grad -> storage) into the stored gradients. `overlap`:
  /// the reductions that are one even reduce-scatter along dim 0 (FSDP's) are issued and left
  /// in flight, holding unit u's gradient buffers, until the next reduce_grads call or
  /// finish_reductions() adds them (FSDP2's reduce-scatter during the next block's backward);
  /// the reductions still in flight from before are finished first, so at most one unit's are.
  void reduce_grads(std::int64_t u, bool overlap = false) {
    finish_reductions();
    unit_state& st = unit(u);
    bool fenced = false;
    for (std::size_t k = 0; k < st.params.size(); ++k) {
      const std::int64_t i = st.params[k];
      if (st.g[k].numel() == 0 && model_.grad(i) == stored_grad(i)) continue;  // accumulated in place
      visit(i, [&, this]<tp_style S, int R>() {
        using L = param_layouts<Mesh, P, S, R>;
        const std::size_t n = slot(i).numel;
        if constexpr (L::async_reduce) {
          if (overlap && is_even(L::storage::spec, dm_.shape(), info(i).shape)) {
            if (!std::exchange(fenced, true)) space::fence();  // the backward's kernels wrote the gradients
            reduction& r = reducing_.emplace_back(
                reduction{i, std::move(st.g[k]), tensor<float, space>({static_cast<std::int64_t>(n)}), {}});
            const std::span<const float> in(r.grad.data(), static_cast<std::size_t>(r.grad.numel()));
            r.request = comm::reduce_scatter(dm_.group(L::reduce_plan::value[0].group), in,
                                             std::span<float>(r.out.data(), n), L::reduce_plan::value[0].op);
            return;
          }
        }
        reserve_buffer<float, space>(stage_, n);
        redistribute_local<typename L::grad, typename L::storage, default_cost_model, space>(dm_, info(i).shape,
                                                                                              st.g[k].data(), stage_.data());
        float* dst = stored_grad(i);
        K::add(dst, dst, stage_.data(), static_cast<std::int64_t>(n));
      });
    }
    st.g.clear();
  }
  /// Waits for the overlapped reductions in flight and adds them to the stored gradients (in
  /// the order they were issued), freeing their gradient buffers.
  void finish_reductions() {
    for (reduction& r : reducing_) {
      r.request.wait();
      float* dst = stored_grad(r.param);
      K::add(dst, dst, r.out.data(), r.out.numel());
    }
    reducing_.clear();
  }

  /// Calls f.template operator()<S, R>() for parameter i's style.
  template <class F>
  void visit(std::int64_t i, F&& f) const {
    visit_style(info(i).style, f);
  }

 private:
  struct fp8_state {
    std::size_t k = 0;
    space_buffer<float, space> scale;             // the weight's e4m3 scale (one float)
    space_buffer<std::uint8_t, space> codes;      // this block's codes, then the gathered ones
  };
  struct unit_state {
    std::vector<std::int64_t> params;
    std::vector<tensor<float, space>> p, g;  // gathered parameters / their gradients (empty when bound directly)
    std::vector<tensor<bf16, space>> c;      // gathered codes that are the operands (gathered_operands::codes)
    std::vector<const float*> adopted;       // the weights the model's store adopted, released at reshard
    bool gathered = false;
    std::vector<comm::any_request> pending;  // prefetch gathers not yet waited for
    std::vector<std::pair<std::size_t, space_buffer<bf16, space>>> half;  // bf16 gathers of those, by parameter
    std::vector<fp8_state> fp8;                                            // FP8 gathers (codes in, codes out)
  };

  struct reduction {  // an overlapped reduce-scatter in flight (reduce_grads)
    std::int64_t param = 0;
    tensor<float, space> grad, out;  // the unit's gradient buffer, this rank's block of the sum
    comm::any_request request;
  };

  device_mesh<Mesh>& dm_;
  Model& model_;
  std::vector<param_info> params_;
  std::vector<unit_state> units_;
  arena<float, space> master_, grads_;
  space_buffer<float, space> stage_;
  std::vector<reduction> reducing_;  // in the order issued
  space_buffer<bf16, space> half_in_, half_out_;
  space_buffer<float, space> amax_ = space_buffer<float, space>(1);  // an FP8 gather's amax (all-reduced in K's memory)


  unit_state& unit(std::int64_t u) { return units_[static_cast<std::size_t>(u)]; }
  /// Binds parameter i's gradient, its weight left as it is (a model without bind_grad: bound again).
  void bind_grad(std::int64_t i, float* g) {
    if constexpr (requires { model_.bind_grad(i, g); })
      model_.bind_grad(i, g);
    else
      model_.bind(i, model_.param(i), g);
  }
  const arena_slot& slot(std::int64_t i) const { return master_.layout().slots()[static_cast<std::size_t>(i)]; }

  /// Gathers the k-th parameter of a unit into its compute copy (or binds the stored block).
  void gather_param(unit_state& st, std::size_t k, bool prefetch) {
    const std::int64_t i = st.params[k];
    visit(i, [&, this]<tp_style S, int R>() {
      using L = param_layouts<Mesh, P, S, R>;
      if constexpr (L::direct_param) {
        model_.bind(i, stored(i), model_.grad(i));
      } else {
        const shape_t& g = info(i).shape;
        const std::size_t n_in = slot(i).numel,
                          n_out = static_cast<std::size_t>(local_numel<typename L::compute>(dm_, g));
        if constexpr (operands == gathered_operands::codes)
          if (info(i).gemm_operand) return gather_codes<L>(st, k, prefetch, n_in, n_out);
        st.p[k] = tensor<float, space>({static_cast<std::int64_t>(n_out)});
        float* out = st.p[k].data();
        model_.bind(i, out, model_.grad(i));
        if constexpr (operands == gathered_operands::values)  // its bf16 values are the operands
          if (info(i).gemm_operand) adopt(st, out, n_out, out);
        if constexpr (L::async_gather) {
          if (info(i).fp8_gather) return gather_fp8(st, k, L::unshard_plan::value[0].group);
          if (prefetch && is_even(L::storage::spec, dm_.shape(), g)) {
            auto& c = dm_.group(L::unshard_plan::value[0].group);
            if constexpr (P.bf16_params) {
              issue_bf16_gather(st, k, c, n_in, n_out, nullptr);  // widened by ready()
            } else {
              space::fence();  // the optimizer's last step before the collective reads the block
              st.pending.push_back(
                  comm::all_gather(c, std::span<const float>(stored(i), n_in), std::span<float>(out, n_out)));
            }
            return;
          }
        }
        check(!info(i).fp8_gather, "fsdp: FP8 all-gather of " + info(i).name +
                                       " needs an unshard plan that is one all-gather along dim 0");
        if constexpr (P.bf16_params) {  // gathered in bf16, computed in f32 (FSDP2 MixedPrecisionPolicy)
          reserve_buffer<bf16, space>(half_out_, n_out);
          bf16_redistribute<L>(i, n_in, half_out_.data());
          K::from_bf16(out, half_out_.data(), static_cast<std::int64_t>(n_out));
        } else {
          redistribute_local<typename L::storage, typename L::compute, default_cost_model, space>(dm_, g, stored(i), out);
        }
      }
    });
  }
  /// The model's store adopts weight w [n] (its key) as the operands `at` until the unit reshards.
  template <class Operand>
  void adopt(unit_state& st, const float* w, std::size_t n, const Operand* at) {
    model_.kept_store().adopt(w, static_cast<std::int64_t>(n), at);
    st.adopted.push_back(w);
  }
  /// Gathers the k-th parameter of a unit (layouts L) as bf16 codes that its linears multiply
  /// as they are (gathered_operands::codes): no f32 copy. The model is bound to the codes'
  /// address as the weight's key, which its linears look up in the store and nothing reads as
  /// floats (gemm_operand: a weight only GEMMs read).
  template <class L>
  void gather_codes(unit_state& st, std::size_t k, bool prefetch, std::size_t n_in, std::size_t n_out) {
    const std::int64_t i = st.params[k];
    const shape_t& g = info(i).shape;
    st.c[k] = tensor<bf16, space>({static_cast<std::int64_t>(n_out)});
    bf16* codes = st.c[k].data();
    float* key = reinterpret_cast<float*>(codes);
    model_.bind(i, key, model_.grad(i));
    adopt(st, key, n_out, codes);
    if constexpr (L::async_gather)
      if (prefetch && is_even(L::storage::spec, dm_.shape(), g))
        return issue_bf16_gather(st, k, dm_.group(L::unshard_plan::value[0].group), n_in, n_out, codes);
    bf16_redistribute<L>(i, n_in, codes);
  }
  /// Parameter i's stored block [n_in] cast to bf16 and gathered (plan storage -> compute of
  /// layouts L) into `to`.
  template <class L>
  void bf16_redistribute(std::int64_t i, std::size_t n_in, bf16* to) {
    reserve_buffer<bf16, space>(half_in_, n_in);
    K::to_bf16(half_in_.data(), stored(i), static_cast<std::int64_t>(n_in));
    redistribute_local<typename L::storage, typename L::compute, default_cost_model, space>(dm_, info(i).shape,
                                                                                           half_in_.data(), to);
  }
  /// Issues the all-gather over communicator c of the k-th parameter of a unit cast to bf16 into
  /// `to` [n_out] -- nullptr: the staging buffer's own tail, which ready() widens to the f32 copy.
  template <class Comm>
  void issue_bf16_gather(unit_state& st, std::size_t k, Comm& c, std::size_t n_in, std::size_t n_out, bf16* to) {
    auto& h = st.half.emplace_back(k, space_buffer<bf16, space>(n_in + (to != nullptr ? 0 : n_out))).second;
    K::to_bf16(h.data(), stored(st.params[k]), static_cast<std::int64_t>(n_in));
    space::fence();  // the casts (and the optimizer's last step) before the collective reads them
    st.pending.push_back(comm::all_gather(c, std::span<const bf16>(h.data(), n_in),
                                          std::span<bf16>(to != nullptr ? to : h.data() + n_in, n_out)));
  }
  /// FP8 all-gather of the k-th parameter of a unit over `group` (torchao's
  /// fsdp_pre_all_gather / post_all_gather for tensorwise Float8): the amax of the whole
  /// weight (all-reduce max of the blocks' amaxes over the gather's and the TP axis), its e4m3 scale, this block cast to e4m3
  /// codes, the codes gathered (uneven blocks: through the plan), their values the compute copy.
  template <class Group>
  void gather_fp8(unit_state& st, std::size_t k, const Group& group) {
    const std::int64_t i = st.params[k];
    const std::size_t n_in = slot(i).numel, n_out = static_cast<std::size_t>(st.p[k].numel());
    auto& c = dm_.group(group);
    // the whole weight's amax: over the gather's ranks, and under TP over the TP shards too
    // (torchao's amax of the DTensor); one all-reduce over the flattened group, in mesh order
    const unsigned mask = group.mask() | (P.tp >= 0 ? 1u << P.tp : 0u);
    axis_group amax_group;
    for (int a = 0; a < Mesh::ndim; ++a)
      if ((mask >> a) & 1u) amax_group.push(a);
    K::abs_max(amax_.data(), stored(i), static_cast<std::int64_t>(n_in));
    space::fence();  // the amax kernel (and the optimizer's last step) before the collective
    comm::all_reduce(dm_.group(amax_group), std::span<float>(amax_.data(), 1), reduce_op::max).wait();
    float amax = 0;
    K::to_host(&amax, amax_.data(), 1);
    const cpu::f8_cast cast{};  // e4m3, one scale, not rounded: tensorwise
    fp8_state& f = st.fp8.emplace_back();
    f.k = k;
    const float scale = cpu::f8_scale_from_amax(amax, cast.target, cast.rounding);
    f.scale = space_buffer<float, space>(1);
    K::to_device(f.scale.data(), &scale, 1);
    f.codes = space_buffer<std::uint8_t, space>(n_in + n_out);
    K::f8_quantize(f.codes.data(), stored(i), f.scale.data(), static_cast<std::int64_t>(n_in), cast);
    space::fence();  // the codes written before the collective reads them
    visit(i, [&, this]<tp_style S, int R>() {
      using L = param_layouts<Mesh, P, S, R>;
      if (is_even(L::storage::spec, dm_.shape(), info(i).shape))
        st.pending.push_back(comm::all_gather(c, std::span<const std::uint8_t>(f.codes.data(), n_in),
                                              std::span<std::uint8_t>(f.codes.data() + n_in, n_out)));
      else
        redistribute_local<typename L::storage, typename L::compute, default_cost_model, space>(
            dm_, info(i).shape, f.codes.data(), f.codes.data() + n_in);
    });
  }
  /// Waits for a unit's prefetch gathers (and widens bf16 and FP8 ones to the f32 compute copies).
  void ready(unit_state& st) {
    for (auto& r : st.pending) r.wait();
    st.pending.clear();
    for (auto& [k, h] : st.half) {
      if (st.p[k].numel() == 0) continue;  // gathered as the operands' codes: nothing to widen
      const std::size_t n_out = static_cast<std::size_t>(st.p[k].numel()), n_in = h.size() - n_out;
      K::from_bf16(st.p[k].data(), h.data() + n_in, static_cast<std::int64_t>(n_out));
    }
    st.half.clear();
    for (fp8_state& f : st.fp8) {
      const std::int64_t n_out = st.p[f.k].numel(), n_in = static_cast<std::int64_t>(f.codes.size()) - n_out;
      K::f8_dequantize(st.p[f.k].data(), f.codes.data() + n_in, f.scale.data(), n_out, cpu::f8_cast{});
    }
    st.fp8.clear();
  }
};

}  // namespace tessera::parallel
