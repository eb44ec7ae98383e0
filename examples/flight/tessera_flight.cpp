// tessera-flight: reads the flight-recorder dumps of all ranks (files, or directories
// holding flight_rank*.json) and prints the first mismatch between ranks.
//   tessera-flight /tmp/run42            # or: tessera-flight flight_rank0.json flight_rank1.json
// Exit status: 0 no mismatch, 1 mismatch found, 2 bad input.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <tessera/comm/flight_analyzer.hpp>
#include <vector>

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fprintf(argc < 2 ? stderr : stdout,
                 "usage: tessera-flight <dump.json | directory>...\n"
                 "Reads tessera flight-recorder dumps (one per rank) and names the first mismatch:\n"
                 "a rank that did not join a collective, ranks that disagree on op/size/order,\n"
                 "a send without a matching recv.\n");
    return argc < 2 ? 2 : 0;
  }
  try {
    std::vector<std::string> files;
    for (int i = 1; i < argc; ++i) {
      const fs::path p(argv[i]);
      if (fs::is_directory(p)) {
        for (const auto& f : fs::directory_iterator(p)) {
          const auto name = f.path().filename().string();
          if (name.rfind("flight_rank", 0) == 0 && f.path().extension() == ".json")
            files.push_back(f.path().string());
        }
      } else if (fs::exists(p)) {
        files.push_back(p.string());
      } else {
        std::fprintf(stderr, "tessera-flight: %s does not exist; give dump files or the directory holding them\n",
                     argv[i]);
        return 2;
      }
    }
    if (files.empty()) {
      std::fprintf(stderr, "tessera-flight: no flight_rank*.json found in the given directories\n");
      return 2;
    }
    std::vector<tessera::comm::flight_dump> dumps;
    for (const auto& f : files) dumps.push_back(tessera::comm::load_flight_dump(f));
    const auto rep = tessera::comm::analyze_flight(dumps);
    std::printf("read %zu dump(s)\n", dumps.size());
    for (const auto& n : rep.notes) std::printf("note: %s\n", n.c_str());
    if (rep.ok()) {
      std::printf("no mismatch between ranks\n");
      return 0;
    }
    std::printf("FIRST MISMATCH: %s\n", rep.problems.front().c_str());
    for (std::size_t i = 1; i < rep.problems.size(); ++i)
      std::printf("also: %s\n", rep.problems[i].c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-flight: %s\n", e.what());
    return 2;
  }
}
