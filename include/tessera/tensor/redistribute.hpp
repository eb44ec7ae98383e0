// tessera/tensor/redistribute.hpp: run a compile-time plan on raw local blocks.
//
//   tessera::redistribute_local<Src, Dst>(dm, global, in, out);
//
// `in` is this rank's block of a tensor of shape `global` in layout Src, `out` receives
// its block in layout Dst (sized tessera::local_box(Dst::spec, ...).numel(); it must not
// overlap `in`). The steps are those of tessera::plan_t<Src, Dst, T>, a constant of the
// program: a call runs collectives and local copies, never the planner (consecutive
// all_to_all steps run as one exchange over the union of their groups, so each element
// moves once; which steps fuse is also a constant of the plan: P::runs, plan/runs.hpp).
// This is what dist_tensor::redistribute and the parallel model runtime call.
// `redistribute_local<Src, Dst, Cost>` plans with the cost model `Cost::value` (e.g. a
// calibrated link profile, plan/link_profile.hpp) instead of the default constants.
// Collective: every rank of the mesh calls it with the same global shape.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <tessera/layout/layout.hpp>
#include <tessera/plan/plan.hpp>
#include <tessera/tensor/detail/redistribute.hpp>
#include <tessera/tensor/device_mesh.hpp>

namespace tessera {

template <class Src, class Dst, class Cost = default_cost_model, class T, class Mesh>
void redistribute_local(device_mesh<Mesh>& dm, const shape_t& global, const T* in, T* out) {
  using P = plan_t<Src, Dst, T, void, Cost>;
  static_assert(std::is_same_v<typename Src::mesh_type, Mesh>,
                "tessera::redistribute_local: the layouts must be on the device mesh's mesh");
  box b = tessera::local_box(Src::spec, dm.shape(), global, dm.coords());
  if constexpr (P::size == 0) {
    if (in != out && b.numel() > 0) std::memcpy(out, in, static_cast<std::size_t>(b.numel()) * sizeof(T));
  } else {
    // intermediate blocks alternate between the device mesh's scratch slots 2 and 3 (the
    // steps stage through slots 0 and 1); the last run writes `out`. A run of consecutive
    // all_to_all steps executes as one exchange (detail::run_exchange).
    const T* src = in;
    for (int r = 0; r < P::runs.size(); ++r) {
      const step_run& run = P::runs[r];
      const auto& before = P::layouts[static_cast<std::size_t>(run.begin)];
      const auto& after = P::layouts[static_cast<std::size_t>(run.end)];
      T* dst = out;
      if (r + 1 < P::runs.size()) {
        const auto n = static_cast<std::size_t>(tessera::local_box(after, dm.shape(), global, dm.coords()).numel());
        dst = dm.template scratch<T>(2 + r % 2, n);
      }
      if (run.fused())
        detail::run_exchange<T>(dm, run.group, before, after, global, src, b, dst);
      else
        detail::run_step<T>(dm, P::value[run.begin], before, after, global, src, b, dst);
      src = dst;
    }
  }
}

/// The number of elements of this rank's block of `global` in layout L.
template <class L, class Mesh>
std::int64_t local_numel(const device_mesh<Mesh>& dm, const shape_t& global) {
  return tessera::local_box(L::spec, dm.shape(), global, dm.coords()).numel();
}

}  // namespace tessera
