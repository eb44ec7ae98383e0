// The executor on the mpi backend, under mpirun: a few schedules over all the processes
// give, on every rank, the gradients of the stages in sequence (computed on each rank).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <string>
#include <tessera/comm/mpi.hpp>
#include <tessera/pipeline/executor.hpp>
#include <tessera/pipeline/generators.hpp>
#include <tessera/pipeline/lower.hpp>
#include <vector>

#include "toy_mlp.hpp"

using namespace tessera::pipeline;

TEST_CASE("executor: schedules under mpirun give the sequential gradients") {
  tessera::comm::mpi_communicator cm;
  const int p = cm.size();
  for (schedule_kind k : {schedule_kind::one_f_one_b, schedule_kind::interleaved_1f1b,
                          schedule_kind::interleaved_zero_bubble, schedule_kind::zbv_zero_bubble}) {
    const int v = k == schedule_kind::one_f_one_b ? 1 : 2;
    const schedule s = generate(k, p, v, p + 1);
    toy::config c;
    c.stages = s.stages;
    c.microbatches = s.microbatches;
    std::vector<float> want_out;
    const toy::mlp want = toy::sequential(c, &want_out);
    const executor ex(lower(s), std::vector<std::size_t>(static_cast<std::size_t>(c.stages) + 1, c.per_mb()));
    toy::mlp mine(c);
    std::vector<float> out(c.batch(), 0.0f);
    const run_stats st = ex.run(cm, mine, toy::batch_input(c), out);
    INFO(schedule_name(k), " rank ", cm.rank(), " of ", p);
    for (int stage = 0; stage < c.stages; ++stage) {
      if (s.rank_of(stage) != cm.rank()) continue;
      std::string why;
      CHECK_MESSAGE(toy::same_grads(mine, want, stage, &why), why);
    }
    if (s.rank_of(c.stages - 1) == cm.rank()) CHECK(out == want_out);
    CHECK(st.forwards == v * c.microbatches);
    CHECK(st.sends > 0);
  }
}

int main(int argc, char** argv) {
  tessera::comm::mpi_environment env(argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  doctest::Context ctx(argc, argv);
  if (rank != 0) ctx.setOption("minimal", true);
  int res = ctx.run();
  MPI_Allreduce(MPI_IN_PLACE, &res, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return res;
}
