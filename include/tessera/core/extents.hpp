// tessera/core/extents.hpp: static-or-dynamic extents (as mdspan's std::extents, which
// g++ 12 lacks) and the value types every layer uses for shapes and coordinates.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include <tessera/core/config.hpp>
#include <tessera/core/error.hpp>

namespace tessera {

/// A global or local tensor shape as a value: `rank` extents, the rest zero.
struct shape_t {
  std::int8_t rank = 0;
  std::array<std::int64_t, max_tensor_rank> extent{};

  constexpr shape_t() = default;
  constexpr shape_t(std::initializer_list<std::int64_t> e) {
    check(e.size() <= max_tensor_rank, "tessera::shape_t: too many dimensions");
    for (std::int64_t x : e) extent[static_cast<std::size_t>(rank++)] = x;
  }
  constexpr std::int64_t operator[](int d) const { return extent[static_cast<std::size_t>(d)]; }
  constexpr std::int64_t& operator[](int d) { return extent[static_cast<std::size_t>(d)]; }
  constexpr std::int64_t numel() const {
    std::int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= extent[static_cast<std::size_t>(d)];
    return n;
  }
  friend constexpr bool operator==(const shape_t&, const shape_t&) = default;
};

/// Extents whose entries are each static (a number) or dynamic (`tessera::dyn`).
/// `extents<1024, dyn>` has a static first and a dynamic second extent.
template <std::int64_t... E>
class extents {
 public:
  static constexpr int rank() noexcept { return sizeof...(E); }
  static constexpr int rank_dynamic() noexcept { return ((E == dyn ? 1 : 0) + ... + 0); }
  static constexpr std::int64_t static_extent(int d) noexcept {
    constexpr std::int64_t s[] = {E..., 0};
    return s[d];
  }
  /// True when every extent is known at compile time.
  static constexpr bool is_always_static() noexcept { return rank_dynamic() == 0; }

  constexpr extents() noexcept requires(rank_dynamic() == 0) { fill_static(); }
  /// Binds the dynamic extents, in order.
  template <class... I>
    requires(sizeof...(I) == rank_dynamic() && rank_dynamic() > 0)
  constexpr explicit extents(I... dynamic) {
    fill_static();
    const std::int64_t d[] = {static_cast<std::int64_t>(dynamic)...};
    int k = 0;
    for (int i = 0; i < rank(); ++i)
      if (static_extent(i) == dyn) shape_.extent[static_cast<std::size_t>(i)] = d[k++];
    for (int i = 0; i < rank(); ++i)
      check(shape_[i] >= 0, "tessera::extents: an extent must not be negative");
  }
  /// Binds from a full shape; static entries must agree.
  constexpr explicit extents(const shape_t& s) {
    fill_static();
    check(s.rank == rank(), "tessera::extents: the shape's rank differs from the extents' rank");
    for (int i = 0; i < rank(); ++i) {
      check(static_extent(i) == dyn || static_extent(i) == s[i],
            "tessera::extents: a static extent differs from the given shape");
      shape_[i] = s[i];
    }
  }

  constexpr std::int64_t extent(int d) const noexcept { return shape_[d]; }
  constexpr const shape_t& shape() const noexcept { return shape_; }

  /// The shape with dynamic extents replaced by `nominal` (for compile-time planning).
  static constexpr shape_t nominal_shape(std::int64_t nominal) noexcept {
    shape_t s;
    s.rank = static_cast<std::int8_t>(rank());
    for (int i = 0; i < rank(); ++i)
      s[i] = static_extent(i) == dyn ? nominal : static_extent(i);
    return s;
  }

 private:
  constexpr void fill_static() noexcept {
    shape_.rank = static_cast<std::int8_t>(rank());
    for (int i = 0; i < rank(); ++i) shape_[i] = static_extent(i) == dyn ? 0 : static_extent(i);
  }
  shape_t shape_{};
};

/// `dextents<R>`: R dynamic extents.
namespace detail {
template <class Seq>
struct make_dextents;
template <std::size_t... I>
struct make_dextents<std::index_sequence<I...>> {
  using type = extents<((void)I, dyn)...>;
};
}  // namespace detail
template <int R>
using dextents = typename detail::make_dextents<std::make_index_sequence<R>>::type;

template <class T>
inline constexpr bool is_extents_v = false;
template <std::int64_t... E>
inline constexpr bool is_extents_v<extents<E...>> = true;

}  // namespace tessera
