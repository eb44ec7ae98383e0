// tessera/bench/transition_cuda.hpp: a layout transition on GPUs as a Google Benchmark.
// tessera-requires: benchmark nccl
//
//   using M  = tessera::mesh<tessera::axis<"tp", 4>>;
//   using S0 = tessera::layout_t<M, 2, tessera::shard<0>>;
//   using R  = tessera::layout_t<M, 2, tessera::replicate>;
//   int main(int argc, char** argv) {
//     tessera::bench::transition_cuda<S0, R, tessera::bf16>("all_gather", {8192, 4096});
//     return tessera::bench::main(argc, argv);
//   }
//
// transition() (bench/transition.hpp) on device memory: dist_tensor<T, From, cuda_space> and
// its redistribute over NCCL, the same plan, timing (the slowest rank's time per call; a
// device call returns once the device has finished it), counters and check of the result.
// Ranks: threads of this process, rank r on GPU r over an NCCL communicator bootstrapped
// through the threads backend ("<name>/nccl:<ranks>"); where the mesh has more ranks than
// the visible GPUs, rank r on GPU r modulo them over comm::cuda_staged
// ("<name>/cuda-staged:<ranks>": every collective through host memory -- the plan runs, but
// its times are the host's copies, not NCCL's); under mpirun (bench::main, tessera::mpi),
// mpirun's processes over NCCL bootstrapped through MPI, each on its node-local rank's GPU
// ("<name>/mpi-nccl:<ranks>"). The NCCL calls' agreement check (nccl_options::check_calls)
// is off, as bench::main turns MPI's off: a timed call is the collective alone.
#pragma once

#include <string>

#include <tessera/bench/transition.hpp>
#include <tessera/comm/cuda_staged.hpp>
#include <tessera/comm/launcher.hpp>
#include <tessera/comm/nccl.hpp>
#include <tessera/tensor/cuda_memory.hpp>

namespace tessera::bench {

namespace detail {

/// Where transition_cuda()'s ranks run: device memory, one GPU a rank over NCCL.
struct cuda_ranks {
  using space = cuda_space;
  static comm::nccl_options timed() {
    comm::nccl_options n;
    n.check_calls = false;
    return n;
  }
  /// Whether `ranks` thread ranks get a GPU each (else they share them over cuda_staged).
  static bool own_gpus(int ranks) { return ranks <= cuda_device_count(); }
  static std::string label(int ranks) {
    return under_mpirun() ? "mpi-nccl" : own_gpus(ranks) ? "nccl" : "cuda-staged";
  }
  static comm::any_communicator on_thread(comm::threads_communicator& c, int ranks) {
    if (own_gpus(ranks)) return comm::any_communicator(comm::nccl_communicator::bootstrap(c, c.rank(), timed()));
    return comm::any_communicator(comm::cuda_staged<comm::threads_communicator>(c));
  }
  static comm::any_communicator on_mpi(comm::any_communicator& w) {
    return comm::any_communicator(comm::nccl_communicator::bootstrap(w, comm::node_local_rank(w.rank()), timed()));
  }
};

}  // namespace detail

/// Registers the benchmark "<name>/<backend>:<ranks>" of the transition From -> To on a
/// tensor of shape `global` with elements of type T in device memory (backend: nccl,
/// cuda-staged or mpi-nccl, above). Returns Google Benchmark's handle.
template <class From, class To, class T = float>
benchmark::internal::Benchmark* transition_cuda(const std::string& name, const shape_t& global,
                                                const transition_options& o = {}) {
  return detail::register_transition<From, To, T, detail::cuda_ranks>(name, global, o);
}

}  // namespace tessera::bench
