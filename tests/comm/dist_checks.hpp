// Backend-independent checks of dist_tensor: for every pair of layouts in a list whose
// transition is legal, distribute a known global tensor in the first, redistribute to the
// second, and compare the block and the full tensor with the global values exactly. The
// tensors live in memory space Space (host unless named: the staged test space, or
// cuda_space in the GPU test).
#pragma once

#include <cstdint>
#include <string>
#include <tessera/plan/planner.hpp>
#include <tessera/tensor/dtype.hpp>
#include <tessera/tensor/dist_tensor.hpp>
#include <vector>

namespace dist_checks {

using tessera::index_t;

/// Small integers: exact in f32 and bf16, and so are their sums over up to 8 ranks.
inline float value(const index_t& i) {
  return static_cast<float>((i[0] * 7 + i[1] * 3 + i[2] * 5 + i[3]) % 16);
}
template <class T> T to(float v) { return static_cast<T>(v); }
template <class T> float from(T v) { return static_cast<float>(v); }

[[noreturn]] inline void fail(const std::string& what) { throw tessera::error("dist check failed: " + what); }

/// Rank's index in the flattened group of the layout's partial axes.
template <class L, class Mesh>
std::int64_t partial_index(tessera::device_mesh<Mesh>& dm, std::int64_t* count) {
  tessera::axis_group g;
  for (int a = 0; a < L::spec.mesh_ndim; ++a)
    if (L::spec.is_partial(a)) g.push(a);
  *count = tessera::group_size(dm.shape(), g);
  return tessera::group_index(dm.shape(), g, dm.coords());
}

/// A tensor in layout L whose global value is value(); a sum-partial one is made with
/// different values on each rank of the partial group (rank 0: v - (n - 1), others: 1).
template <class T, class L, class Space = tessera::host, class Mesh>
tessera::dist_tensor<T, L, Space> make(tessera::device_mesh<Mesh>& dm, const tessera::shape_t& g) {
  using D = tessera::dist_tensor<T, L, Space>;
  if constexpr (L::spec.has_partial() && L::spec.op == tessera::reduce::sum) {
    std::int64_t n = 1;
    const std::int64_t k = partial_index<L>(dm, &n);
    const tessera::box b = tessera::local_box(L::spec, dm.shape(), g, dm.coords());
    std::vector<T> v(static_cast<std::size_t>(b.numel()));
    index_t idx{};
    for (int d = 0; d < b.rank; ++d) idx[static_cast<std::size_t>(d)] = b.offset[static_cast<std::size_t>(d)];
    for (auto& x : v) {
      x = to<T>(k == 0 ? value(idx) - static_cast<float>(n - 1) : 1.0f);
      for (int d = b.rank - 1; d >= 0; --d) {
        const auto u = static_cast<std::size_t>(d);
        if (++idx[u] < b.offset[u] + b.size[u]) break;
        idx[u] = b.offset[u];
      }
    }
    return D::from_local(dm, g, std::move(v));
  } else {
    return D::distribute(dm, g, [](const index_t& i) { return to<T>(value(i)); });
  }
}

template <class T, class L, class Space>
void verify(const tessera::dist_tensor<T, L, Space>& y, const tessera::shape_t& g, const std::string& what) {
  auto& dm = y.mesh();
  const tessera::box want = tessera::local_box(L::spec, dm.shape(), g, dm.coords());
  if (!(y.local_box() == want)) fail(what + ": wrong local box on rank " + std::to_string(dm.rank()));
  const std::vector<T> local = y.local_values();
  if (static_cast<std::int64_t>(local.size()) != want.numel()) fail(what + ": wrong local size");
  if constexpr (!L::spec.has_partial()) {  // the block holds the global values
    index_t idx{};
    for (int d = 0; d < want.rank; ++d) idx[static_cast<std::size_t>(d)] = want.offset[static_cast<std::size_t>(d)];
    for (std::size_t k = 0; k < local.size(); ++k) {
      if (from(local[k]) != value(idx))
        fail(what + ": rank " + std::to_string(dm.rank()) + " element " + std::to_string(k) + " is " +
             std::to_string(from(local[k])) + ", want " + std::to_string(value(idx)));
      for (int d = want.rank - 1; d >= 0; --d) {
        const auto u = static_cast<std::size_t>(d);
        if (++idx[u] < want.offset[u] + want.size[u]) break;
        idx[u] = want.offset[u];
      }
    }
  }
  const auto full = y.full_tensor();
  if (static_cast<std::int64_t>(full.size()) != g.numel()) fail(what + ": full_tensor has the wrong size");
  index_t idx{};
  for (std::size_t k = 0; k < full.size(); ++k) {
    if (from(full[k]) != value(idx))
      fail(what + ": full_tensor element " + std::to_string(k) + " is " + std::to_string(from(full[k])) +
           ", want " + std::to_string(value(idx)) + " (rank " + std::to_string(dm.rank()) + ")");
    for (int d = g.rank - 1; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      if (++idx[u] < g[d]) break;
      idx[u] = 0;
    }
  }
}

template <class T, class Space, class Src, class Dst, class Mesh>
void pair(tessera::device_mesh<Mesh>& dm, const tessera::shape_t& g, int* count) {
  if constexpr (tessera::check_transition(Src::spec, Dst::spec) == tessera::plan_error::none) {
    auto x = make<T, Src, Space>(dm, g);
    auto y = x.template redistribute<Dst>();
    verify(y, g, Src::str() + " -> " + Dst::str());
    ++*count;
  }
}

template <class... L>
struct layouts {};

/// Every legal (source, target) pair of the list; returns the number of pairs run.
template <class T, class Space = tessera::host, class Mesh, class... L>
int all_pairs(tessera::device_mesh<Mesh>& dm, const tessera::shape_t& g, layouts<L...>) {
  int count = 0;
  auto row = [&]<class Src>() { (pair<T, Space, Src, L>(dm, g, &count), ...); };
  (row.template operator()<L>(), ...);
  return count;
}

/// The legal pairs of the list whose plan (for T) has a run of consecutive all_to_all steps,
/// which redistribute executes as one exchange (tensor/detail/redistribute.hpp).
template <class T, class... L>
constexpr int fused_pairs(layouts<L...>) {
  int count = 0;
  auto one = [&]<class Src, class Dst>() {
    if constexpr (tessera::check_transition(Src::spec, Dst::spec) == tessera::plan_error::none) {
      constexpr auto runs = tessera::plan_t<Src, Dst, T>::runs;
      for (int r = 0; r < runs.size(); ++r)
        if (runs[r].fused()) {
          ++count;
          break;
        }
    }
  };
  auto row = [&]<class Src>() { (one.template operator()<Src, L>(), ...); };
  (row.template operator()<L>(), ...);
  return count;
}

using bf16 = tessera::bf16;

}  // namespace dist_checks
