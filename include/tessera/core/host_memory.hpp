// tessera/core/host_memory.hpp: how much memory this host can still give, read from Linux.
//
//   const std::int64_t avail = tessera::host_available_memory();  // bytes; 0: unknown
//
// MemAvailable of /proc/meminfo (the kernel's estimate of what can be allocated without
// swapping: free memory plus the reclaimable page cache), or the memory limit of this
// process's cgroup when that is smaller: a container's, or a Slurm job's `--mem`, where
// /proc/meminfo shows the whole machine. cgroup v2's memory.max or v1's
// memory.limit_in_bytes of the group /proc/self/cgroup names, under /sys/fs/cgroup (or at
// the controller's root, where a container mounts its own group); "max" or v1's huge
// number: no limit. The limit, not what is left of it: the group's usage counts page cache
// the kernel would reclaim, so the figure errs towards allowing a run, never towards
// refusing one that fits. A parent group's smaller limit is not read. 0 when nothing can be
// read (not Linux): callers then skip their checks.
//
//   const std::int64_t budget = tessera::host_memory_budget();  // what the checks compare with
//
// is TESSERA_HOST_MEMORY when set -- a size such as 64GiB, 512MiB, 1.5TiB or a count of bytes;
// 0 turns the checks off -- and host_available_memory() otherwise: a job that shares its node
// with others, or knows better than /proc/meminfo, states what it may use. tessera-plan --run
// and the training memory check (train/memory_check.hpp, basic_trainer) refuse runs that need
// more than the budget.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include <tessera/core/error.hpp>

namespace tessera {

namespace detail {
/// A cgroup memory limit file's bytes; 0 for "max", a number of 2^60 or more (v1's "no
/// limit"), or a file that cannot be read.
inline std::int64_t cgroup_limit_of(const std::string& file) {
  std::ifstream f(file);
  std::string v;
  if (!(f >> v) || v == "max") return 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || n <= 0 || n >= (1LL << 60)) return 0;
  return n;
}
}  // namespace detail

/// The memory limit in bytes of this process's cgroup (v2 memory.max, v1
/// memory.limit_in_bytes); 0 when there is none or it cannot be read. `proc` and
/// `cgroup_root` are the mount points (other ones for tests).
inline std::int64_t cgroup_memory_limit(const std::string& proc = "/proc",
                                        const std::string& cgroup_root = "/sys/fs/cgroup") {
  std::ifstream f(proc + "/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    // "0::/path" (v2), "4:memory:/path" or "5:cpu,memory:/path" (v1)
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    // appended, not `"," + ... + ","`: g++ 12 at -O3 reports a false -Wrestrict on that
    // (GCC bug 105651), an error under the project's -Werror
    std::string controllers(1, ',');
    controllers.append(line, a + 1, b - a - 1).push_back(',');
    std::string path = line.substr(b + 1);
    if (path == "/") path.clear();
    std::string dir, file;
    if (line.compare(0, a, "0") == 0 && controllers == ",,") {
      dir = cgroup_root, file = "/memory.max";
    } else if (controllers.find(",memory,") != std::string::npos) {
      dir = cgroup_root + "/memory", file = "/memory.limit_in_bytes";
    } else {
      continue;
    }
    if (const std::int64_t n = detail::cgroup_limit_of(dir + path + file); n > 0) return n;
    if (const std::int64_t n = detail::cgroup_limit_of(dir + file); !path.empty() && n > 0) return n;
  }
  return 0;
}

/// Bytes this host can still allocate: MemAvailable of /proc/meminfo, or this process's
/// cgroup memory limit when smaller; 0 when unknown.
inline std::int64_t host_available_memory(const std::string& proc = "/proc",
                                          const std::string& cgroup_root = "/sys/fs/cgroup") {
  std::int64_t avail = 0;
  {
    std::ifstream f(proc + "/meminfo");
    std::string key, unit;
    std::int64_t kb = 0;
    while (f >> key >> kb >> unit)
      if (key == "MemAvailable:") {
        avail = kb * 1024;
        break;
      }
  }
  const std::int64_t limit = cgroup_memory_limit(proc, cgroup_root);
  return limit > 0 && (avail == 0 || limit < avail) ? limit : avail;
}

/// Bytes of a size written as a number and an optional binary unit (B, K or KiB, M or MiB, G
/// or GiB, T or TiB: 1.5GiB, 512M, 4096); throws tessera::error naming `what` otherwise.
inline std::int64_t parse_byte_size(std::string_view text, std::string_view what) {
  const auto bad = [&] {
    return error(std::string(what) + "=" + std::string(text) +
                 ": not a size; write a number of bytes or one with a binary unit (512MiB, 64GiB, 1.5TiB; K, M, G, T "
                 "for KiB, MiB, GiB, TiB)");
  };
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || v < 0) throw bad();
  std::string_view unit(end);
  int shift = -1;
  constexpr std::string_view units[][2] = {{"B", ""}, {"KiB", "K"}, {"MiB", "M"}, {"GiB", "G"}, {"TiB", "T"}};
  for (int i = 0; i < 5; ++i)
    if (unit == units[i][0] || unit == units[i][1] || (i == 0 && unit.empty())) shift = 10 * i;
  if (shift < 0) throw bad();
  const double bytes = std::ldexp(v, shift);
  if (bytes >= 0x1p62 || (shift == 0 && bytes != std::floor(bytes))) throw bad();
  return static_cast<std::int64_t>(bytes);
}

/// Whether TESSERA_HOST_MEMORY sets the budget: then it is all the job's ranks on this host
/// may use, memory they hold already included (host_available_memory() is what is free now).
inline bool host_memory_budget_given() {
  const char* v = std::getenv("TESSERA_HOST_MEMORY");
  return v != nullptr && *v != '\0';
}

/// The bytes tessera's memory checks take as this host's: TESSERA_HOST_MEMORY when set (a
/// size, parse_byte_size; 0 turns the checks off), else host_available_memory(). Throws
/// tessera::error when the variable is not a size.
inline std::int64_t host_memory_budget() {
  if (host_memory_budget_given()) return parse_byte_size(std::getenv("TESSERA_HOST_MEMORY"), "TESSERA_HOST_MEMORY");
  return host_available_memory();
}

}  // namespace tessera
