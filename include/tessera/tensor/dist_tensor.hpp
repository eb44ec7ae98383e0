// tessera/tensor/dist_tensor.hpp: a tensor distributed over a device mesh with a layout
// known at compile time. Each rank holds its block (local_box of the layout) in memory
// space `Space`: host memory (tessera::host, the default), or a GPU's with
// tessera::cuda_space (tensor/cuda_memory.hpp) on a device mesh whose communicator is nccl's.
//
//   using M = tessera::mesh<tessera::axis<"dp", 2>, tessera::axis<"tp", 2>>;
//   using RowSharded = tessera::layout_t<M, 2, tessera::dim<0, "dp", "tp">>;
//   using ColSharded = tessera::layout_t<M, 2, tessera::dim<1, "tp">>;
//   auto x = tessera::dist_tensor<float, RowSharded>::distribute(dm, {6, 5},
//                [](const auto& i) { return float(i[0] * 5 + i[1]); });
//   auto y = x.redistribute<ColSharded>();   // the constexpr plan's collectives, nothing else
//   x.redistribute(y);                       // the same, into y's buffer (a training loop)
//   std::vector<float> all = y.full_tensor();
//
// redistribute<L>() runs tessera::plan_t<Layout, L, T>: the plan is a constant of the
// program, so a call does no planning, only its steps. Its result buffer comes from
// tessera::result_pool (a cache of the buffers of dead dist_tensors, as a caching
// allocator keeps freed blocks), so calling it in a loop does not fault in fresh pages;
// redistribute(out) writes into an existing tensor of the target layout and allocates
// nothing. On device memory the same plans run with device copies and NCCL's collectives;
// local() is then this rank's block in device memory (for kernels), local_values() a host
// copy of it, and full_tensor() returns host memory as it does for a host tensor.
#pragma once

#include <array>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <string>
#include <tessera/comm/types.hpp>
#include <tessera/layout/layout.hpp>
#include <tessera/plan/plan.hpp>
#include <tessera/tensor/detail/box_copy.hpp>
#include <tessera/tensor/detail/result_pool.hpp>
#include <tessera/tensor/redistribute.hpp>
#include <tessera/tensor/device_mesh.hpp>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera {

/// Memory space of host (CPU) buffers (dist_tensor's default).
using host = host_space;

/// The cache of dist_tensor result buffers (detail/result_pool.hpp): buffers of 64 KiB and
/// more go back to it when their tensor dies, up to limit() bytes in all (1 GiB unless
/// set), and redistribute<L>() takes its result from it (a cached buffer of n to 2n
/// elements for n; its contents are overwritten).
struct result_pool {
  static std::int64_t limit() noexcept { return detail::result_pool_state::limit.load(); }
  /// Caches at most `bytes` (0 turns caching off); does not release what is held.
  static void set_limit(std::int64_t bytes) noexcept { detail::result_pool_state::limit.store(bytes); }
  static std::int64_t held_bytes() noexcept { return detail::result_pool_state::held.load(); }
  /// Fresh results served from the cache / allocated (buffers of 64 KiB and more).
  static std::int64_t hits() noexcept { return detail::result_pool_state::hits.load(); }
  static std::int64_t misses() noexcept { return detail::result_pool_state::misses.load(); }
  /// Frees every cached buffer.
  static void release() noexcept {
    std::vector<void (*)() noexcept> fs;
    {
      std::lock_guard<std::mutex> lock(detail::result_pool_state::clearers_mutex());
      fs = detail::result_pool_state::clearers();
    }
    for (auto f : fs) f();
  }
};

/// A global index: index[d] for d < the tensor's rank.
using index_t = std::array<std::int64_t, max_tensor_rank>;

namespace detail {
/// True when L is a layout on mesh type M (checked first, so a wrong target gives one message).
template <class L, class M>
constexpr bool on_mesh() {
  if constexpr (is_layout_v<L>)
    return std::is_same_v<typename L::mesh_type, M>;
  else
    return false;
}

}  // namespace detail

template <class T, class Layout, class Space = host>
class dist_tensor {
  static_assert(is_layout_v<Layout>, "tessera::dist_tensor: the second argument must be a layout (tessera::layout_t<...>)");
  static_assert(comm::element<T>,
                "tessera::dist_tensor: the element type has no comm::dtype; use float, double, int32_t, int64_t, "
                "uint8_t or a bf16 type with a comm::dtype_traits specialization");
  static_assert(data_space<Space>,
                "tessera::dist_tensor: the memory space must be a data_space (tensor/memory.hpp): tessera::host, or "
                "tessera::cuda_space from <tessera/tensor/cuda_memory.hpp>");
  static constexpr bool on_host = std::is_same_v<Space, host_space>;
  // host blocks come from and go back to result_pool; other spaces own their memory
  using storage = std::conditional_t<on_host, std::vector<T>, space_vector<T, Space>>;

 public:
  using value_type = T;
  using layout_type = Layout;
  using mesh_type = typename Layout::mesh_type;
  using space_type = Space;
  static constexpr layout_spec spec = Layout::spec;
  static constexpr int rank = spec.rank;

  /// Wraps this rank's block (its size must be the layout's local block of `global`).
  static dist_tensor from_local(device_mesh<mesh_type>& dm, const shape_t& global, std::vector<T> local) {
    check_shape(global);
    const box b = tessera::local_box(spec, dm.shape(), global, dm.coords());
    if (static_cast<std::int64_t>(local.size()) != b.numel())
      throw error("tessera::dist_tensor::from_local: rank " + std::to_string(dm.rank()) + " holds " +
                  std::to_string(local.size()) + " elements, but its block of layout " + Layout::str() +
                  " has " + std::to_string(b.numel()) + "; give each rank its local_box of the global shape");
    return dist_tensor(dm, global, b, stored(std::move(local)));
  }

  /// Every rank passes the same function of the global index; each keeps its block. A
  /// partial layout is made as a replicated tensor turned partial: for sum, the rank at
  /// index 0 of the partial axes keeps the values and the others hold zero; for avg,
  /// max, min every rank keeps them.
  template <class F>
    requires std::is_invocable_v<F&, const index_t&>
  static dist_tensor distribute(device_mesh<mesh_type>& dm, const shape_t& global, F&& init) {
    check_shape(global);
    const box b = tessera::local_box(spec, dm.shape(), global, dm.coords());
    std::vector<T> v(static_cast<std::size_t>(b.numel()));
    bool zero = false;
    if (spec.has_partial() && spec.op == reduce::sum)
      for (int a = 0; a < spec.mesh_ndim; ++a)
        zero = zero || (spec.is_partial(a) && dm.coords()[static_cast<std::size_t>(a)] != 0);
    if (!zero && b.numel() > 0) {
      index_t idx{};
      for (int d = 0; d < b.rank; ++d) idx[static_cast<std::size_t>(d)] = b.offset[static_cast<std::size_t>(d)];
      for (std::size_t k = 0; k < v.size(); ++k) {
        v[k] = static_cast<T>(init(static_cast<const index_t&>(idx)));
        for (int d = b.rank - 1; d >= 0; --d) {
          const auto u = static_cast<std::size_t>(d);
          if (++idx[u] < b.offset[u] + b.size[u]) break;
          idx[u] = b.offset[u];
        }
      }
    }
    return dist_tensor(dm, global, b, stored(std::move(v)));
  }

  /// Every rank passes the whole global tensor (row-major); each keeps its block.
  static dist_tensor distribute(device_mesh<mesh_type>& dm, const shape_t& global, std::span<const T> full) {
    check_shape(global);
    if (static_cast<std::int64_t>(full.size()) != global.numel())
      throw error("tessera::dist_tensor::distribute: the global tensor has " + std::to_string(full.size()) +
                  " elements, but its shape says " + std::to_string(global.numel()));
    return distribute(dm, global, [&](const index_t& i) {
      std::int64_t f = 0;
      for (int d = 0; d < global.rank; ++d) f = f * global[d] + i[static_cast<std::size_t>(d)];
      return full[static_cast<std::size_t>(f)];
    });
  }

  /// A tensor of this layout whose elements are all zero (a buffer for redistribute(out)).
  static dist_tensor zeros(device_mesh<mesh_type>& dm, const shape_t& global) {
    check_shape(global);
    const box b = tessera::local_box(spec, dm.shape(), global, dm.coords());
    return dist_tensor(dm, global, b, storage(static_cast<std::size_t>(b.numel())));
  }

  dist_tensor(const dist_tensor&) = default;
  dist_tensor(dist_tensor&&) noexcept = default;
  dist_tensor& operator=(const dist_tensor& o) {
    if (this != &o) *this = dist_tensor(o);
    return *this;
  }
  dist_tensor& operator=(dist_tensor&& o) noexcept {
    if (this != &o) {
      if constexpr (on_host) detail::result_pool_of<T>::give(std::move(local_));
      dm_ = o.dm_, global_ = o.global_, box_ = o.box_, local_ = std::move(o.local_);
    }
    return *this;
  }
  ~dist_tensor() {
    if constexpr (on_host) detail::result_pool_of<T>::give(std::move(local_));
  }

  /// The tensor in layout `NewLayout`: runs the compile-time plan's steps (collective on
  /// every rank of the mesh: all ranks must call it). The result's buffer comes from
  /// tessera::result_pool. `Cost` (a type with `static constexpr cost_model value`) is
  /// the cost model the plan is chosen by: your cluster's constants instead of NVLink's.
  template <class NewLayout, class Cost = default_cost_model>
  dist_tensor<T, NewLayout, Space> redistribute() const {
    static_assert(detail::on_mesh<NewLayout, mesh_type>(),
                  "tessera::dist_tensor::redistribute<L>: L must be a layout on this tensor's mesh (a layout of "
                  "another mesh, or no layout); spell L with the same tessera::mesh<...> type");
    if constexpr (detail::on_mesh<NewLayout, mesh_type>()) {
      const auto n = static_cast<std::size_t>(local_numel<NewLayout>(*dm_, global_));
      storage result = [&] {
        if constexpr (on_host) return detail::result_pool_of<T>::take(n);
        else return storage(n);
      }();
      redistribute_local<Layout, NewLayout, Cost, Space>(*dm_, global_, local_.data(), result.data());
      return dist_tensor<T, NewLayout, Space>(
          *dm_, global_, tessera::local_box(NewLayout::spec, dm_->shape(), global_, dm_->coords()), std::move(result));
    } else {
      std::terminate();  // not reached: the static_assert above failed
    }
  }

  /// The same transition into `out`, a tensor of the target layout on the same device mesh
  /// with the same global shape (e.g. the result of an earlier call): allocates nothing.
  /// `out` must not be this tensor.
  template <class Cost = default_cost_model, class NewLayout>
  void redistribute(dist_tensor<T, NewLayout, Space>& out) const {
    static_assert(detail::on_mesh<NewLayout, mesh_type>(),
                  "tessera::dist_tensor::redistribute(out): out's layout must be on this tensor's mesh; spell it "
                  "with the same tessera::mesh<...> type");
    if (&out.mesh() != dm_)
      throw error("tessera::dist_tensor::redistribute(out): out is on another device_mesh; make it on this "
                  "tensor's mesh (e.g. as the result of x.redistribute<L>())");
    if (out.global_shape() != global_)
      throw error("tessera::dist_tensor::redistribute(out): out's global shape differs from this tensor's; "
                  "give a tensor of the same global shape");
    if (static_cast<const void*>(&out) == static_cast<const void*>(this))
      throw error("tessera::dist_tensor::redistribute(out): out is this tensor; redistribute into another one");
    redistribute_local<Layout, NewLayout, Cost, Space>(*dm_, global_, local_.data(), out.local_.data());
  }

  /// The whole tensor on every rank, in host memory (a redistribute to replicated; collective).
  std::vector<T> full_tensor() const {
    auto all = redistribute<replicated_t<mesh_type, rank>>();
    if constexpr (on_host)
      return std::move(all.local_);
    else
      return all.local_values();
  }

  const shape_t& global_shape() const noexcept { return global_; }
  const box& local_box() const noexcept { return box_; }
  /// This rank's block, in the tensor's memory space (device pointers on a GPU).
  std::span<const T> local() const noexcept { return {local_.data(), local_.size()}; }
  std::span<T> local() noexcept { return {local_.data(), local_.size()}; }
  /// A host copy of this rank's block (any memory space).
  std::vector<T> local_values() const {
    if constexpr (on_host) {
      return local_;
    } else {
      std::vector<T> v(local_.size());
      Space::to_host(v.data(), local_.data(), v.size() * sizeof(T));
      return v;
    }
  }
  device_mesh<mesh_type>& mesh() const noexcept { return *dm_; }

 private:
  template <class, class, class>
  friend class dist_tensor;

  dist_tensor(device_mesh<mesh_type>& dm, const shape_t& global, const box& b, storage local)
      : dm_(&dm), global_(global), box_(b), local_(std::move(local)) {
    if constexpr (!on_host) detail::check_space<Space>(dm.world(), "tessera::dist_tensor");
  }

  /// Host values as this space's storage.
  static storage stored(std::vector<T> v) {
    if constexpr (on_host) {
      return v;
    } else {
      storage s(v.size());
      Space::from_host(s.data(), v.data(), v.size() * sizeof(T));
      return s;
    }
  }

  static void check_shape(const shape_t& global) {
    if (global.rank != rank)
      throw error("tessera::dist_tensor: the global shape has " + std::to_string(global.rank) +
                  " dimensions, but layout " + Layout::str() + " is for " + std::to_string(rank));
    for (int d = 0; d < global.rank; ++d)
      if (global[d] < 0) throw error("tessera::dist_tensor: a global extent is negative");
  }

  device_mesh<mesh_type>* dm_;
  shape_t global_;
  box box_;
  storage local_;
};

}  // namespace tessera
