// The communicator contract on the mpi backend; ctest runs this under mpirun.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <tessera/comm/flight_recorder.hpp>
#include <tessera/comm/mpi.hpp>
#include <vector>

#include "checks.hpp"
#include "dist_layouts.hpp"

using namespace tessera::comm;
using namespace std::chrono_literals;

#include "failure.hpp"  // tests/support

namespace {
using testing_support::has;
using testing_support::failure_of;
}  // namespace

TEST_CASE("mpi: every collective, all sizes, dtypes and ops") {
  mpi_communicator c;
  CHECK_NOTHROW(checks::everything(c, 70'000));
  mpi_communicator fast(MPI_COMM_WORLD, {options{}, false});  // unchecked calls
  CHECK_NOTHROW(checks::everything(fast, 1000));
}

TEST_CASE("mpi: sub-communicators of any ordered list of ranks") {
  mpi_communicator c;
  const int n = c.size(), r = c.rank();
  // halves, and the strided groups across them
  const int h = (n + 1) / 2;
  std::vector<int> half, stride;
  for (int i = 0; i < n; ++i) if ((i < h) == (r < h)) half.push_back(i);
  for (int i = r % 2; i < n; i += 2) stride.push_back(i);
  auto hc = split(c, half);
  auto sc = split(c, stride);
  CHECK(hc.size() == static_cast<int>(half.size()));
  CHECK(sc.world_ranks()[static_cast<std::size_t>(sc.rank())] == r);
  CHECK_NOTHROW(checks::everything(hc, 3000));
  CHECK_NOTHROW(checks::everything(sc, 3000));
  std::vector<int> rev;
  for (int i = n - 1; i >= 0; --i) rev.push_back(i);
  auto rv = split(c, rev);
  CHECK(rv.rank() == n - 1 - r);
  CHECK(rv.world_ranks()[0] == n - 1);
  std::vector<int> mine{rv.rank()}, all(static_cast<std::size_t>(n));
  all_gather(rv, std::span<const int>(mine), std::span(all)).wait();
  for (int i = 0; i < n; ++i) CHECK(all[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("mpi: errors name the rank, the group and the call") {
  mpi_communicator c(MPI_COMM_WORLD, {options{2000ms}, true});
  auto e = failure_of([&] {
    std::vector<float> x(static_cast<std::size_t>(8 + c.rank()));
    all_reduce(c, std::span(x)).wait();
  });
  CHECK(has(e, "mismatched collective #0 of group ["));
  CHECK(has(e, "disagree on the count (from 8 to "));
  CHECK(has(e, "test_mpi.cpp:"));
  auto o = failure_of([&] {
    std::vector<float> x(4);
    send(c, std::span<const float>(x), c.size()).wait();
  });
  CHECK(has(o, "is outside this group of"));
  // a recv that no rank sends to: the timeout names the call
  mpi_communicator t(MPI_COMM_WORLD, {options{300ms}, true});
  auto to = failure_of([&] {
    std::vector<float> x(4);
    recv(t, std::span(x), (t.rank() + 1) % t.size(), 977).wait();
  });
  CHECK(has(to, "recv(count=4, f32, peer="));
  CHECK(has(to, "timed out after 300 ms"));
  c.barrier().wait();
}

TEST_CASE("mpi: the flight recorder decorates the mpi backend") {
  mpi_communicator c;
  flight_recorder rec(c);
  std::vector<float> x(32, 1.0f);
  all_reduce(rec, std::span(x)).wait();
  rec.barrier().wait();
  const auto es = rec.entries();
  REQUIRE(es.size() == 2);
  CHECK(es[0].state == "completed");
  CHECK(x[0] == static_cast<float>(c.size()));
  CHECK(rec.backend() == "mpi");
}

TEST_CASE("mpi: dist_tensor transitions on 1-D, 2-D and 3-D meshes, even and uneven, f32 and bf16") {
  using namespace tessera;
  mpi_communicator c;
  if (c.size() == 4) {
    device_mesh<dist_layouts::M1> d1(dist_layouts::M1{}, c);
    device_mesh<dist_layouts::M22> d2(dist_layouts::M22{}, c);
    for (shape_t g : {shape_t{8, 4}, shape_t{7, 5}}) {
      CHECK_NOTHROW(dist_checks::all_pairs<float>(d1, g, dist_layouts::L1{}));
      CHECK_NOTHROW(dist_checks::all_pairs<dist_checks::bf16>(d1, g, dist_layouts::L1{}));
      CHECK_NOTHROW(dist_checks::all_pairs<float>(d2, g, dist_layouts::L22{}));
      CHECK_NOTHROW(dist_checks::all_pairs<dist_checks::bf16>(d2, g, dist_layouts::L22{}));
    }
  } else if (c.size() == 8) {
    device_mesh<dist_layouts::M3> d3(dist_layouts::M3{}, c);
    for (shape_t g : {shape_t{8, 4, 4}, shape_t{5, 3, 7}}) {
      CHECK_NOTHROW(dist_checks::all_pairs<float>(d3, g, dist_layouts::L3{}));
      CHECK_NOTHROW(dist_checks::all_pairs<dist_checks::bf16>(d3, g, dist_layouts::L3{}));
    }
  }
}

int main(int argc, char** argv) {
  mpi_environment env(argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  doctest::Context ctx(argc, argv);
  if (rank != 0) ctx.setOption("minimal", true);
  int res = ctx.run();
  MPI_Allreduce(MPI_IN_PLACE, &res, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return res;
}
