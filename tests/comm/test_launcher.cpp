// comm/launcher.hpp: a process's place on its node as its launcher says it -- mpirun's,
// torchrun's and MPICH's variables first, Slurm's last (mpirun's processes inside a Slurm job
// inherit its batch step's SLURM_LOCALID=0) -- and Slurm's compressed counts a node.
#include <doctest/doctest.h>

#include <optional>
#include <tessera/comm/launcher.hpp>

#include "launcher_env.hpp"  // tests/support

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
