// tessera/layout/mesh.hpp: named mesh axes, meshes, rank <-> coordinate maps and groups.
//
// A mesh is an ordered list of named axes; ranks are laid out row-major, the last axis
// varying fastest (DTensor's `arange(world).reshape(shape)`). Every axis and every ordered
// subset of axes names a process group; a group over several axes is "flattened" in
// row-major order of the axes as listed (first listed = outermost).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tessera/core/config.hpp>
#include <tessera/core/diagnostic.hpp>
#include <tessera/core/error.hpp>
#include <tessera/core/fixed_string.hpp>

namespace tessera {

/// A mesh axis: a name and a size, static (`axis<"tp", 4>`) or dynamic (`axis<"dp">`).
template <fixed_string Name, std::int64_t Size = dyn>
struct axis {
  static_assert(Size == dyn || Size > 0, "tessera::axis: a static axis size must be positive");
  static_assert(Name.size() > 0, "tessera::axis: an axis needs a non-empty name");
  static constexpr std::string_view name = Name.view();
  static constexpr std::int64_t size = Size;
  /// The same axis with size S (member aliases instead of partial specializations on the
  /// name: nvcc 13 matches no partial specialization on a class-type template parameter).
  template <std::int64_t S>
  using resized = axis<Name, S>;
  using tessera_axis_tag = void;
};

/// Mesh sizes as a value (the same struct at compile time and at run time).
struct mesh_shape {
  std::int8_t ndim = 0;
  std::array<std::int64_t, max_mesh_axes> size{};

  constexpr std::int64_t operator[](int a) const { return size[static_cast<std::size_t>(a)]; }
  friend constexpr bool operator==(const mesh_shape&, const mesh_shape&) = default;
};

/// Coordinates of a rank in a mesh, one per axis.
using coords_t = std::array<std::int64_t, max_mesh_axes>;

/// An ordered list of mesh-axis indices: one axis, or a flattened group of several.
struct axis_group {
  std::int8_t n = 0;
  std::array<std::int8_t, max_mesh_axes> axes{};

  constexpr int operator[](int i) const { return axes[static_cast<std::size_t>(i)]; }
  constexpr void push(int a) {
    if (n < max_mesh_axes) axes[static_cast<std::size_t>(n++)] = static_cast<std::int8_t>(a);
  }
  /// The axes as a bit mask (bit a set for axis a).
  constexpr unsigned mask() const {
    unsigned m = 0;
    for (int i = 0; i < n; ++i) m |= 1u << axes[static_cast<std::size_t>(i)];
    return m;
  }
  constexpr bool contains(int a) const {
    for (int i = 0; i < n; ++i)
      if (axes[static_cast<std::size_t>(i)] == a) return true;
    return false;
  }
  friend constexpr bool operator==(const axis_group&, const axis_group&) = default;
};

constexpr std::int64_t world_size(const mesh_shape& m) {
  std::int64_t w = 1;
  for (int a = 0; a < m.ndim; ++a) w *= m[a];
  return w;
}

/// Row-major coordinates of `rank` (last axis fastest).
constexpr coords_t coords_of(const mesh_shape& m, std::int64_t rank) {
  coords_t c{};
  for (int a = m.ndim - 1; a >= 0; --a) {
    c[static_cast<std::size_t>(a)] = rank % m[a];
    rank /= m[a];
  }
  return c;
}

/// The rank at coordinates `c`.
constexpr std::int64_t rank_of(const mesh_shape& m, const coords_t& c) {
  std::int64_t r = 0;
  for (int a = 0; a < m.ndim; ++a) r = r * m[a] + c[static_cast<std::size_t>(a)];
  return r;
}

/// Number of ranks in a group.
constexpr std::int64_t group_size(const mesh_shape& m, const axis_group& g) {
  std::int64_t n = 1;
  for (int i = 0; i < g.n; ++i) n *= m[g[i]];
  return n;
}

/// Position of the rank with coordinates `c` within its group (row-major over g's axes).
constexpr std::int64_t group_index(const mesh_shape& m, const axis_group& g, const coords_t& c) {
  std::int64_t k = 0;
  for (int i = 0; i < g.n; ++i) k = k * m[g[i]] + c[static_cast<std::size_t>(g[i])];
  return k;
}

/// The coordinates of member `k` (in group order) of the group along `g` that contains
/// the rank at coordinates `c`.
constexpr coords_t group_member(const mesh_shape& m, const axis_group& g, coords_t c, std::int64_t k) {
  for (int i = g.n - 1; i >= 0; --i) {
    c[static_cast<std::size_t>(g[i])] = k % m[g[i]];
    k /= m[g[i]];
  }
  return c;
}

/// The ranks of the group along `g` that contains `rank`, in group order.
inline std::vector<std::int64_t> group_ranks(const mesh_shape& m, const axis_group& g,
                                             std::int64_t rank) {
  const std::int64_t n = group_size(m, g);
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  const coords_t c = coords_of(m, rank);
  for (std::int64_t k = 0; k < n; ++k) out[static_cast<std::size_t>(k)] = rank_of(m, group_member(m, g, c, k));
  return out;
}

namespace detail {
template <class T>
struct is_axis : std::bool_constant<requires { typename T::tessera_axis_tag; }> {};

template <std::size_t N>
constexpr bool names_unique(const std::array<std::string_view, N>& names) {
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j)
      if (names[i] == names[j]) return false;
  return true;
}
}  // namespace detail

namespace diagnostic {
/// `Mesh()` or `{}` of a mesh with dynamic axes (their names: the template argument).
template <class DynamicAxes>
constexpr bool mesh_dynamic_axes_unbound() {
  static_assert(always_false<DynamicAxes>,
                "tessera::mesh: a mesh with a dynamic axis (axis<\"name\"> of no size; the dynamic axes are the "
                "template argument above) has no value without the world size: bind it, Mesh(world_size), or "
                "Mesh(world_size, {{\"axis\", size}}) when several axes are dynamic; `{}` is the value of a mesh "
                "whose axes all have sizes");
  return false;
}
}  // namespace diagnostic

/// A device mesh: `mesh<axis<"dp">, axis<"tp", 4>>`. The type carries names and static
/// sizes; an object binds the dynamic sizes for one run (checked against the world size).
template <class... Axes>
class mesh {
  static_assert(sizeof...(Axes) >= 1 && sizeof...(Axes) <= max_mesh_axes,
                "tessera::mesh: a mesh needs between 1 and 8 axes");
  static_assert((detail::is_axis<Axes>::value && ...),
                "tessera::mesh: every argument must be a tessera::axis<\"name\", size>");

 public:
  static constexpr int ndim = static_cast<int>(sizeof...(Axes));
  static constexpr std::array<std::string_view, sizeof...(Axes)> names{Axes::name...};
  static_assert(detail::names_unique(names),
                "tessera::mesh: two axes have the same name; give every axis its own name");

  /// Sizes as declared: static sizes, `dyn` for dynamic ones.
  static constexpr mesh_shape static_shape = [] {
    mesh_shape s;
    s.ndim = static_cast<std::int8_t>(ndim);
    const std::int64_t sz[] = {Axes::size...};
    for (int a = 0; a < ndim; ++a) s.size[static_cast<std::size_t>(a)] = sz[a];
    return s;
  }();
  static constexpr bool is_always_static() noexcept { return ((Axes::size != dyn) && ...); }

  /// Index of the axis named `name`, or -1.
  static constexpr int index_of(std::string_view name) noexcept {
    for (int a = 0; a < ndim; ++a)
      if (names[static_cast<std::size_t>(a)] == name) return a;
    return -1;
  }
  /// Index of the axis named `Name`; a compile error if there is none.
  template <fixed_string Name>
  static constexpr int axis_index() noexcept {
    static_assert(index_of(Name.view()) >= 0,
                  "tessera::mesh: no axis of this mesh has that name; use one of the mesh's axis names");
    return index_of(Name.view());
  }
  /// The ordered (flattened) group of the named axes: `group<"dp", "tp">()`.
  template <fixed_string... Names>
  static constexpr axis_group group() noexcept {
    axis_group g;
    (g.push(axis_index<Names>()), ...);
    return g;
  }

  /// A mesh of static axes only.
  constexpr mesh() noexcept requires(is_always_static()) : shape_(static_shape) {}
  /// A mesh with a dynamic axis has no value until it is bound to the world size: `{}` or
  /// `Mesh()` of one fails to compile, naming its dynamic axes and how to bind them.
  mesh() requires(!is_always_static()) : shape_(static_shape) {
    static constexpr std::size_t n_dynamic = ((Axes::size == dyn) + ...);
    static constexpr std::array<std::string_view, n_dynamic> dynamic = [] {
      std::array<std::string_view, n_dynamic> d{};
      std::size_t k = 0;
      for (int a = 0; a < ndim; ++a)
        if (static_shape[a] == dyn) d[k++] = names[static_cast<std::size_t>(a)];
      return d;
    }();
    (void)diagnostic::mesh_dynamic_axes_unbound<
        diagnostic::text_t<diagnostic::joined<diagnostic::joined_size(dynamic)>(dynamic)>>();
  }

  /// Binds the mesh to `world` ranks. `sizes` gives dynamic axes by name; at most one
  /// dynamic axis may be left out and is inferred. The product must equal `world`.
  explicit mesh(std::int64_t world,
                std::initializer_list<std::pair<std::string_view, std::int64_t>> sizes = {})
      : shape_(static_shape) {
    for (const auto& [name, n] : sizes) {
      const int a = index_of(name);
      check(a >= 0, "tessera::mesh: no axis named \"" + std::string(name) + "\" in mesh " + str());
      check(n > 0, "tessera::mesh: axis \"" + std::string(name) + "\" needs a positive size");
      check(static_shape[a] == dyn || static_shape[a] == n,
            "tessera::mesh: axis \"" + std::string(name) + "\" is static with size " +
                std::to_string(static_shape[a]) + ", not " + std::to_string(n));
      shape_.size[static_cast<std::size_t>(a)] = n;
    }
    int unbound = -1;
    std::int64_t known = 1;
    for (int a = 0; a < ndim; ++a) {
      if (shape_[a] == dyn) {
        if (unbound >= 0)
          throw error("tessera::mesh: axes \"" + std::string(names[static_cast<std::size_t>(unbound)]) + "\" and \"" +
                      std::string(names[static_cast<std::size_t>(a)]) +
                      "\" are both dynamic and unbound; give the size of all but one");
        unbound = a;
      } else {
        known *= shape_[a];
      }
    }
    if (unbound >= 0) {
      check(world % known == 0,
            "tessera::mesh: world size " + std::to_string(world) +
                " is not divisible by the product of the other axes (" + std::to_string(known) +
                ") of mesh " + str() + "; choose a world size that is a multiple");
      shape_.size[static_cast<std::size_t>(unbound)] = world / known;
    }
    check(tessera::world_size(shape_) == world,
          "tessera::mesh: the product of the axis sizes of " + str() + " is " +
              std::to_string(tessera::world_size(shape_)) + ", not the world size " + std::to_string(world));
  }

  /// A mesh of the sizes `s` (every axis bound; static axes must have their sizes).
  explicit mesh(const mesh_shape& s) : shape_(s) {
    check(s.ndim == ndim, "tessera::mesh: a shape of " + std::to_string(s.ndim) + " axes for mesh " + str());
    for (int a = 0; a < ndim; ++a)
      check(s[a] > 0 && (static_shape[a] == dyn || static_shape[a] == s[a]),
            "tessera::mesh: axis \"" + std::string(names[static_cast<std::size_t>(a)]) + "\" cannot have size " +
                std::to_string(s[a]));
  }

  constexpr const mesh_shape& shape() const noexcept { return shape_; }
  constexpr std::int64_t size(int a) const noexcept { return shape_[a]; }
  constexpr std::int64_t size(std::string_view name) const {
    const int a = index_of(name);
    check(a >= 0, "tessera::mesh: no axis of this mesh has that name");
    return shape_[a];
  }
  constexpr std::int64_t world_size() const noexcept { return tessera::world_size(shape_); }
  constexpr coords_t coords(std::int64_t rank) const noexcept { return coords_of(shape_, rank); }
  constexpr std::int64_t rank(const coords_t& c) const noexcept { return rank_of(shape_, c); }
  std::vector<std::int64_t> group_ranks(const axis_group& g, std::int64_t rank) const {
    return tessera::group_ranks(shape_, g, rank);
  }

  /// "(dp=2, tp=4)"; a dynamic, unbound axis prints as "dp=?".
  std::string str() const {
    std::string s = "(";
    for (int a = 0; a < ndim; ++a) {
      if (a) s += ", ";
      s += names[static_cast<std::size_t>(a)];
      s += "=";
      s += shape_[a] == dyn ? std::string("?") : std::to_string(shape_[a]);
    }
    return s + ")";
  }

 private:
  mesh_shape shape_{};
};

template <class T>
inline constexpr bool is_mesh_v = false;
template <class... A>
inline constexpr bool is_mesh_v<mesh<A...>> = true;

namespace detail {
template <class A, bool One>
struct axis_of_size_one {
  using type = A;
};
template <class A>
struct axis_of_size_one<A, true> {
  using type = typename A::template resized<1>;
};
template <class Mesh, int I, class Seq>
struct collapse_axis;
template <class... A, int I, std::size_t... K>
struct collapse_axis<mesh<A...>, I, std::index_sequence<K...>> {
  using type = mesh<typename axis_of_size_one<A, static_cast<int>(K) == I>::type...>;
};
}  // namespace detail

/// `Mesh` with axis `I` of size 1 (I < 0: Mesh itself): the part of the mesh one coordinate
/// of axis I spans, with the same axis indices (a pipeline stage's mesh is the recipe's mesh
/// with the pp axis collapsed).
template <class Mesh, int I>
using collapse_axis_t = typename detail::collapse_axis<Mesh, I, std::make_index_sequence<Mesh::ndim>>::type;

}  // namespace tessera
