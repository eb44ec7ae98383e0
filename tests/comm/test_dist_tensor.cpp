#include <doctest/doctest.h>

#include <tessera/comm/threads.hpp>

#include "dist_layouts.hpp"
#include "staged_space.hpp"

using namespace tessera;

TEST_CASE("dist_tensor: every transition on a 1-D mesh, even and uneven, f32 and bf16") {
  comm::run_threads(4, [](comm::threads_communicator& c) {
    device_mesh<dist_layouts::M1> dm(dist_layouts::M1{}, c);
    int n = 0;
    for (shape_t g : {shape_t{8, 12}, shape_t{7, 5}, shape_t{3, 2}}) {
      n += dist_checks::all_pairs<float>(dm, g, dist_layouts::L1{});
      n += dist_checks::all_pairs<dist_checks::bf16>(dm, g, dist_layouts::L1{});
    }
    CHECK(n > 0);
  });
}

TEST_CASE("dist_tensor: every transition on a 2-D mesh (2 x 3), even and uneven, f32 and bf16") {
  comm::run_threads(6, [](comm::threads_communicator& c) {
    device_mesh<dist_layouts::M2> dm(dist_layouts::M2{}, c);
    for (shape_t g : {shape_t{12, 6}, shape_t{7, 5}}) {
      dist_checks::all_pairs<float>(dm, g, dist_layouts::L2{});
      dist_checks::all_pairs<dist_checks::bf16>(dm, g, dist_layouts::L2{});
    }
  });
}

TEST_CASE("dist_tensor: transitions on a 3-D mesh (2 x 2 x 2), even and uneven, f32 and bf16") {
  comm::run_threads(8, [](comm::threads_communicator& c) {
    device_mesh<dist_layouts::M3> dm(dist_layouts::M3{}, c);
    for (shape_t g : {shape_t{8, 4, 4}, shape_t{5, 3, 7}}) {
      dist_checks::all_pairs<float>(dm, g, dist_layouts::L3{});
      dist_checks::all_pairs<dist_checks::bf16>(dm, g, dist_layouts::L3{});
    }
  });
}

TEST_CASE("dist_tensor: consecutive all_to_all steps run as one exchange over the union of their groups") {
  using M = dist_layouts::M2;
  using Src = layout_t<M, 2, dim<0, "a">, dim<1, "b">>;
  using Dst = layout_t<M, 2, dim<0, "b">, dim<1, "a">>;
  using P = plan_t<Src, Dst, float>;
  constexpr plan_runs runs = P::runs;
  static_assert(P::size >= 2);
  REQUIRE(runs.size() == 1);  // every step of this plan is an all_to_all
  CHECK(runs[0].begin == 0);
  CHECK(runs[0].end == P::size);
  CHECK(runs[0].fused());
  CHECK(runs[0].group.n == 2);  // (a, b): the whole mesh
  CHECK(runs[0].group[0] == 0);
  CHECK(runs[0].group[1] == 1);
  // a plan without consecutive all_to_alls keeps one run per step
  constexpr plan_runs single = plan_t<layout_t<M, 2, dim<0, "a">>, layout_t<M, 2, dim<1, "a">>>::runs;
  CHECK(single.size() == 1);
  CHECK(!single[0].fused());
  // the layout lists of the transition tests (threads and mpi) include fused plans
  CHECK(dist_checks::fused_pairs<float>(dist_layouts::L2{}) > 0);
  CHECK(dist_checks::fused_pairs<float>(dist_layouts::L3{}) > 0);
  CHECK(dist_checks::fused_pairs<float>(dist_layouts::L22{}) > 0);
}

TEST_CASE("dist_tensor: bad input is named") {
  comm::run_threads(4, [](comm::threads_communicator& c) {
    using M = dist_layouts::M1;
    device_mesh<M> dm(M{}, c);
    using D = dist_tensor<float, layout_t<M, 2, dim<0, "x">>>;
    CHECK_THROWS_WITH(D::from_local(dm, {8, 2}, std::vector<float>(3)),
                      doctest::Contains("holds 3 elements, but its block of layout"));
    CHECK_THROWS_WITH(D::distribute(dm, {8}, [](const index_t&) { return 1.0f; }),
                      doctest::Contains("the global shape has 1 dimensions"));
  });
  CHECK_THROWS_WITH(comm::run_threads(3, [](comm::threads_communicator& c) {
                      device_mesh<dist_layouts::M1> dm(dist_layouts::M1{}, c);
                    }),
                    doctest::Contains("has 4 ranks but the communicator has 3"));
}

// The path device memory takes (a non-host data_space: storage owned by the space, copies
// and strided copies through it, fences before collectives, host copies in and out) on a
// host test space, with every pair of layouts as above.
TEST_CASE("dist_tensor: every transition in a non-host memory space (the device path, on host memory)") {
  const auto before = staged::count().copies_2d.load() + staged::count().fences.load();
  comm::run_threads(6, [](comm::threads_communicator& c) {
    device_mesh<dist_layouts::M2> dm(dist_layouts::M2{}, c);
    for (shape_t g : {shape_t{12, 6}, shape_t{7, 5}}) {
      CHECK(dist_checks::all_pairs<float, staged::space>(dm, g, dist_layouts::L2{}) > 0);
      dist_checks::all_pairs<dist_checks::bf16, staged::space>(dm, g, dist_layouts::L2{});
    }
  });
  comm::run_threads(8, [](comm::threads_communicator& c) {
    device_mesh<dist_layouts::M3> dm(dist_layouts::M3{}, c);
    dist_checks::all_pairs<float, staged::space>(dm, shape_t{5, 3, 7}, dist_layouts::L3{});
  });
  CHECK(staged::count().copies_2d.load() + staged::count().fences.load() > before);
  CHECK(memory_tracker<staged::space>::current_bytes() == 0);  // tensors and the meshes' scratch freed
}

TEST_CASE("dist_tensor: redistribute(out) and copies in a non-host memory space") {
  comm::run_threads(4, [](comm::threads_communicator& c) {
    using M = dist_layouts::M1;
    device_mesh<M> dm(M{}, c);
    using Row = layout_t<M, 2, dim<0, "x">>;
    using Col = layout_t<M, 2, dim<1, "x">>;
    auto x = dist_checks::make<float, Row, staged::space>(dm, shape_t{8, 12});
    auto y = dist_tensor<float, Col, staged::space>::zeros(dm, shape_t{8, 12});
    for (float v : y.local_values()) CHECK(v == 0.0f);
    x.redistribute(y);
    dist_checks::verify(y, shape_t{8, 12}, "Row -> Col into out");
    auto z = y;  // a copy within the space
    y = x.redistribute<Col>();
    dist_checks::verify(z, shape_t{8, 12}, "copy of y");
  });
}

namespace {
struct device_like : staged::space {
  static constexpr std::string_view name = "device-like";
  static constexpr bool device_buffers = true;
};
}  // namespace

TEST_CASE("dist_tensor: a device-memory tensor on a host communicator is named") {
  comm::run_threads(2, [](comm::threads_communicator& c) {
    using M = mesh<axis<"x", 2>>;
    device_mesh<M> dm(M{}, c);
    using L = layout_t<M, 1, dim<0, "x">>;
    using D = dist_tensor<float, L, device_like>;
    CHECK_THROWS_WITH(D::zeros(dm, shape_t{4}),
                      doctest::Contains("tensor is in device-like memory, but the device mesh's communicator is "
                                        "threads, which moves host buffers only; make the device mesh on an nccl "
                                        "communicator"));
  });
}
