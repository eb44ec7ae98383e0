// The nvcc half of odr.mixed_link (mixed_main.cpp): its copies of trace::recorder::write and
// of write_file_atomically<closure> are the ones the linker keeps.
#include <filesystem>
#include <string>
#include <vector>

#include <tessera/core/trace.hpp>

namespace odr_mixed {
void write_from_nvcc_unit(const tessera::trace::recorder& r, const std::filesystem::path& p,
                          const std::vector<std::string>& more) {
  r.write(p, more);
}
}  // namespace odr_mixed
