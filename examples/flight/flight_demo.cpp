// flight-demo: a 4-rank job (threads backend) in which rank 2 skips the last all_reduce.
// The others time out, every rank dumps its flight recorder into <dir>, and
//   tessera-flight <dir>
// names the culprit. Usage: flight-demo <dir>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <span>
#include <tessera/comm/flight_recorder.hpp>
#include <tessera/comm/threads.hpp>
#include <vector>

int main(int argc, char** argv) {
  namespace comm = tessera::comm;
  if (argc != 2) {
    std::fprintf(stderr, "usage: flight-demo <dump directory>\n");
    return 2;
  }
  std::filesystem::create_directories(argv[1]);
  try {
    comm::run_threads(4, [&](comm::threads_communicator& c) {
      comm::flight_recorder rec(c, {.dump_dir = argv[1]});
      std::vector<float> grads(1 << 16, 1.0f);
      try {
        for (int step = 0; step < 3; ++step)
          if (step < 2 || c.rank() != 2) comm::all_reduce(rec, std::span(grads)).wait();
      } catch (...) {
        rec.dump();
        throw;
      }
      rec.dump();
    }, comm::options{std::chrono::milliseconds(500)});
  } catch (const comm::error& e) {
    std::printf("the job failed as injected: %s\n", e.what());
    return 0;
  }
  std::fprintf(stderr, "flight-demo: the injected fault did not make the job fail\n");
  return 1;
}
