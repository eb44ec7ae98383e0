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
// read (not Linux): callers then skip their checks. tessera-plan --run and the training
// memory check (train/memory_check.hpp) refuse runs that need more than this.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

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
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
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

}  // namespace tessera
