#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <type_traits>
#include <tessera/tessera.hpp>

namespace {
template <tessera::fixed_string S>
struct named {
  static constexpr std::string_view name = S.view();
};
}  // namespace

static_assert(named<"dp">::name == "dp");
static_assert(tessera::fixed_string("tp").size() == 2);
static_assert(std::is_same_v<named<"dp">, named<"dp">>);
static_assert(!std::is_same_v<named<"dp">, named<"tp">>);

TEST_CASE("tessera::check throws tessera::error with the message") {
  CHECK_NOTHROW(tessera::check(true, "fine"));
  try {
    tessera::check(false, "axis \"tp\" has size 3");
    FAIL("check(false) did not throw");
  } catch (const tessera::error& e) {
    CHECK(std::string(e.what()) == "axis \"tp\" has size 3");
  }
}
