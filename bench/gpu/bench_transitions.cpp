// bench_gpu_transitions: bench_comm_redistribute's layout transitions on GPUs -- dist_tensor
// in device memory, the same compile-time plans over NCCL (tessera::bench::transition_cuda:
// the slowest rank's time per call, bus_GBps, modelled_us, the result checked once).
//   ./bench_gpu_transitions                       # 4 ranks as threads, GPU r each (8-rank ones too)
//   TESSERA_BENCH_FULL=1 ./bench_gpu_transitions  # 4 KiB .. 256 MiB
//   mpirun -np 4 ./bench_gpu_transitions          # mpirun's processes, each on its node-local GPU
// Where the machine has fewer GPUs than a mesh has ranks, that mesh's ranks share them over
// comm::cuda_staged ("/cuda-staged:<ranks>": the plans run and are checked, the times are the
// host's copies, not NCCL's). Exit 77 (skipped) without a GPU; 1 when a transition failed.
// Plain C++ (the CUDA runtime's and NCCL's host APIs): no nvcc needed.
#include <cstdio>
#include <string>

#include <tessera/bench/transition_cuda.hpp>
#include <tessera/tensor/cuda_memory.hpp>

#include "../comm/transition_table.hpp"

int main(int argc, char** argv) {
  const int gpus = tessera::cuda_device_count();
  if (gpus == 0) {
    std::printf("skipped: no CUDA device visible; bench_gpu_transitions times layout transitions in device memory\n");
    return 77;
  }
  const bool mpi = tessera::bench::detail::under_mpirun();
  if (!mpi)
    std::printf("%d GPU(s) visible: a mesh of up to %d ranks over NCCL (one GPU a rank), larger ones over "
                "comm::cuda_staged\n",
                gpus, gpus);
  ::bench::table::register_all(
      []<class From, class To>(const std::string& name, const tessera::shape_t& g,
                               const tessera::bench::transition_options& o) {
        tessera::bench::transition_cuda<From, To>(name, g, o);
      },
      !mpi);
  return tessera::bench::main(argc, argv);
}
