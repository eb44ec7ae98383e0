// tessera/core/host_memory.hpp: how much memory this host can still give, read from Linux.
//
//   const std::int64_t avail = tessera::host_available_memory();  // bytes; 0: unknown
//
// MemAvailable of /proc/meminfo: the kernel's estimate of what can be allocated without
// swapping (free memory plus the reclaimable page cache). 0 when it cannot be read (not
// Linux, or a kernel before 3.14): callers then skip their checks. A cgroup limit (a
// container, a Slurm job) is not read: /proc/meminfo shows the whole machine there.
// tessera-plan --run and the training memory check (train/memory_check.hpp) refuse runs
// that need more than this.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace tessera {

/// Bytes this host can still allocate (MemAvailable of /proc/meminfo); 0 when unknown.
inline std::int64_t host_available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  std::int64_t kb = 0;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

}  // namespace tessera
