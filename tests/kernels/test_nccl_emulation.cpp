// The emulated NCCL's refusals (tests/support/nccl_emulation.hpp): what NCCL refuses -- host
// buffers, a buffer of another device than the communicator's, ranks whose calls disagree --
// it refuses too, so that the GPU tests compiled against it (ctest gpu_emulated.*,
// comm_emulated.nccl) cannot pass on calls a GPU would reject. Part of test_cuda_emulation.
#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include <tessera/comm/nccl.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/core/error.hpp>

TEST_CASE("emulated NCCL: refuses host buffers, another device's, and ranks that disagree on a call") {
  std::vector<std::string> seen(2);
  std::vector<int> mismatch(2, -1), wrong_device(2, -1);
  tessera::comm::run_threads(2, [&](tessera::comm::threads_communicator& boot) {
    auto c = tessera::comm::nccl_communicator::bootstrap(boot);
    const auto r = static_cast<std::size_t>(c.rank());
    std::vector<float> host(4, 1.0f);
    try {
      c.all_reduce(host.data(), host.data(), 4, tessera::comm::dtype::f32, tessera::comm::reduce_op::sum).wait();
    } catch (const tessera::error& e) {
      seen[r] = e.what();
    }
    // the ranks' own calls disagree on the count (tessera's call check would name it first)
    float* d = nullptr;
    REQUIRE(cudaMalloc(&d, 64 * sizeof(float)) == cudaSuccess);
    mismatch[r] = ncclAllReduce(d, d, c.rank() == 0 ? 4 : 8, ncclFloat32, ncclSum, c.native(), c.stream());
    // a buffer of another device than the communicator's (rank r is on device r)
    REQUIRE(cudaSetDevice(c.rank() == 0 ? 1 : 0) == cudaSuccess);
    float* other = nullptr;
    REQUIRE(cudaMalloc(&other, 64 * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaSetDevice(c.rank()) == cudaSuccess);
    wrong_device[r] = ncclAllReduce(other, other, 4, ncclFloat32, ncclSum, c.native(), c.stream());
    REQUIRE(cudaFree(other) == cudaSuccess);
    REQUIRE(cudaFree(d) == cudaSuccess);
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(seen[static_cast<std::size_t>(r)].find("invalid argument") != std::string::npos);
    CHECK(mismatch[static_cast<std::size_t>(r)] == ncclInvalidUsage);
    CHECK(wrong_device[static_cast<std::size_t>(r)] == ncclInvalidArgument);
  }
}
