// tessera/comm/launcher.hpp: what the launcher that started this process says of its place
// on its node -- its rank among the node's processes (the GPU it drives) and how many
// processes the node runs (how they share its memory) -- and which of a job's processes
// drive one device (device_sharing_over: what the launcher cannot say); and how many
// processes a launcher started (mpi_launched, torchrun_launched).
//
//   mpirun (Open MPI)   OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
//   torchrun            LOCAL_RANK (and LOCAL_WORLD_SIZE)
//   MPICH's Hydra       MPI_LOCALRANKID, MPI_LOCALNRANKS
//   srun (Slurm)        SLURM_LOCALID; SLURM_STEP_TASKS_PER_NODE with SLURM_NODEID, or
//                       SLURM_NTASKS_PER_NODE where --ntasks-per-node was given
//
// Slurm's variables come last. `srun` sets them for each task it starts, and Open MPI sets none
// of its own under `srun` (direct launch: its processes learn their place through PMIx, not the
// environment). But `mpirun` inside a Slurm job starts its processes from daemons of one Slurm
// task a node, so they inherit SLURM_LOCALID=0 and one task a node from that step: read first,
// every process of a node would drive GPU 0 (hoomd-blue met this, glotzerlab/hoomd-blue#1647).
// The launcher's own variables, where it set them, win.
//
// How many processes drive one GPU is not the node's processes over its GPUs: under `srun
// --gpus-per-task=1`, or a wrapper that sets CUDA_VISIBLE_DEVICES to the local rank, every
// process sees one GPU, device 0, and each a different one. The device's identity (a CUDA
// GPU's UUID) says it; device_sharing_over gathers every process's and counts.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <tessera/comm/communicator.hpp>

namespace tessera::comm {

namespace detail {
/// The decimal number at s[i...], `i` moved past it; nothing where no digit is there (or it
/// is over 2^40).
inline std::optional<std::int64_t> count_at(std::string_view s, std::size_t& i) {
  const std::size_t from = i;
  std::int64_t v = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (v > (std::int64_t{1} << 40)) return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  if (i == from) return std::nullopt;
  return v;
}
/// A variable's value as a non-negative integer (all of it digits), else nothing.
inline std::optional<std::int64_t> env_count(const char* name) {
  const char* e = std::getenv(name);
  if (!e) return std::nullopt;
  const std::string_view s(e);
  std::size_t i = 0;
  const auto n = count_at(s, i);
  return i == s.size() ? n : std::nullopt;
}
}  // namespace detail

/// The count of node `node` in Slurm's compressed list of counts a node ("2(x3),1": nodes 0-2
/// run 2, node 3 runs 1; SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE), else nothing (no
/// such node, or not that form).
inline std::optional<std::int64_t> slurm_count_of_node(std::string_view list, std::int64_t node) {
  if (node < 0) return std::nullopt;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    std::size_t i = 0;
    const auto count = detail::count_at(item, i);
    if (!count) return std::nullopt;
    std::int64_t times = 1;
    if (i < item.size()) {  // "(xK)": K nodes
      if (!item.substr(i).starts_with("(x")) return std::nullopt;
      i += 2;
      const auto k = detail::count_at(item, i);
      if (!k || *k == 0 || item.substr(i) != ")") return std::nullopt;
      times = *k;
    }
    if (node < times) return count;
    node -= times;
  }
  return std::nullopt;
}

/// The processes a launcher started this one among, and its rank, as it says them; {1, 0}
/// when none did.
struct launched {
  std::int64_t size = 1, rank = 0;
  const char* variable = nullptr;  ///< the variable that gave `size`
};

/// An MPI launcher's: Open MPI's OMPI_COMM_WORLD_SIZE / _RANK, PMI_SIZE / PMI_RANK (MPICH's
/// Hydra, Intel MPI, Slurm's PMI-2), or Slurm's SLURM_STEP_NUM_TASKS / SLURM_PROCID (srun sets
/// them for a step's tasks, whichever PMI the MPI library takes; a batch script itself is no
/// step's task).
inline launched mpi_launched() {
  for (const auto& [size_var, rank_var] : {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                           std::pair{"PMI_SIZE", "PMI_RANK"},
                                           std::pair{"SLURM_STEP_NUM_TASKS", "SLURM_PROCID"}})
    if (const auto n = detail::env_count(size_var); n && *n > 0)
      return {*n, detail::env_count(rank_var).value_or(0), size_var};
  return {};
}

/// torchrun's (torch.distributed.run): WORLD_SIZE and RANK, where GROUP_RANK, LOCAL_RANK and
/// LOCAL_WORLD_SIZE say it is torchrun's (as PyTorch Lightning tells torchelastic's
/// environment).
inline launched torchrun_launched() {
  for (const char* v : {"RANK", "GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"})
    if (const char* e = std::getenv(v); !e || !*e) return {};
  if (const auto n = detail::env_count("WORLD_SIZE"); n && *n > 0)
    return {*n, detail::env_count("RANK").value_or(0), "WORLD_SIZE"};
  return {};
}

/// This process's rank among its node's, as the launcher says it (the table above, in that
/// order), else `fallback` (the world rank: one process a node). The GPU a process drives
/// under mpirun, torchrun or srun.
inline int node_local_rank(int fallback) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const auto r = detail::env_count(v)) return static_cast<int>(*r);
  return fallback;
}

/// How many processes of the job run on this node, as the launcher says it (the table above,
/// in that order), else `fallback`. A count of 0 is no count.
inline std::int64_t node_local_size(std::int64_t fallback) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS"})
    if (const auto n = detail::env_count(v); n && *n > 0) return *n;
  if (const char* list = std::getenv("SLURM_STEP_TASKS_PER_NODE"))
    if (const auto node = detail::env_count("SLURM_NODEID"))
      if (const auto n = slurm_count_of_node(list, *node); n && *n > 0) return *n;
  if (const auto n = detail::env_count("SLURM_NTASKS_PER_NODE"); n && *n > 0) return *n;
  return fallback;
}

/// A device's identity as its driver gives it (a CUDA GPU's 16-byte UUID, cudaDeviceProp::uuid):
/// the same in every process that drives the device, through whichever CUDA_VISIBLE_DEVICES
/// each sees it; all zero when unknown.
using device_uuid = std::array<std::uint8_t, 16>;

/// How a job's processes share their devices, as one process sees it.
struct device_sharing {
  int on_mine = 1;    ///< the processes on this process's device, itself included
  int most = 1;       ///< the most processes on one device of the job
  bool known = true;  ///< every process knew its device's identity (else the counts are 1)
};

/// Process `me`'s sharing, from every process's device identity (`all`, by rank).
inline device_sharing sharing_of(std::span<const device_uuid> all, std::size_t me) {
  device_sharing s;
  s.known = std::none_of(all.begin(), all.end(), [](const device_uuid& u) { return u == device_uuid{}; });
  if (!s.known || me >= all.size()) return {1, 1, false};
  for (const device_uuid& u : all) {
    const auto n = static_cast<int>(std::count(all.begin(), all.end(), u));
    s.most = std::max(s.most, n);
    if (u == all[me]) s.on_mine = n;
  }
  return s;
}

/// The same over `world`: an all_gather of each process's 16 bytes (collective; every process
/// of `world` calls it, a process that does not know its device with a zero identity).
template <communicator C>
device_sharing device_sharing_over(C& world, const device_uuid& mine) {
  std::vector<device_uuid> all(static_cast<std::size_t>(world.size()));
  world.all_gather(mine.data(), all.data(), mine.size(), dtype::u8).wait();
  return sharing_of(all, static_cast<std::size_t>(world.rank()));
}

}  // namespace tessera::comm
