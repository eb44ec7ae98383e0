// Resume under mpirun (issue 16), in two processes' lifetimes: `save FOLDER` trains debug_2d
// 20 steps straight (writing the curve to FOLDER/straight.txt) and 10 steps with a
// checkpoint (async) at step 10; `resume FOLDER`, a new mpirun, resumes from it for 10 more
// steps and checks that they equal the straight run's last 10 bit for bit.
#include <cstdio>
#include <cstring>
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
                        std::int64_t to, const std::string& folder, std::int64_t save_at) {
  device_mesh<R::mesh> dm(R::mesh(world.size()), world);
  train::parallel_llama<R> pm(dm);
  pm.init_weights(from == 0 ? 9 : 77);
  train::batch_loader loader(toks, tc::batch, tc::seq_len, 3);
  train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, tc::steps, 1, tc::options(), 0);
  train::checkpointer<train::parallel_llama<R>> ck(pm, tr, loader, {.folder = folder, .mode = train::async_mode::async});
  if (from > 0 && ck.resume() != std::optional<std::int64_t>(from)) throw error("no checkpoint of step 10 to resume");
  std::vector<double> losses;
  for (std::int64_t s = from; s < to; ++s) {
    losses.push_back(tr.train_step().loss);
    if (s + 1 == save_at) ck.save(s + 1);
  }
  ck.finish();
  return losses;
}

int main(int argc, char** argv) {
  comm::mpi_environment env(argc, argv);
  comm::mpi_communicator world;
  if (argc != 3 || (std::strcmp(argv[1], "save") != 0 && std::strcmp(argv[1], "resume") != 0)) {
    std::fprintf(stderr, "usage: test_checkpoint_mpi save|resume FOLDER\n");
    return 2;
  }
  const std::string folder = argv[2];
  const auto toks = tc::tokens();
  bool ok = true;
  if (std::strcmp(argv[1], "save") == 0) {
    const auto straight = run(world, toks, 0, 20, "", 0);
    const auto first = run(world, toks, 0, 10, folder, 10);
    for (std::size_t i = 0; i < first.size(); ++i) ok = ok && first[i] == straight[i];
    if (world.rank() == 0) {
      std::ofstream out(folder + "/straight.txt");
      out.precision(17);
      for (double l : straight) out << l << "\n";
    }
  } else {
    std::vector<double> straight;
    std::ifstream in(folder + "/straight.txt");
    for (double l; in >> l;) straight.push_back(l);
    const auto second = run(world, toks, 10, 20, folder, 0);
    ok = straight.size() == 20 && second.size() == 10;
    for (std::size_t i = 0; ok && i < 10; ++i) ok = second[i] == straight[10 + i];
    if (world.rank() == 0 && second.size() == 10)
      std::printf("resumed at step 10 on %d MPI ranks: step 20 loss %.9f, uninterrupted %.9f\n", world.size(),
                  second.back(), straight.size() == 20 ? straight.back() : 0.0);
  }
  if (world.rank() == 0) std::printf(ok ? "PASSED\n" : "FAILED\n");
  return ok ? 0 : 1;
}
