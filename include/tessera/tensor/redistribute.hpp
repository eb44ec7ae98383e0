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
// calibrated link profile, plan/link_profile.hpp) instead of the default constants;
// `redistribute_local<Src, Dst, Cost, cuda_space>` moves device buffers (the mesh's
// communicator must then be nccl's): local copies are the space's (cudaMemcpy2DAsync), and
// the space's fence runs before every collective and before the call returns, so `in` may
// come from kernels on any stream of the device and `out` is complete on return.
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

template <class Src, class Dst, class Cost = default_cost_model, data_space Space = host_space, class T, class Mesh>
void redistribute_local(device_mesh<Mesh>& dm, const shape_t& global, const T* in, T* out) {
  using P = plan_t<Src, Dst, T, void, Cost>;
  static_assert(std::is_same_v<typename Src::mesh_type, Mesh>,
                "tessera::redistribute_local: the layouts must be on the device mesh's mesh");
  if constexpr (!std::is_same_v<Space, host_space>) detail::check_space<Space>(dm.world(), "tessera::redistribute_local");
  detail::run_runs<T, Space>(dm, P::value, P::runs, P::layouts, global, in,
                             tessera::local_box(Src::spec, dm.shape(), global, dm.coords()), out);
}

/// The number of elements of this rank's block of `global` in layout L.
template <class L, class Mesh>
std::int64_t local_numel(const device_mesh<Mesh>& dm, const shape_t& global) {
  return tessera::local_box(L::spec, dm.shape(), global, dm.coords()).numel();
}

}  // namespace tessera
