// Resume under mpirun (issue 16), in two processes' lifetimes: `save FOLDER` trains debug_2d
// 20 steps straight (writing the curve to FOLDER/straight.txt) and 10 steps with a
// checkpoint (async) at step 10; `resume FOLDER`, a new mpirun, resumes from it for 10 more
// steps and checks that they equal the straight run's last 10 bit for bit.
// Faults: `fault FOLDER` trains with async checkpoints every 5 steps, and rank 1 kills
// itself (SIGKILL) in its background writer at step 10: the job must end (mpirun stops the
// other ranks), step 5 stays complete and step 10 is never committed
// (tests/checkpoint/sigkill.cmake checks this); `fault_resume FOLDER` then resumes from step 5
// and must reach the straight run's losses bit for bit (FOLDER/straight.txt, which
// sigkill.cmake copies from the `save` phase's folder: the curve is the same, and computing it
// again cost 20 of the fault test's 45 steps).
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <tessera/comm/mpi.hpp>
#include <tessera/train/checkpoint.hpp>

#include "../parallel/training_check.hpp"

using namespace tessera;
namespace tc = training_check;
using R = recipes::debug_2d;

std::vector<double> run(comm::mpi_communicator& world, const std::vector<std::int32_t>& toks, std::int64_t from,
                        std::int64_t to, const std::string& folder, std::int64_t save_at, bool kill_rank1 = false) {
  device_mesh<R::mesh> dm(R::mesh(world.size()), world);
  train::parallel_llama<R> pm(dm);
  pm.init_weights(from == 0 ? 9 : 77);
  train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
  train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, tc::steps, 1, tc::options(), 0);
  train::checkpoint_options o{.folder = folder, .interval = kill_rank1 ? 5 : 0, .mode = train::async_mode::async};
  if (kill_rank1)
    o.before_write = [](std::int64_t step, int rank) {
      if (step == 10 && rank == 1) std::raise(SIGKILL);  // dies in the middle of an asynchronous save
    };
  train::checkpointer<train::parallel_llama<R>> ck(pm, tr, loader, o);
  if (from > 0 && ck.resume() != std::optional<std::int64_t>(from))
    throw error("no checkpoint of step " + std::to_string(from) + " to resume");
  std::vector<double> losses;
  for (std::int64_t s = from; s < to; ++s) {
    losses.push_back(tr.train_step().loss);
    if (s + 1 == save_at || ck.due(s + 1)) ck.save(s + 1);
  }
  ck.finish();
  return losses;
}

int main(int argc, char** argv) {
  comm::mpi_environment env(argc, argv);
  comm::mpi_communicator world;
  const std::string phase = argc == 3 ? argv[1] : "";
  if (phase != "save" && phase != "resume" && phase != "fault" && phase != "fault_resume") {
    std::fprintf(stderr, "usage: test_checkpoint_mpi save|resume|fault|fault_resume FOLDER\n");
    return 2;
  }
  const std::string folder = argv[2];
  const auto toks = tc::tokens();
  bool ok = true;
  auto write_straight = [&](const std::vector<double>& straight) {
    if (world.rank() != 0) return;
    std::filesystem::create_directories(folder);
    std::ofstream out(folder + "/straight.txt");
    out.precision(17);
    for (double l : straight) out << l << "\n";
  };
  if (phase == "save") {
    const auto straight = run(world, toks, 0, 20, "", 0);
    write_straight(straight);
    world.barrier().wait();
    const auto first = run(world, toks, 0, 10, folder, 10);
    for (std::size_t i = 0; i < first.size(); ++i) ok = ok && first[i] == straight[i];
  } else if (phase == "fault") {
    run(world, toks, 0, 20, folder, 0, true);
    if (world.rank() == 0) std::printf("rank 1 was to die at step 10, yet the run finished\n");
    ok = false;
  } else {
    const std::int64_t from = phase == "resume" ? 10 : 5;
    std::vector<double> straight;
    std::ifstream in(folder + "/straight.txt");
    for (double l; in >> l;) straight.push_back(l);
    const auto second = run(world, toks, from, 20, folder, 0);
    const auto n = static_cast<std::size_t>(20 - from);
    ok = straight.size() == 20 && second.size() == n;
    for (std::size_t i = 0; ok && i < n; ++i) ok = second[i] == straight[static_cast<std::size_t>(from) + i];
    if (world.rank() == 0 && second.size() == n)
      std::printf("resumed at step %lld on %d MPI ranks: step 20 loss %.9f, uninterrupted %.9f\n",
                  static_cast<long long>(from), world.size(), second.back(),
                  straight.size() == 20 ? straight.back() : 0.0);
  }
  if (world.rank() == 0) std::printf(ok ? "PASSED\n" : "FAILED\n");
  return ok ? 0 : 1;
}
