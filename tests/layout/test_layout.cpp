#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <tessera/layout/layout.hpp>
#include <tessera/layout/parse.hpp>

#include "layouts.hpp"  // tests/support

using namespace tessera;

using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using M3 = mesh<axis<"pp", 2>, axis<"dp", 3>, axis<"tp", 2>>;

// Both spellings of one layout are one type.
static_assert(std::is_same_v<layout_t<M, 2, shard<0>, replicate>, layout_t<M, 2, dim<0, "dp">>>);
static_assert(std::is_same_v<layout_t<M, 2, shard<0>, shard<0>>, layout_t<M, 2, dim<0, "dp", "tp">>>);
static_assert(std::is_same_v<layout_t<M, 2, shard<-1>, replicate>, layout_t<M, 2, shard<1>, replicate>>);
static_assert(std::is_same_v<layout_t<M, 2, replicate, partial<>>, layout_t<M, 2, partial_on<reduce::sum, "tp">>>);
static_assert(std::is_same_v<layout_t<M, 2, replicate, replicate>, replicated_t<M, 2>>);
static_assert(std::is_same_v<layout_t<M, 2>, replicated_t<M, 2>>);
// FSDP over TP: dp splits the tp-local shard. DTensor needs _StridedShard; here it is a layout.
static_assert(!std::is_same_v<layout_t<M, 2, dim<0, "tp", "dp">>, layout_t<M, 2, dim<0, "dp", "tp">>>);
static_assert(!std::is_same_v<layout_t<M, 2, partial<reduce::max>, replicate>, layout_t<M, 2, partial<>, replicate>>);

// Static local extents where everything is static and divides, dyn elsewhere.
static_assert(std::is_same_v<local_extents_t<layout_t<M, 2, shard<0>, shard<1>>, extents<8, 16>>, extents<4, 4>>);
static_assert(std::is_same_v<local_extents_t<layout_t<M, 2, dim<1, "tp", "dp">>, extents<8, dyn>>, extents<8, dyn>>);
static_assert(std::is_same_v<local_extents_t<layout_t<mesh<axis<"dp">>, 1, shard<0>>, extents<8>>, extents<dyn>>);

TEST_CASE("printing in both notations") {
  using A = layout_t<M, 2, shard<0>, replicate>;
  CHECK(A::dtensor_str() == "[S(0), R]");
  CHECK(A::str() == "{0: (dp), partial: {}}");
  using B = layout_t<M, 2, dim<0, "tp", "dp">>;
  CHECK(B::dtensor_str() == "[S(0)#1, S(0)#0]");
  CHECK(B::str() == "{0: (tp, dp), partial: {}}");
  using C = layout_t<M3, 3, partial<reduce::avg>, shard<-1>, partial<reduce::avg>>;
  CHECK(C::dtensor_str() == "[P(avg), S(2), P(avg)]");
  CHECK(C::str() == "{2: (dp), partial: avg(pp, tp)}");
}

TEST_CASE("balanced uneven split") {
  // 5 over 4 gives 2,1,1,1 (torch.chunk would give 2,2,1,0).
  std::vector<std::int64_t> sizes, offsets;
  for (int i = 0; i < 4; ++i) {
    sizes.push_back(split_size(5, 4, i));
    offsets.push_back(split_offset(5, 4, i));
  }
  CHECK(sizes == std::vector<std::int64_t>{2, 1, 1, 1});
  CHECK(offsets == std::vector<std::int64_t>{0, 2, 3, 4});
  CHECK(split_size(3, 4, 3) == 0);  // empty only when N < n
}

TEST_CASE("nested sharding splits the piece the outer axes left") {
  using L = layout_t<M, 1, dim<0, "dp", "tp">>;
  const M m;
  // 10 over dp=2 -> 5,5; each 5 over tp=4 -> 2,1,1,1.
  const box b1 = L::local_box(m, {10}, m.rank({0, 1}));
  CHECK(b1.offset[0] == 2);
  CHECK(b1.size[0] == 1);
  const box b2 = L::local_box(m, {10}, m.rank({1, 0}));
  CHECK(b2.offset[0] == 5);
  CHECK(b2.size[0] == 2);
  using T = layout_t<M, 1, dim<0, "tp", "dp">>;
  const box b3 = T::local_box(m, {10}, m.rank({1, 0}));  // tp=0 piece [0,3), dp=1 -> [2,3)
  CHECK(b3.offset[0] == 2);
  CHECK(b3.size[0] == 1);
}

using testing_layouts::all_layouts;

TEST_CASE("the ranks' boxes tile the global tensor, each element held by the replicated and partial axes' ranks") {
  std::mt19937 rng(12345);
  const std::vector<mesh_shape> meshes = {mesh_shape{1, {3}}, mesh_shape{2, {2, 3}}, mesh_shape{3, {2, 3, 2}}};
  int cases = 0;
  for (const auto& m : meshes)
    for (int R = 1; R <= 3; ++R)
      for (const layout_spec& s : all_layouts(R, m.ndim, reduce::sum)) {
        shape_t g;
        g.rank = static_cast<std::int8_t>(R);
        for (int d = 0; d < R; ++d) g[d] = 1 + static_cast<std::int64_t>(rng() % 13);
        std::int64_t copies = 1;
        for (int a = 0; a < m.ndim; ++a)
          if (!s.is_sharded(a)) copies *= m[a];
        std::map<std::vector<std::int64_t>, std::int64_t> count;
        for (std::int64_t r = 0; r < world_size(m); ++r) {
          const box b = local_box(s, m, g, coords_of(m, r));
          for (int d = 0; d < R; ++d) CHECK(b.size[static_cast<std::size_t>(d)] <= max_local_extent(s, m, g, d));
          std::vector<std::int64_t> idx(static_cast<std::size_t>(R));
          std::function<void(int)> walk = [&](int d) {
            if (d == R) {
              ++count[idx];
              return;
            }
            for (std::int64_t i = 0; i < b.size[static_cast<std::size_t>(d)]; ++i) {
              idx[static_cast<std::size_t>(d)] = b.offset[static_cast<std::size_t>(d)] + i;
              walk(d + 1);
            }
          };
          walk(0);
        }
        REQUIRE(static_cast<std::int64_t>(count.size()) == g.numel());
        for (const auto& [idx, n] : count) REQUIRE(n == copies);
        ++cases;
      }
  CHECK(cases > 300);
}

TEST_CASE("parsing accepts what printing writes, in both notations") {
  const std::array<std::string_view, 3> names{"pp", "dp", "tp"};
  for (int R = 1; R <= 3; ++R)
    for (reduce op : {reduce::sum, reduce::max})
      for (const layout_spec& s : all_layouts(R, 3, op)) {
        CHECK(parse_layout(to_canonical_string(s, names), names, R) == s);
        CHECK(parse_layout(to_dtensor_string(s), names, R) == s);
      }
  CHECK(parse_layout("S(0),R,P", names, 2) == layout_t<M3, 2, shard<0>, replicate, partial<>>::spec);
  CHECK(parse_layout("{0: tp}", names, 2) == layout_t<M3, 2, dim<0, "tp">>::spec);
}

TEST_CASE("bad layout text names the problem") {
  const std::array<std::string_view, 2> names{"dp", "tp"};
  CHECK_THROWS_WITH_AS(parse_layout("S(0)", names, 2), doctest::Contains("give one placement per mesh axis"), error);
  CHECK_THROWS_WITH_AS(parse_layout("S(2),R", names, 2), doctest::Contains("out of range for a tensor of rank 2"), error);
  CHECK_THROWS_WITH_AS(parse_layout("Q,R", names, 2), doctest::Contains("unknown placement 'Q'"), error);
  CHECK_THROWS_WITH_AS(parse_layout("P(prod),R", names, 2), doctest::Contains("unknown reduce op 'prod'"), error);
  CHECK_THROWS_WITH_AS(parse_layout("P(sum),P(max)", names, 2), doctest::Contains("share one reduce op"), error);
  CHECK_THROWS_WITH_AS(parse_layout("{0: (dp, ep)}", names, 2), doctest::Contains("'ep' is not an axis"), error);
  CHECK_THROWS_WITH_AS(parse_layout("{0: (dp), 1: (dp)}", names, 2), doctest::Contains("used twice"), error);
}
