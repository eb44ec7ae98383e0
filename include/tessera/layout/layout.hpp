// tessera/layout/layout.hpp: layouts as types.
//
//   using M  = tessera::mesh<tessera::axis<"dp", 2>, tessera::axis<"tp", 4>>;
//   using A  = tessera::layout_t<M, 2, tessera::shard<0>, tessera::shard<0>>;  // DTensor
//   using B  = tessera::layout_t<M, 2, tessera::dim<0, "dp", "tp">>;           // canonical
//   static_assert(std::is_same_v<A, B>);
//
// Both spellings normalize to tessera::layout<Mesh, spec>, whose template argument is the
// canonical layout_spec value: equal layouts are the same type.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include <tessera/core/extents.hpp>
#include <tessera/layout/layout_spec.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/layout/placement.hpp>
#include <tessera/layout/print.hpp>

namespace tessera {

/// A layout of a tensor on mesh `Mesh`; `Spec` is canonical (see layout_spec.hpp).
template <class Mesh, layout_spec Spec>
struct layout {
  using mesh_type = Mesh;
  static constexpr layout_spec spec = Spec;
  static constexpr int rank = Spec.rank;

  static std::string str() { return to_canonical_string(Spec, Mesh::names); }
  static std::string dtensor_str() { return to_dtensor_string(Spec); }

  /// The block held by `rank` of mesh `m` for a tensor of global shape `global`.
  static constexpr box local_box(const Mesh& m, const shape_t& global, std::int64_t rank) {
    return tessera::local_box(Spec, m.shape(), global, m.coords(rank));
  }
};

template <class T>
inline constexpr bool is_layout_v = false;
template <class M, layout_spec S>
inline constexpr bool is_layout_v<layout<M, S>> = true;

namespace detail {

template <class T>
concept spelling_item = requires { T::item; };

template <class Mesh, int Rank, class... Items>
struct make_layout {
  static_assert(is_mesh_v<Mesh>, "tessera::layout_t: the first argument must be a tessera::mesh<...>");
  static_assert((spelling_item<Items> && ...),
                "tessera::layout_t: each part must be shard<D>, replicate, partial<Op>, dim<D, \"axis\"...> "
                "or partial_on<Op, \"axis\"...>");

  static constexpr spec_result result = [] {
    if constexpr (is_mesh_v<Mesh> && (spelling_item<Items> && ...)) {
      constexpr layout_item items[] = {Items::item..., layout_item{}};
      return make_spec(Mesh::names.data(), Mesh::ndim, Rank, items, static_cast<int>(sizeof...(Items)));
    } else {
      return spec_result{};
    }
  }();
  static constexpr layout_error e = result.error;

  static_assert(e != layout_error::bad_rank, "tessera::layout_t: the tensor rank must be between 0 and 8");
  static_assert(e != layout_error::placement_count,
                "tessera::layout_t: a DTensor-style layout needs exactly one placement per mesh axis; "
                "add replicate for the axes that do not shard");
  static_assert(e != layout_error::mixed_spellings,
                "tessera::layout_t: spell a layout with DTensor placements (shard, replicate, partial) or "
                "with dim<>/partial_on<>, not both");
  static_assert(e != layout_error::shard_dim_range,
                "tessera::layout_t: a shard dimension is out of range for the tensor rank; use a "
                "dimension in [-rank, rank)");
  static_assert(e != layout_error::unknown_axis,
                "tessera::layout_t: an axis named in the layout is not an axis of the mesh; use the "
                "mesh's axis names");
  static_assert(e != layout_error::axis_twice,
                "tessera::layout_t: the same mesh axis appears twice in the layout; an axis shards one "
                "dimension or is partial, once");
  static_assert(e != layout_error::dim_twice,
                "tessera::layout_t: a tensor dimension is listed in two dim<>; list all its axes in one "
                "dim<D, \"outer\", \"inner\">");
  static_assert(e != layout_error::mixed_partial_ops,
                "tessera::layout_t: the partial axes of one layout must share one reduce op");

  using type = layout<Mesh, (e == layout_error::none ? result.spec : replicated_spec(0, 0))>;
};

}  // namespace detail

/// The layout of a rank-`Rank` tensor on `Mesh`, spelled either way (see above).
template <class Mesh, int Rank, class... Parts>
using layout_t = typename detail::make_layout<Mesh, Rank, Parts...>::type;

/// A fully replicated layout.
template <class Mesh, int Rank>
using replicated_t = layout<Mesh, replicated_spec(Rank, Mesh::ndim)>;

namespace detail {
template <class Layout, class Extents>
struct local_extents_impl {
  static_assert(is_layout_v<Layout>, "tessera::local_extents_t: the first argument must be a layout");
  static_assert(is_extents_v<Extents>, "tessera::local_extents_t: the second argument must be tessera::extents<...>");
  static constexpr layout_spec s = Layout::spec;
  static constexpr mesh_shape m = Layout::mesh_type::static_shape;
  static_assert(Extents::rank() == s.rank,
                "tessera::local_extents_t: the extents' rank differs from the layout's tensor rank");

  static constexpr std::int64_t local(int d) {
    std::int64_t n = Extents::static_extent(d);
    for (int i = 0; i < s.axes_of(d); ++i) {
      const std::int64_t p = m[s.axis_at(d, i)];
      if (n == dyn || p == dyn) return dyn;
      n = n % p == 0 ? n / p : -2;  // -2: does not divide
      if (n < 0) return -2;
    }
    return n;
  }
  static constexpr bool divides = [] {
    for (int d = 0; d < s.rank; ++d)
      if (local(d) == -2) return false;
    return true;
  }();
  static_assert(divides,
                "tessera::local_extents_t: a static extent is not divisible by the static axis sizes "
                "that shard it; make that extent dynamic (tessera::dyn) for uneven shards");

  template <std::size_t... I>
  static auto make(std::index_sequence<I...>) -> extents<(divides ? local(static_cast<int>(I)) : dyn)...>;
  using type = decltype(make(std::make_index_sequence<static_cast<std::size_t>(Extents::rank())>{}));
};
}  // namespace detail

/// Static local extents of a shard where global extent and mesh sizes are static and the
/// split is even; dyn where anything is dynamic. An uneven static split is a compile error.
template <class Layout, class Extents>
using local_extents_t = typename detail::local_extents_impl<Layout, Extents>::type;

}  // namespace tessera
