// cuDNN's fused attention without a GPU (kernels/cuda/cudnn_attention.hpp): the graphs tessera
// builds -- causal, GQA, bf16 in tessera's [B, T, heads, HD] layout, the statistics in its lse
// layout, the deterministic backward -- described to cuDNN 9 for an H100 that is not there
// (a DeviceProperties from the H100 SXM's published figures; cuDNN's deviceless compilation)
// and cuDNN's heuristics asked whether an engine takes them: at the shapes the GPU tests and
// the 8B benchmark run. What this cannot check, cuDNN's results, gpu.cuda_attention and
// gpu.cuda_llama check on a GPU. Needs cuDNN and NVRTC on the loader's path, and the CUDA
// driver's stub as libcuda.so.1 for the engines cuDNN compiles at run time (CMake sets them).
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include <tessera/kernels/cuda/attention_library.hpp>
#include <tessera/kernels/cuda/cudnn_attention.hpp>

using namespace tessera;
namespace cudnn = tessera::cuda::cudnn;

namespace {
/// An H100 SXM5 80GB as cuDNN's device properties describe a device (the members cuDNN 9.19's
/// CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION reads): sm_90, 132 SMs, 50 MiB of L2, 227 KiB of
/// shared memory a block opted in (NVIDIA's H100 datasheet and CUDA's programming guide,
/// "Compute Capabilities"). What the heuristics choose from; no device is touched. `sm`
/// other than 90 describes the same device with another compute capability.
std::shared_ptr<const cudnn_frontend::DeviceProperties> h100(int sm = 90) {
  const std::string json = R"({"cudaDeviceId":0,"deviceName":"NVIDIA H100 80GB HBM3","deviceVer":)" +
                           std::to_string(sm * 10) +
                           R"(,"driverVer":13000,"isTccDriver":0,"l2CacheSize":52428800,"maxCtasPerSM":32,)"
                           R"("maxRegistersPerSM":65536,"maxSharedMemoryPerBlock":49152,)"
                           R"("maxSharedMemoryPerBlockOptin":232448,"maxThreadsPerBlock":1024,)"
                           R"("maxThreadsPerSM":2048,"memClockRateKHz":2619000,"multiProcessorCount":132,)"
                           R"("pciDeviceId":0,"regsPerBlock":65536,"reservedSharedMemoryPerBlock":1024,)"
                           R"("smClockRateKHz":1980000,"supportCoopLaunch":1,"totalGlobalMem":85520809984,)"
                           R"("warpSize":32,"maxGridSize":[2147483647,65535,65535],"maxBlockSize":[1024,1024,64]})";
  cudnn::load_library();
  auto p = std::make_shared<cudnn_frontend::DeviceProperties>();
  auto e = p->deserialize(std::vector<std::uint8_t>(json.begin(), json.end()));
  REQUIRE_MESSAGE(e.is_good(), "cuDNN refused the device's properties: ", e.get_message());
  return p;
}
std::string problem(cudnn::pass p, const cudnn::sdpa_shape& s, int sm = 90) {
  return cudnn::support_problem(p, s, h100(sm), sm);
}
}  // namespace

TEST_CASE("cuDNN has an engine for tessera's attention graphs on an H100") {
  const cudnn::sdpa_shape shapes[] = {
      {1, 8192, 32, 8, 128},  // bench_gpu_llama: Llama 3 8B's heads at 8,192 tokens
      {2, 200, 4, 2, 16},     // gpu.cuda_attention: GQA, no tile divides T
      {2, 200, 4, 2, 64},
      {2, 200, 4, 2, 128},
      {2, 64, 16, 16, 16},  // gpu.cuda_llama: the debug model (16 heads of 16)
      {2, 64, 4, 2, 16},    // and its GQA model with tied embeddings
  };
  for (const auto& s : shapes) {
    CAPTURE(cudnn::to_string(s));
    CHECK(problem(cudnn::pass::forward, s) == "");
    CHECK(problem(cudnn::pass::backward, s) == "");
  }
}

TEST_CASE("cuDNN's refusals reach the caller") {
  // no engine of cuDNN's runs this attention before Ampere (sm_80): the heuristics' refusal
  CHECK(problem(cudnn::pass::forward, {2, 200, 4, 2, 64}, 75) != "");
  CHECK(problem(cudnn::pass::backward, {2, 200, 4, 2, 64}, 75) != "");
  // cuDNN's own checks: a head dim that is not a multiple of 8
  CHECK(problem(cudnn::pass::forward, {1, 256, 4, 4, 12}).find("multiple of 8") != std::string::npos);
  // sizes tessera's attention refuses are refused before cuDNN sees them
  CHECK_THROWS_WITH_AS(cudnn::sdpa_graph(cudnn::pass::forward, {1, 64, 6, 4, 64}),
                       doctest::Contains("NH must be a multiple of NKV"), error);
  CHECK(problem(cudnn::pass::backward, {1, 64, 6, 4, 64}).find("NH must be a multiple of NKV") != std::string::npos);
}

TEST_CASE("TESSERA_ATTENTION in a program built with cuDNN's attention") {
  // registered before main by the units that include cudnn_attention.hpp (this one, and the
  // component's cmake/cudnn_attention_unit.cpp): the header's functions
  REQUIRE(cuda::cudnn_linked());
  CHECK(cudnn::linked() == &cudnn::detail::functions);
  CHECK((cudnn::linked()->load_library == &cudnn::load_library));
  CHECK((cudnn::linked()->workspace_bytes == &cudnn::workspace_bytes));
  CHECK(cuda::attention_library_named(nullptr) == cuda::attention_library::tessera);
  CHECK(cuda::attention_library_named("tessera") == cuda::attention_library::tessera);
  CHECK(cuda::attention_library_named("cudnn") == cuda::attention_library::cudnn);
  CHECK_THROWS_WITH_AS(cuda::attention_library_named("cuDNN"),
                       doctest::Contains("TESSERA_ATTENTION is 'cuDNN': give 'tessera'"), error);
}
