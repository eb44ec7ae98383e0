// tests/support/launcher_env.hpp: the launchers' variables (comm/launcher.hpp) cleared for a
// scope, so that a test sets just the ones it names whatever launched it; the values they had
// are put back at the scope's end.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::testing {

struct launcher_env {
  static constexpr const char* names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                          "LOCAL_RANK",                 "LOCAL_WORLD_SIZE",
                                          "MPI_LOCALRANKID",            "MPI_LOCALNRANKS",
                                          "SLURM_LOCALID",              "SLURM_NODEID",
                                          "SLURM_STEP_TASKS_PER_NODE",  "SLURM_NTASKS_PER_NODE"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved;

  launcher_env() {
    for (const char* n : names) {
      const char* v = std::getenv(n);
      saved.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(n);
    }
  }
  launcher_env(const launcher_env&) = delete;
  launcher_env& operator=(const launcher_env&) = delete;
  ~launcher_env() {
    for (const auto& [n, v] : saved)
      if (v)
        ::setenv(n, v->c_str(), 1);
      else
        ::unsetenv(n);
  }
  launcher_env& set(const char* name, const char* value) {
    ::setenv(name, value, 1);
    return *this;
  }
};

}  // namespace tessera::testing
