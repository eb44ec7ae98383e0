// A temporary folder per test, named by the test and the process, removed at the end (its
// permissions restored first: some tests make it unwritable).
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include <unistd.h>

namespace checkpoint_test {
struct scratch {
  std::filesystem::path dir;
  explicit scratch(const std::string& name)
      : dir(std::filesystem::temp_directory_path() / ("tessera_ckpt_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir);
  }
  ~scratch() {
    std::error_code ec;
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(dir, ec);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
};
}  // namespace checkpoint_test
