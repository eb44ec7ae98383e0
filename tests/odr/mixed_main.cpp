// odr.mixed_link: one program of a g++ unit (this file) and an nvcc unit (mixed_unit.cu) that
// both instantiate trace::recorder::write, linked with the nvcc unit first, so that the linker
// keeps nvcc's copies of the inline code they share. Before every header lambda named `this`
// (docs/cuda.md, "nvcc and g++ units in one program"), write's closure had one layout in each
// unit, and this program hung (a lock taken through the misread `this`); train_llama
// --profiling.trace_file died of SIGBUS the same way.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <tessera/core/trace.hpp>

namespace odr_mixed {
void write_from_nvcc_unit(const tessera::trace::recorder& r, const std::filesystem::path& p,
                          const std::vector<std::string>& more);
}

namespace {
std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

int main() {
  tessera::trace::recorder r;
  r.name_track(0, -1, "rank 0");
  r.name_track(0, 1, "compute");
  r.add({"forward", "block", 0, 1, 10, 5, {{"block", 3}}, {{"note", "a \"quoted\" name"}}});
  r.add({"step", "step", 0, 1, 8, 20, {}, {}});
  const std::vector<std::string> more{R"({"ph": "X", "name": "other", "cat": "rank", "pid": 1, "tid": 0, "ts": 0, "dur": 1})"};
  const auto dir = std::filesystem::temp_directory_path() / ("tessera_odr_mixed_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string want = r.json(more);
  r.write(dir / "from_gxx.json", more);  // the g++ unit builds write's closure
  odr_mixed::write_from_nvcc_unit(r, dir / "from_nvcc.json", more);
  const std::string a = read(dir / "from_gxx.json"), b = read(dir / "from_nvcc.json");
  std::filesystem::remove_all(dir);
  if (a != want || b != want) {
    std::printf("FAILED: the trace written from the %s unit differs from recorder::json()\n",
                a != want ? "g++" : "nvcc");
    return 1;
  }
  std::printf("the trace written from both units equals recorder::json() (%zu bytes)\n", want.size());
  return 0;
}
