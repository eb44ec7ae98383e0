#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <tessera/comm/threads.hpp>
#include <tessera/tensor/dist_tensor.hpp>
#include <vector>

#include "dist_layouts.hpp"

using namespace tessera;

namespace {
using M = mesh<axis<"a", 2>, axis<"b", 2>>;
using AB = layout_t<M, 2, dim<0, "a">, dim<1, "b">>;
using BA = layout_t<M, 2, dim<0, "b">, dim<1, "a">>;
using Part = layout_t<M, 2, partial_on<reduce::sum, "a", "b">>;
using Repl = replicated_t<M, 2>;
float value(const index_t& i) { return static_cast<float>(i[0] * 1000 + i[1]); }
}  // namespace

TEST_CASE("redistribute(out) writes the transition into out's buffer, call after call") {
  comm::run_threads(4, [](comm::threads_communicator& c) {
    device_mesh<M> dm(M{}, c);
    const shape_t g{64, 48};
    auto x = dist_tensor<float, AB>::distribute(dm, g, value);
    auto fresh = x.redistribute<BA>();
    auto out = dist_tensor<float, BA>::zeros(dm, g);
    const float* buf = out.local().data();
    for (int k = 0; k < 3; ++k) {
      x.redistribute(out);
      CHECK(out.local().data() == buf);  // no new buffer
      REQUIRE(out.local().size() == fresh.local().size());
      CHECK(std::equal(out.local().begin(), out.local().end(), fresh.local().begin()));
    }
    // an all_reduce (P -> R) into a reused buffer, as the MPI 16 MiB cell of issue 21 runs it
    auto p = dist_tensor<float, Part>::distribute(dm, g, value);
    auto r = p.redistribute<Repl>();
    const float* rbuf = r.local().data();
    std::vector<float> want = r.local().size() ? std::vector<float>(r.local().begin(), r.local().end()) : std::vector<float>{};
    std::fill(r.local().begin(), r.local().end(), -1.0f);
    p.redistribute(r);
    CHECK(r.local().data() == rbuf);
    CHECK(std::equal(want.begin(), want.end(), r.local().begin()));
    const auto full = r.full_tensor();
    for (std::int64_t i = 0; i < g[0]; ++i)
      for (std::int64_t j = 0; j < g[1]; ++j) REQUIRE(full[static_cast<std::size_t>(i * g[1] + j)] == value({i, j}));
  });
}

TEST_CASE("redistribute(out) refuses a tensor of another shape or mesh, naming the fix") {
  comm::run_threads(4, [](comm::threads_communicator& c) {
    device_mesh<M> dm(M{}, c);
    auto x = dist_tensor<float, AB>::distribute(dm, {8, 8}, value);
    auto other_shape = dist_tensor<float, BA>::zeros(dm, {8, 4});
    std::string msg;
    try {
      x.redistribute(other_shape);
    } catch (const error& e) {
      msg = e.what();
    }
    CHECK(msg.find("global shape differs") != std::string::npos);
    CHECK(msg.find("give a tensor of the same global shape") != std::string::npos);
    auto self = dist_tensor<float, AB>::zeros(dm, {8, 8});
    msg.clear();
    try {
      self.redistribute(self);
    } catch (const error& e) {
      msg = e.what();
    }
    CHECK(msg.find("out is this tensor") != std::string::npos);
  });
}

TEST_CASE("fresh results reuse the buffers of dead tensors (result_pool)") {
  result_pool::release();
  result_pool::set_limit(std::int64_t{1} << 30);
  const auto hits0 = result_pool::hits();
  comm::run_threads(4, [](comm::threads_communicator& c) {
    device_mesh<M> dm(M{}, c);
    const shape_t g{512, 256};  // 128 KiB per rank in AB and BA: above the 64 KiB floor
    auto x = dist_tensor<float, AB>::distribute(dm, g, value);
    for (int k = 0; k < 4; ++k) {
      const auto y = x.redistribute<BA>();  // dies at the end of the iteration
      REQUIRE(y.local().size() == 256u * 128u);
      CHECK(y.local()[0] == value({y.local_box().offset[0], y.local_box().offset[1]}));
    }
  });
  // each rank's first call allocates; its 3 later calls take the buffer its last result left
  // (or another rank's: the pool is shared), so at least 3 x 4 hits
  CHECK(result_pool::hits() - hits0 >= 12);
  CHECK(result_pool::held_bytes() > 0);
  result_pool::release();
  CHECK(result_pool::held_bytes() == 0);
  result_pool::set_limit(0);  // off: nothing is kept
  comm::run_threads(4, [](comm::threads_communicator& c) {
    device_mesh<M> dm(M{}, c);
    auto x = dist_tensor<float, AB>::distribute(dm, {512, 256}, value);
    (void)x.redistribute<BA>();
  });
  CHECK(result_pool::held_bytes() == 0);
  result_pool::set_limit(std::int64_t{1} << 30);
}

TEST_CASE("results written into reused (poisoned) pool buffers are exact for every pair on 2 x 2") {
  // Every block of this shape is 64 KiB or more, so every fresh result comes from the pool;
  // the pool is filled first with NaN buffers of 1x to 2x those sizes: a step that leaves
  // an element of its output unwritten (relying on a zeroed new buffer) fails here.
  result_pool::release();
  comm::run_threads(4, [](comm::threads_communicator& c) {
    using dist_layouts::M22;
    device_mesh<M22> dm(M22{}, c);
    const shape_t g{520, 130};  // 264 KiB; a quarter is 66 KiB
    for (int k = 0; k < 8; ++k)
      for (const std::int64_t rows : {130 + 16 * k, 260 + 32 * k, 520 + 64 * k}) {
        auto poison = dist_tensor<float, replicated_t<M22, 2>>::distribute(
            dm, {rows, 130}, [](const index_t&) { return std::numeric_limits<float>::quiet_NaN(); });
        (void)poison;  // dies here: its buffer goes to the pool
      }
    CHECK(dist_checks::all_pairs<float>(dm, g, dist_layouts::L22{}) > 30);
  });
  CHECK(result_pool::hits() > 0);
  result_pool::release();
}
