#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <tessera/layout/mesh.hpp>

using namespace tessera;

using M2 = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using MD = mesh<axis<"pp", 2>, axis<"dp">, axis<"tp", 2>>;

static_assert(M2::ndim == 2 && M2::is_always_static() && !MD::is_always_static());
static_assert(M2::axis_index<"tp">() == 1 && M2::index_of("cp") == -1);
static_assert(M2().world_size() == 8);
// Row-major: the last axis varies fastest.
static_assert(M2().coords(5)[0] == 1 && M2().coords(5)[1] == 1);
static_assert(M2().rank(coords_t{1, 3}) == 7);
static_assert(group_index(M2::static_shape, M2::group<"tp", "dp">(), coords_t{1, 2}) == 5);

TEST_CASE("rank <-> coordinates round-trip on every rank of a 3-D mesh") {
  MD m(12);  // dp inferred: 12 / (2 * 2) = 3
  CHECK(m.size("dp") == 3);
  for (std::int64_t r = 0; r < 12; ++r) CHECK(m.rank(m.coords(r)) == r);
  CHECK(m.coords(7) == coords_t{1, 0, 1});
}

TEST_CASE("group ranks along one axis and along ordered subsets") {
  const M2 m;
  CHECK(m.group_ranks(M2::group<"tp">(), 5) == std::vector<std::int64_t>{4, 5, 6, 7});
  CHECK(m.group_ranks(M2::group<"dp">(), 5) == std::vector<std::int64_t>{1, 5});
  // A flattened group is row-major in the order its axes are listed.
  CHECK(m.group_ranks(M2::group<"dp", "tp">(), 3) == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(m.group_ranks(M2::group<"tp", "dp">(), 3) == std::vector<std::int64_t>{0, 4, 1, 5, 2, 6, 3, 7});
}

TEST_CASE("every rank is in exactly one group per axis subset, at its group_index") {
  MD m(2 * 3 * 2, {{"dp", 3}});
  for (auto g : {MD::group<"pp">(), MD::group<"dp", "tp">(), MD::group<"tp", "pp">(), MD::group<"tp", "dp", "pp">()}) {
    for (std::int64_t r = 0; r < m.world_size(); ++r) {
      const auto ranks = m.group_ranks(g, r);
      CHECK(static_cast<std::int64_t>(ranks.size()) == group_size(m.shape(), g));
      CHECK(ranks[static_cast<std::size_t>(group_index(m.shape(), g, m.coords(r)))] == r);
      for (auto q : ranks) CHECK(m.group_ranks(g, q) == ranks);
    }
  }
}

TEST_CASE("dynamic sizes are bound at run time and checked against the world size") {
  CHECK_THROWS_WITH_AS(MD(10), doctest::Contains("is not divisible by the product of the other axes"), error);
  CHECK_THROWS_WITH_AS(MD(12, {{"dp", 2}}), doctest::Contains("not the world size 12"), error);
  CHECK_THROWS_WITH_AS(MD(12, {{"tp", 3}}), doctest::Contains("is static with size 2"), error);
  CHECK_THROWS_WITH_AS(MD(12, {{"ep", 3}}), doctest::Contains("no axis named \"ep\""), error);
  CHECK_THROWS_WITH_AS(M2(4), doctest::Contains("not the world size 4"), error);
  using MDD = mesh<axis<"a">, axis<"b">>;
  CHECK_THROWS_WITH_AS(MDD(4), doctest::Contains("both dynamic and unbound"), error);
  CHECK(MDD(6, {{"a", 3}}).size("b") == 2);
  CHECK(MD(8).str() == "(pp=2, dp=2, tp=2)");
}
