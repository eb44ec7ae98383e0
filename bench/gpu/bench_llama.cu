// The Llama on one GPU: training-step throughput and MFU of device_llama<cuda_kernels> on a
// Llama 3 8B-shaped stack with as many layers as fit the GPU's free memory (f32 parameters,
// gradients, AdamW moments and activations, no checkpointing), as Markdown (bench/gpu/run.sh
// runs it; docs/cuda.md). Without a GPU it says why and exits 77 (ctest: skipped).
//
// One step is forward, backward and AdamW over one sequence of 8,192 tokens (TorchTitan's 8B
// runs: local batch 1, seq 8,192); the figure is the median of 5 timed steps after 2 warm-up
// steps. MFU uses TorchTitan's FLOP count (6 N + 12 L H hd T per token, the embedding
// excluded from N; model/llama_config.hpp flops_per_token) against two peaks: the f32 GEMM
// peak measured here (cuBLASLt, no TF32), and the GPU's dense bf16 peak (989 TFLOP/s for H100
// SXM and H200, 756 for H100 PCIe, 312 for A100; the issue's goal of 45% is against it; "--"
// when the device is none of these). Three rows: cuda_kernels (f32 GEMMs), cuda_bf16_kernels
// (bf16 GEMM operands on the tensor cores, f32 accumulation; f32 master weights, norms,
// softmax), and the same with the block linears in Float8 rowwise (FP8 GEMMs; TorchTitan
// reports +28% tokens/s for Float8 over bf16 on 8B). The attention is not on tensor cores yet in either, so the bf16 figure is
// expected below the goal: this bench measures where the device path stands.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <tessera/kernels/cuda/backend.cuh>
#include <tessera/kernels/cuda/gemm.hpp>
#include <tessera/model/device_llama.hpp>
#include <tessera/tensor/cuda_memory.hpp>

using namespace tessera;

namespace {
double bf16_dense_peak(const cudaDeviceProp& p) {
  const char* n = p.name;
  if (std::strstr(n, "H100")) return std::strstr(n, "PCIe") ? 756e12 : 989e12;
  if (std::strstr(n, "H200")) return 989e12;
  if (std::strstr(n, "A100")) return 312e12;
  return 0;
}

/// Every block linear, in Float8 (TorchTitan converts all but the output layer).
constexpr std::uint16_t all_linears() {
  std::uint16_t all = 0;
  for (param_role r : block_linears) all = static_cast<std::uint16_t>(all | (1u << static_cast<unsigned>(r)));
  return all;
}
constexpr f8_linears float8_rowwise{.roles = all_linears(), .recipe = f8_recipe::rowwise};

/// The largest number of 8B blocks whose state (16 bytes per parameter) and activations
/// (with the Float8 row's operand buffers, the largest) fit `budget` bytes.
std::int64_t layers_that_fit(std::int64_t B, std::int64_t T, double budget) {
  llama_config c = llama3_8b::config;
  std::int64_t best = 0;
  for (std::int64_t L = 1; L <= llama3_8b::config.n_layers; ++L) {
    c.n_layers = L;
    const double bytes = 16.0 * static_cast<double>(param_count(c)) +
                         static_cast<double>(device_llama<cuda_kernels>::activation_bytes_for(c, B, T, float8_rowwise));
    if (bytes <= budget) best = L;
  }
  return best;
}

/// One row: `K`'s device_llama on the stack of `c`, steps of batch [B, T].
template <class K>
void row(const llama_config& c, std::int64_t B, std::int64_t T, double f32_peak, double bf16_peak,
         const f8_linears& f8 = {}) {
  device_llama<K> m(c, f8);
  m.init_weights(0);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B * T)), next(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<std::int32_t>((i * 7919) % 128256), next[i] = static_cast<std::int32_t>((i * 104729 + 1) % 128256);
  const cpu::adamw_config opt{.lr = 1e-4f};
  memory_tracker<cuda_space>::reset_peak();
  std::vector<double> secs;
  for (int s = 0; s < 7; ++s) {
    K::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    m.zero_grad();
    m.forward(ids, next, B, T);  // the loss is read back: the forward has finished
    m.backward();
    m.clip_grad_norm(1.0f);      // the norm is read back too
    m.adamw_step(s + 1, opt);
    K::synchronize();
    if (s >= 2) secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(secs.begin(), secs.end());
  const double step = secs[secs.size() / 2], tps = static_cast<double>(B * T) / step;
  const double achieved = tps * flops_per_token(c, T);
  char vs_bf16[32] = "--";
  if (bf16_peak > 0) std::snprintf(vs_bf16, sizeof vs_bf16, "%.1f%%", 100 * achieved / bf16_peak);
  const std::string name = std::string(K::name) + (f8.any() ? " + Float8 rowwise" : "");
  std::printf("| %s | %.3f | %.0f | %.1f | %.1f%% | %s | %.1f |\n", name.c_str(), step, tps,
              achieved / 1e12, 100 * achieved / f32_peak, vs_bf16,
              static_cast<double>(memory_tracker<cuda_space>::peak_bytes()) / (1 << 30));
  std::fflush(stdout);
}
}  // namespace

int main() {
  if (cuda_device_count() == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  try {
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    std::size_t free_bytes = 0, total = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    const std::int64_t B = 1, T = 8192;
    // leave 10% and 2 GiB for cuBLASLt's workspace, the kernels' scratch (bf16 operands) and fragmentation
    const double budget = 0.9 * static_cast<double>(free_bytes) - 2.0 * (1 << 30);
    llama_config c = llama3_8b::config;
    c.n_layers = layers_that_fit(B, T, budget);
    if (c.n_layers == 0) {
      std::printf("FAILED: not one 8B block fits %.1f GiB free on %s\n", static_cast<double>(free_bytes) / (1 << 30),
                  prop.name);
      return 1;
    }
    const double f32_peak = cuda::gemm_peak_flops(cuda_kernels::blas()), bf16_peak = bf16_dense_peak(prop);
    std::printf("# The Llama on one GPU: %s (sm_%d%d)\n\n", prop.name, prop.major, prop.minor);
    std::printf("Llama 3 8B-shaped stack of %lld layers (%.2fB parameters; all 32 need %.0f GiB at 16 bytes per "
                "parameter), f32 state, batch %lld x %lld tokens, no checkpointing; median of 5 steps after 2 warm-up. "
                "Backends: cuda (f32 GEMMs, no TF32), cuda-bf16 (bf16 GEMM operands, f32 accumulation).\n\n",
                static_cast<long long>(c.n_layers), static_cast<double>(param_count(c)) / 1e9,
                16.0 * static_cast<double>(param_count(llama3_8b::config)) / (1 << 30), static_cast<long long>(B),
                static_cast<long long>(T));
    std::printf("| backend | step (s) | tokens/s | TFLOP/s (TorchTitan's count) | MFU vs measured f32 GEMM peak "
                "(%.1f TFLOP/s) | MFU vs dense bf16 peak (%.0f TFLOP/s) | peak GPU memory (GiB) |\n"
                "|---|---|---|---|---|---|---|\n",
                f32_peak / 1e12, bf16_peak / 1e12);
    row<cuda_kernels>(c, B, T, f32_peak, bf16_peak);
    row<cuda_bf16_kernels>(c, B, T, f32_peak, bf16_peak);
    row<cuda_bf16_kernels>(c, B, T, f32_peak, bf16_peak, float8_rowwise);
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
