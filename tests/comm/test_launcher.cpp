// comm/launcher.hpp: a process's place on its node as its launcher says it -- mpirun's,
// torchrun's and MPICH's variables first, Slurm's last (mpirun's processes inside a Slurm job
// inherit its batch step's SLURM_LOCALID=0) -- Slurm's compressed counts a node, and which
// processes drive one device, from the devices' identities.
#include <doctest/doctest.h>

#include <array>
#include <optional>
#include <tessera/comm/launcher.hpp>
#include <tessera/comm/threads.hpp>
#include <vector>

#include "launcher_env.hpp"  // tests/support

using tessera::comm::device_sharing;
using tessera::comm::device_uuid;
using tessera::comm::node_local_rank;
using tessera::comm::node_local_size;
using tessera::comm::slurm_count_of_node;
using tessera::testing::launcher_env;

TEST_CASE("slurm_count_of_node reads Slurm's counts a node, repeats included; another form is none") {
  CHECK(slurm_count_of_node("2(x3),1", 0) == 2);
  CHECK(slurm_count_of_node("2(x3),1", 2) == 2);
  CHECK(slurm_count_of_node("2(x3),1", 3) == 1);
  CHECK(slurm_count_of_node("2(x3),1", 4) == std::nullopt);
  CHECK(slurm_count_of_node("4", 0) == 4);
  CHECK(slurm_count_of_node("8,4(x2),16", 3) == 16);
  CHECK(slurm_count_of_node("2(x3),1", -1) == std::nullopt);
  for (const char* bad : {"", "x", "2(x)", "2(x3", "2(y3)", "2(x3)4", "2(x0),1", ",2", "2,,1"}) {
    INFO(bad);
    CHECK(slurm_count_of_node(bad, 1) == std::nullopt);
  }
}

TEST_CASE("node_local_rank: the launcher's variable, Slurm's last, else the fallback") {
  launcher_env env;
  CHECK(node_local_rank(5) == 5);
  env.set("SLURM_LOCALID", "3");  // srun's task: Open MPI sets nothing under srun
  CHECK(node_local_rank(5) == 3);
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");  // mpirun inside the job: its own variable wins
  CHECK(node_local_rank(5) == 1);
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "one");  // not a number: the next one says it
  CHECK(node_local_rank(5) == 3);
  env.set("LOCAL_RANK", "2");  // torchrun's
  CHECK(node_local_rank(5) == 2);
  env.set("SLURM_LOCALID", "");
  env.set("LOCAL_RANK", "-1");
  CHECK(node_local_rank(5) == 5);
  env.set("MPI_LOCALRANKID", "0");  // MPICH's
  CHECK(node_local_rank(5) == 0);
}

TEST_CASE("node_local_size: the launcher's count, Slurm's step counts by node id, else the fallback") {
  launcher_env env;
  CHECK(node_local_size(1) == 1);
  env.set("SLURM_NTASKS_PER_NODE", "4");  // given only with --ntasks-per-node
  CHECK(node_local_size(1) == 4);
  env.set("SLURM_STEP_TASKS_PER_NODE", "2(x3),1");  // srun's step, node by node
  CHECK(node_local_size(1) == 4);                   // which node is this? not said: not used
  env.set("SLURM_NODEID", "3");
  CHECK(node_local_size(1) == 1);
  env.set("SLURM_NODEID", "1");
  CHECK(node_local_size(1) == 2);
  env.set("SLURM_NODEID", "9");  // past the list: the next count
  CHECK(node_local_size(1) == 4);
  env.set("MPI_LOCALNRANKS", "6");
  CHECK(node_local_size(1) == 6);
  env.set("LOCAL_WORLD_SIZE", "7");
  CHECK(node_local_size(1) == 7);
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "8");
  CHECK(node_local_size(1) == 8);
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "0");  // no count
  CHECK(node_local_size(1) == 7);
}

namespace {
device_uuid gpu(std::uint8_t id) {
  device_uuid u{};
  u[0] = 0x47;
  u[15] = id;
  return u;
}
}  // namespace

TEST_CASE("sharing_of counts the processes on each device by its identity, not by what each sees") {
  // srun --gpus-per-task=1: each process sees one GPU, its device 0, each a different one
  const std::vector<device_uuid> own = {gpu(0), gpu(1), gpu(2), gpu(3)};
  for (std::size_t me = 0; me < own.size(); ++me) {
    const device_sharing s = tessera::comm::sharing_of(own, me);
    CHECK(s.known);
    CHECK(s.on_mine == 1);
    CHECK(s.most == 1);
  }
  // 3 processes on one GPU, a fourth on another
  const std::vector<device_uuid> some = {gpu(7), gpu(7), gpu(8), gpu(7)};
  CHECK(tessera::comm::sharing_of(some, 0).on_mine == 3);
  CHECK(tessera::comm::sharing_of(some, 2).on_mine == 1);
  CHECK(tessera::comm::sharing_of(some, 2).most == 3);
  // a process that could not read its device's identity: nothing known
  const std::vector<device_uuid> unknown = {gpu(1), device_uuid{}, gpu(1)};
  const device_sharing s = tessera::comm::sharing_of(unknown, 0);
  CHECK(!s.known);
  CHECK(s.on_mine == 1);
  CHECK(s.most == 1);
}

TEST_CASE("device_sharing_over gathers every rank's device identity and counts it the same on each") {
  for (const int per : {1, 2, 4}) {  // ranks r and r + per share a device
    INFO("devices: " << per);
    std::array<device_sharing, 4> seen{};
    tessera::comm::run_threads(4, [&](tessera::comm::threads_communicator& c) {
      seen[static_cast<std::size_t>(c.rank())] =
          tessera::comm::device_sharing_over(c, gpu(static_cast<std::uint8_t>(c.rank() % per)));
    });
    for (const device_sharing& s : seen) {
      CHECK(s.known);
      CHECK(s.on_mine == 4 / per);
      CHECK(s.most == 4 / per);
    }
  }
}
