// tessera/plan/plan.hpp: redistribution plans as types.
//
//   using P = tessera::plan_t<Src, Dst, float, tessera::extents<1024, 4096>>;
//   static_assert(P::size == 2);
//   P::step<0>::kind == tessera::step_kind::all_to_all   // each step is a type too
//
// The plan is computed by the same constexpr make_plan that tools call at run time. Where
// a mesh size or an extent is dynamic, the compile-time plan ranks candidate plans with
// nominal sizes (nominal_axis_size ranks per dynamic axis, nominal_extent elements per
// dynamic extent): its steps are valid for every size, and evaluate() gives the traffic
// and modelled time for the actual sizes at run time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include <tessera/core/extents.hpp>
#include <tessera/layout/layout.hpp>
#include <tessera/plan/collective.hpp>
#include <tessera/plan/cost_model.hpp>
#include <tessera/core/diagnostic.hpp>
#include <tessera/plan/planner.hpp>
#include <tessera/plan/runs.hpp>

namespace tessera {

inline constexpr std::int64_t nominal_axis_size = 4;
inline constexpr std::int64_t nominal_extent = 4096;

/// The cost model compile-time plans use unless a recipe names another: a type with a
/// `static constexpr cost_model value`.
struct default_cost_model {
  static constexpr cost_model value{};
};

/// One step of a plan as a type (for dispatch with `if constexpr` and fold expressions).
template <plan_step S>
struct step_type {
  static constexpr plan_step value = S;
  static constexpr step_kind kind = S.kind;
  static constexpr bool is_collective = tessera::is_collective(S.kind);
};

namespace detail {
template <class L>
constexpr int rank_of_layout() {
  if constexpr (is_layout_v<L>)
    return L::rank;
  else
    return 0;
}
template <class Src, class Extents>
using extents_or_dynamic = std::conditional_t<std::is_void_v<Extents>, dextents<rank_of_layout<Src>()>, Extents>;

constexpr mesh_shape nominal(mesh_shape m) noexcept {
  for (int a = 0; a < m.ndim; ++a)
    if (m.size[static_cast<std::size_t>(a)] == dyn) m.size[static_cast<std::size_t>(a)] = nominal_axis_size;
  return m;
}

template <class E>
constexpr int extents_rank() {
  if constexpr (is_extents_v<E>)
    return E::rank();
  else
    return -1;
}

template <class A, class B>
constexpr bool same_mesh() {
  if constexpr (is_layout_v<A> && is_layout_v<B>)
    return std::is_same_v<typename A::mesh_type, typename B::mesh_type>;
  else
    return true;
}

}  // namespace detail

/// Transitions that are not transitions, with the mesh axis as the template argument (the
/// compiler prints it next to the message; core/diagnostic.hpp).
namespace diagnostic {
template <bool source_is_layout, bool target_is_layout>
constexpr bool plan_arguments_not_layouts() {
  static_assert(source_is_layout && target_is_layout,
                "tessera::plan_t: the source and target must be tessera layouts (tessera::layout_t<...>)");
  return false;
}
template <class SourceMeshAxes, class TargetMeshAxes>
constexpr bool plan_layouts_on_different_meshes() {
  static_assert(always_false<SourceMeshAxes, TargetMeshAxes>,
                "tessera::plan_t: source and target layouts must be on the same mesh (their meshes' axes are the "
                "template arguments above)");
  return false;
}
template <int source_rank, int target_rank>
constexpr bool plan_layouts_of_different_rank() {
  static_assert(source_rank == target_rank,
                "tessera::plan_t: source and target layouts describe tensors of different rank");
  return false;
}
template <int extents_rank, int layout_rank>
constexpr bool plan_extents_of_wrong_rank() {
  static_assert(extents_rank == layout_rank,
                "tessera::plan_t: the extents must be tessera::extents<...> of the layouts' tensor rank");
  return false;
}
template <class Cost, cost_model_problem::which constant, int index>
constexpr bool plan_cost_model_invalid() {
  static_assert(always_false<Cost>,
                "tessera::plan_t: Cost::value is not a usable cost model: the constant above (and its axis or "
                "collective index) is out of its range: bandwidths 1e-6 to 1e12 GB/s (copy_GBps 0 too), latencies 0 "
                "to 1e12 us, coll_scale 1e-6 to 1e6, base_us + coll_base_us[c] not negative (tessera::check_cost_model)");
  return false;
}
template <class Axis>
constexpr bool shard_to_partial_on_axis() {
  static_assert(always_false<Axis>, "tessera::plan_t: shard -> partial on one mesh axis is not a transition (DTensor "
                                    "forbids it too); redistribute that axis to replicate first, then to partial "
                                    "(the axis is the template argument above)");
  return false;
}
template <class Axis>
constexpr bool partial_op_change_on_axis() {
  static_assert(always_false<Axis>, "tessera::plan_t: partial(op1) -> partial(op2) on one mesh axis is not a "
                                    "transition; reduce to replicate or shard first (the axis is the template "
                                    "argument above)");
  return false;
}
}  // namespace diagnostic

namespace detail {
/// A mesh's axis names, "dp, tp", as a diagnostic's template argument.
template <class Mesh>
using mesh_axes_text = diagnostic::text_t<diagnostic::joined<diagnostic::joined_size(Mesh::names)>(Mesh::names)>;

template <class Src, class Dst, class T, class Extents, class Cost>
struct plan_checks {
  static constexpr bool layouts = is_layout_v<Src> && is_layout_v<Dst>;
  // One message for the first mistake, from a function template (a failed one still
  // returns, so nothing after it fails again).
  static constexpr bool shapes_ok = [] {
    if constexpr (!layouts)
      return diagnostic::plan_arguments_not_layouts<is_layout_v<Src>, is_layout_v<Dst>>();
    else if constexpr (!same_mesh<Src, Dst>())
      return diagnostic::plan_layouts_on_different_meshes<mesh_axes_text<typename Src::mesh_type>,
                                                          mesh_axes_text<typename Dst::mesh_type>>();
    else if constexpr (rank_of_layout<Src>() != rank_of_layout<Dst>())
      return diagnostic::plan_layouts_of_different_rank<rank_of_layout<Src>(), rank_of_layout<Dst>()>();
    else if constexpr (extents_rank<Extents>() != rank_of_layout<Src>())
      return diagnostic::plan_extents_of_wrong_rank<extents_rank<Extents>(), rank_of_layout<Src>()>();
    else if constexpr (constexpr cost_model_problem p = check_cost_model(Cost::value, Src::mesh_type::ndim); p)
      return diagnostic::plan_cost_model_invalid<Cost, p.field, p.index>();
    else
      return true;
  }();
  static constexpr plan_error e = [] {
    if constexpr (shapes_ok)
      return check_transition(Src::spec, Dst::spec);
    else
      return plan_error::none;
  }();
  static constexpr bool transition_ok = [] {
    if constexpr (e == plan_error::shard_to_partial || e == plan_error::partial_op_change) {
      constexpr std::string_view name =
          Src::mesh_type::names[static_cast<std::size_t>(transition_error_axis(Src::spec, Dst::spec))];
      using axis = diagnostic::text_t<diagnostic::buffer_of<name.size()>(name)>;
      if constexpr (e == plan_error::shard_to_partial)
        return diagnostic::shard_to_partial_on_axis<axis>();
      else
        return diagnostic::partial_op_change_on_axis<axis>();
    } else {
      return true;
    }
  }();
  static constexpr bool ok = shapes_ok && e == plan_error::none && transition_ok;
};
}  // namespace detail

/// The least-cost plan from layout Src to layout Dst for elements of type T.
/// Extents = void means all extents dynamic.
template <class Src, class Dst, class T = float, class Extents = void, class Cost = default_cost_model>
struct plan {
  using source = Src;
  using target = Dst;
  using extents_type = detail::extents_or_dynamic<Src, Extents>;

  static constexpr bool valid = detail::plan_checks<Src, Dst, T, extents_type, Cost>::ok;
  using mesh_type = typename std::conditional_t<valid, Src, layout<mesh<axis<"?", 1>>, layout_spec{}>>::mesh_type;
  static constexpr plan_result result = [] {
    if constexpr (valid) {
      const plan_result r = make_plan(Src::spec, Dst::spec, detail::nominal(mesh_type::static_shape),
                                      extents_type::nominal_shape(nominal_extent), sizeof(T), Cost::value);
      // (not reachable with meshes of up to 8 axes in practice; a compile error if it is)
      check(r.error != plan_error::too_many_steps, "tessera::plan_t: the plan needs more steps than tessera::max_plan_steps");
      check(r.error != plan_error::too_large,
            "tessera::plan_t: the extents make a tensor of more bytes than tessera::max_plan_bytes on this mesh; "
            "use smaller (or dynamic) extents");
      return r;
    } else {
      return plan_result{};
    }
  }();

  static constexpr plan_value value = result.plan;
  static constexpr int size = value.n;
  /// layouts[i] is the layout before step i; layouts[size] == Dst::spec.
  static constexpr std::array<layout_spec, max_plan_steps + 1> layouts = plan_layouts(Src::spec, value);
  /// How the steps execute: consecutive all_to_all steps as one exchange (plan/runs.hpp).
  static constexpr plan_runs runs = runs_of(value);
  /// True when no step communicates (a plan of local slices / local partials only).
  static constexpr bool is_local = value.collectives() == 0;

  template <int I>
  using step = step_type<value[I]>;

  /// Traffic and modelled time for the actual mesh and global shape.
  static constexpr plan_result evaluate(const mesh_shape& m, const shape_t& global,
                                        const cost_model& cm = Cost::value) noexcept {
    return evaluate_plan(Src::spec, value, m, global, sizeof(T), cm);
  }

  /// One line per step: "all_to_all(tp) dim 1 -> 0".
  static std::string str() {
    std::string s;
    for (int i = 0; i < size; ++i) s += to_string(value[i], mesh_type::names) + "\n";
    return s;
  }
};

template <class Src, class Dst, class T = float, class Extents = void, class Cost = default_cost_model>
using plan_t = plan<Src, Dst, T, Extents, Cost>;

}  // namespace tessera
