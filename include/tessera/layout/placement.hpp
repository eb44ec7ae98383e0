// tessera/layout/placement.hpp: the two spellings of a layout's parts.
//
// DTensor's spelling, one placement per mesh axis in mesh order:
//   shard<D> (D < 0 counts from the end), replicate, partial<reduce::sum>.
// The canonical spelling, per tensor dimension the ordered axes that shard it:
//   dim<0, "dp", "tp">   (dp splits dimension 0 first, tp splits each dp piece)
//   partial_on<reduce::sum, "dp">
// Axes named by neither are replicated.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include <tessera/core/config.hpp>
#include <tessera/core/fixed_string.hpp>
#include <tessera/core/reduce.hpp>

namespace tessera {

// The reduce op of a partial tensor (`reduce`, an alias of reduce_op) is core/reduce.hpp's.

namespace detail {
enum class item_kind : std::uint8_t { shard, replicate, partial, dim, partial_on };

/// What one spelling element says, as a value.
struct layout_item {
  item_kind kind{};
  int dim = 0;                 // shard<D> / dim<D, ...>
  reduce op = reduce::sum;     // partial / partial_on
  int n_names = 0;             // dim / partial_on
  std::array<std::string_view, max_mesh_axes + 1> names{};
};
}  // namespace detail

/// DTensor's Shard(D): this mesh axis splits tensor dimension D.
template <int D>
struct shard {
  static constexpr detail::layout_item item{detail::item_kind::shard, D, reduce::sum, 0, {}};
};

/// DTensor's Replicate(): every rank along this mesh axis holds the same values.
struct replicate {
  static constexpr detail::layout_item item{detail::item_kind::replicate, 0, reduce::sum, 0, {}};
};

/// DTensor's Partial(op): the global value is op over the ranks along this mesh axis.
template <reduce Op = reduce::sum>
struct partial {
  static constexpr detail::layout_item item{detail::item_kind::partial, 0, Op, 0, {}};
};

/// Canonical: tensor dimension D is split by the named axes, outermost first.
template <int D, fixed_string... Axes>
struct dim {
  static_assert(sizeof...(Axes) <= max_mesh_axes, "tessera::dim: too many axes");
  static constexpr detail::layout_item item{detail::item_kind::dim, D, reduce::sum,
                                            static_cast<int>(sizeof...(Axes)), {Axes.view()...}};
};

/// Canonical: the tensor is partial over the named axes, with reduce op Op.
template <reduce Op, fixed_string... Axes>
struct partial_on {
  static_assert(sizeof...(Axes) <= max_mesh_axes, "tessera::partial_on: too many axes");
  static constexpr detail::layout_item item{detail::item_kind::partial_on, 0, Op,
                                            static_cast<int>(sizeof...(Axes)), {Axes.view()...}};
};

}  // namespace tessera
