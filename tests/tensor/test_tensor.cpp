// Tensor views, owning tensors, the tracking allocator and the parameter arena.
#include <doctest/doctest.h>

#include <cstdint>
#include <string_view>

#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/tensor.hpp>

using namespace tessera;

TEST_CASE("tensor_view: shape, strides, indexing, slicing, transpose, reshape") {
  float buf[24];
  for (int i = 0; i < 24; ++i) buf[i] = static_cast<float>(i);
  tensor_view<float> v(buf, {2, 3, 4});
  CHECK(v.rank() == 3);
  CHECK(v.numel() == 24);
  CHECK(v.layout_string() == "(2,3,4):(12,4,1)");
  CHECK(v.is_contiguous());
  CHECK(v(1, 2, 3) == 23.0f);
  CHECK(v.size(-1) == 4);
  auto s = v.slice(2, 1, 3);
  CHECK(s.layout_string() == "(2,3,2):(12,4,1)");
  CHECK_FALSE(s.is_contiguous());
  CHECK(s(1, 0, 1) == 14.0f);
  auto sel = v.select(1, 2);
  CHECK(sel.layout_string() == "(2,4):(12,1)");
  CHECK(sel(1, 0) == 20.0f);
  auto t = v.transpose(0, 2);
  CHECK(t.layout_string() == "(4,3,2):(1,4,12)");
  CHECK(t(3, 2, 1) == 23.0f);
  auto r = v.reshape({6, -1});
  CHECK(r.layout_string() == "(6,4):(4,1)");
  CHECK(r(5, 3) == 23.0f);
  CHECK_THROWS_AS(s.reshape({12}), tessera::error);
  CHECK_THROWS_AS(v.reshape({5, 5}), tessera::error);
  CHECK_THROWS_AS(v.slice(0, 1, 3), tessera::error);
  CHECK_THROWS_AS(v(0, 0), tessera::error);
  tensor_view<const float> cv = v;  // read-only conversion
  CHECK(cv(0, 1, 0) == 4.0f);
  static_assert(tensor_view<const bf16>::dtype() == dtype::bf16);
}

TEST_CASE("tensor: owning, zeroed, move-only, tracked") {
  using tr = memory_tracker<host_space>;
  const auto base = tr::current_bytes();
  tr::reset_peak();
  {
    tensor<float> a({3, 5});
    CHECK(a.numel() == 15);
    CHECK(a(2, 4) == 0.0f);
    a(2, 4) = 7.0f;
    CHECK(tr::current_bytes() == base + 60);
    tensor<float> b = std::move(a);
    CHECK(a.data() == nullptr);
    CHECK(b(2, 4) == 7.0f);
    CHECK(tr::current_bytes() == base + 60);
    tensor<bf16> c({1000});
    CHECK(tr::current_bytes() == base + 60 + 2000);
  }
  CHECK(tr::current_bytes() == base);
  CHECK(tr::peak_bytes() == base + 2060);
  tr::reset_peak();
  CHECK(tr::peak_bytes() == base);
}

namespace {
std::int64_t hook_total = 0;
void hook(std::string_view space, std::int64_t delta, std::int64_t, void* user) {
  if (space == "host") hook_total += delta;
  *static_cast<int*>(user) += 1;
}
}  // namespace

TEST_CASE("memory_tracker: the hook sees every allocation and release") {
  int calls = 0;
  memory_tracker<host_space>::set_hook(hook, &calls);
  { tensor<float> t({256}); }
  memory_tracker<host_space>::set_hook(nullptr);
  CHECK(calls == 2);
  CHECK(hook_total == 0);
}

TEST_CASE("arena: one allocation, aligned named slots, views") {
  arena_layout lay;
  const auto a = lay.add("a", {3, 5});
  const auto b = lay.add("b", {7});
  lay.add("c", {2, 2, 2});
  CHECK(lay.numel() == 15 + 7 + 8);
  CHECK(lay.slots()[b].offset == 16);
  CHECK(lay.slots()[2].offset == 32);
  CHECK(lay.total() == 48);
  CHECK_THROWS_AS(lay.add("a", {1}), tessera::error);
  const auto allocs = memory_tracker<host_space>::allocations();
  arena<float> ar(lay);
  CHECK(memory_tracker<host_space>::allocations() == allocs + 1);
  CHECK(reinterpret_cast<std::uintptr_t>(ar.data()) % 64 == 0);
  ar[a](2, 4) = 1.0f;
  ar["c"](1, 1, 1) = 2.0f;
  CHECK(ar.data()[14] == 1.0f);
  CHECK(ar.data()[39] == 2.0f);
  CHECK(ar["b"].layout_string() == "(7):(1)");
  CHECK_THROWS_WITH_AS(ar["missing"], "arena: no slot named 'missing'", tessera::error);
  ar.zero();
  CHECK(ar.data()[39] == 0.0f);
}
