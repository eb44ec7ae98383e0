// The Llama on one GPU: training-step throughput and MFU of device_llama<cuda_kernels> on a
// Llama 3 8B-shaped stack with as many layers as fit the GPU's free memory (f32 parameters,
// gradients, AdamW moments and activations, no checkpointing), as Markdown (bench/gpu/run.sh
// runs it; docs/cuda.md). Without a GPU it says why and exits 77 (ctest: skipped).
//
// One step is forward, backward and AdamW over one sequence of 8,192 tokens (TorchTitan's 8B
// runs: local batch 1, seq 8,192); the figure is the median of 5 timed steps after 2 warm-up
// steps. MFU uses TorchTitan's FLOP count (6 N + 12 L H hd T per token, the embedding
// excluded from N; model/llama_config.hpp flops_per_token) against two peaks: the GEMM peak
// measured here with the row's operands (cuBLASLt; f32 without TF32, or bf16: K::gemm_peak_flops,
// the trainer's MFU denominator), and the GPU's dense bf16 peak (989 TFLOP/s for H100
// SXM and H200, 756 for H100 PCIe, 312 for A100; the issue's goal of 45% is against it; "--"
// when the device is none of these). Three rows: cuda_kernels (f32 GEMMs), cuda_bf16_kernels
// (bf16 GEMM operands on the tensor cores, f32 accumulation; f32 master weights, norms,
// softmax; attention on the tensor cores through WMMA), and the same with the block linears
// in Float8 rowwise (FP8 GEMMs; TorchTitan reports +28% tokens/s for Float8 over bf16 on 8B).
// Measured on an H200 (docs/performance.md, "On GPUs"): the attention kernels take about
// three quarters of the bf16 step, so the bf16 row is below the goal.
//
// Two more rows, cuda-bf16-cudnn and float8-cudnn, are the bf16 and Float8 rows with cuDNN's
// fused attention in place of tessera's (TESSERA_ATTENTION=cudnn, set for the row;
// kernels/cuda/cudnn_attention.hpp): where the program is built with tessera::cudnn and cuDNN
// 9 is found, else one line says why they did not run; a row that fails says so and the
// others still run.
//
// Usage: bench_gpu_llama [--rows cuda,cuda-bf16,float8,cuda-bf16-cudnn,float8-cudnn] [--profile]
// (default: the first three rows; ctest gpu.bench_llama runs the other four: the f32 row takes
// minutes). --profile runs one more
// step of each row under CUPTI's activity tracing and prints its GPU time by kernel after the
// table (kernel_profile.hpp; built when CMake finds CUPTI).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <tessera/kernels/cuda/backend.cuh>
#include <tessera/kernels/cuda/gemm.hpp>
#include <tessera/model/device_llama.hpp>
#include <tessera/tensor/cuda_memory.hpp>
#if TESSERA_HAS_CUPTI
#include "kernel_profile.hpp"
#endif

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

/// The estimate of a row's device memory (model/device_llama.hpp): its four arenas at 16
/// bytes per parameter, its activations and its backend's workspace.
template <class K>
double estimated_bytes(const llama_config& c, std::int64_t B, std::int64_t T, const f8_linears& f8 = {}) {
  return 16.0 * static_cast<double>(param_count(c)) +
         static_cast<double>(device_llama<K>::activation_bytes_for(c, B, T, f8) +
                             device_llama<K>::workspace_bytes_for(c, B, T, f8));
}

/// The largest number of 8B blocks whose state (16 bytes per parameter) and activations
/// (with the Float8 row's operand buffers, the largest) fit `budget` bytes -- the rule of the
/// sessions measured so far (18 layers on an H200), kept so that their rows compare; the
/// budget's margin holds the backends' workspace (about 4.2 GiB at 8,192 tokens, and for the
/// bf16 row 6.5 GiB more since 2026-11-30: the weights device_llama keeps rounded), which the
/// table's estimate column counts.
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

/// Seconds each row's weights took to initialize (the first row's on the host, then uploaded;
/// the others' copied in from the host copy the first row kept), for the note under the table.
std::vector<std::pair<std::string, double>> init_seconds;
/// The first row's initialized parameters (every row has the same config and seed, so the same
/// arena): the rows after it load them, 1-2 s against 30-40 s of drawing them again -- time of a
/// GPU lease.
std::vector<float> first_weights;
/// The bf16 rows' steps again with the other attention forward (cuda::forward_path: the row
/// ran the default), for the note under the table: name, the row's step, the other's.
struct forward_ab {
  std::string name;
  double step, other;
  cuda::forward_path path;
};
std::vector<forward_ab> other_forward;

/// --profile: each row's profiled step (its name, the row's median step), printed after the table
bool profile = false;
#if TESSERA_HAS_CUPTI
struct profiled {
  std::string name;
  double step;
  tessera_bench::kernel_profile::result r;
};
std::vector<profiled> profiles;
#endif

/// One row: `K`'s device_llama on the stack of `c`, steps of batch [B, T].
template <class K>
void row(const llama_config& c, std::int64_t B, std::int64_t T, double bf16_peak,
         const f8_linears& f8 = {}) {
  K::release_scratch();  // the row before's: this row's tracked peak holds its own scratch
  device_llama<K> m(c, f8);
  const auto i0 = std::chrono::steady_clock::now();
  if (static_cast<std::int64_t>(first_weights.size()) == m.arena_size()) {
    m.load_params(first_weights);
  } else {
    m.init_weights(0);
    first_weights.assign(static_cast<std::size_t>(m.arena_size()), 0.0f);
    m.store_params(first_weights);
  }
  const double init = std::chrono::duration<double>(std::chrono::steady_clock::now() - i0).count();
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B * T)), next(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<std::int32_t>((i * 7919) % 128256), next[i] = static_cast<std::int32_t>((i * 104729 + 1) % 128256);
  const cpu::adamw_config opt{.lr = 1e-4f};
  memory_tracker<cuda_space>::reset_peak();
  std::vector<double> secs;
  const auto train_step = [&](int s) {
    m.zero_grad();
    m.forward(ids, next, B, T);  // the loss is read back: the forward has finished
    m.backward();
    m.clip_grad_norm(1.0f);      // the norm is read back too
    m.adamw_step(s + 1, opt);
    K::synchronize();
  };
  for (int s = 0; s < 7; ++s) {
    K::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    train_step(s);
    if (s >= 2) secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(secs.begin(), secs.end());
  const double step = secs[secs.size() / 2], tps = static_cast<double>(B * T) / step;
  const bool cudnn = cuda::default_attention_library() == cuda::attention_library::cudnn;
  const std::string name =
      std::string(K::name) + (f8.any() ? " + Float8 rowwise" : "") + (cudnn ? ", cuDNN's attention" : "");
#if TESSERA_HAS_CUPTI
  if (profile) {
    tessera_bench::kernel_profile p;
    p.start();
    train_step(7);
    profiles.push_back({name, step, p.stop()});
  }
#endif
  // read before gemm_peak_flops allocates its operands
  const double peak_bytes = static_cast<double>(memory_tracker<cuda_space>::peak_bytes());
  if (K::bf16_operands && K::tc_attention(head_dim(c)) && !cudnn) {  // the same steps, the other attention forward
    const cuda::forward_path row_path = cuda::default_forward_path(),
                             other = row_path == cuda::forward_path::wide ? cuda::forward_path::narrow
                                                                          : cuda::forward_path::wide;
    cuda::set_default_forward_path(other);
    std::vector<double> o;
    for (int s = 8; s < 14; ++s) {
      K::synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      train_step(s);
      if (s > 8) o.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    cuda::set_default_forward_path(row_path);
    std::sort(o.begin(), o.end());
    other_forward.push_back({name, step, o[o.size() / 2], other});
  }
  const double achieved = tps * flops_per_token(c, T);
  char vs_bf16[32] = "--";
  if (bf16_peak > 0) std::snprintf(vs_bf16, sizeof vs_bf16, "%.1f%%", 100 * achieved / bf16_peak);
  init_seconds.emplace_back(name, init);
  const double gemm_peak = K::gemm_peak_flops();  // of the GEMMs K runs: f32 or bf16 operands
  std::printf("| %s | %.3f | %.0f | %.1f | %.1f | %.1f%% | %s | %.2f | %.2f |\n", name.c_str(), step, tps,
              achieved / 1e12, gemm_peak / 1e12, 100 * achieved / gemm_peak, vs_bf16, peak_bytes / (1 << 30),
              estimated_bytes<K>(c, B, T, f8) / (1 << 30));
  std::fflush(stdout);
}
}  // namespace

int main(int argc, char** argv) {
  std::string rows = "cuda,cuda-bf16,float8";
  const std::vector<std::string> known = {"cuda", "cuda-bf16", "float8", "cuda-bf16-cudnn", "float8-cudnn"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows" && i + 1 < argc) {
      rows = argv[++i];
    } else if (a == "--profile") {
      profile = true;
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\nusage: %s [--rows cuda,cuda-bf16,float8,cuda-bf16-cudnn,"
                   "float8-cudnn] [--profile] (rows: a comma-separated subset, default the first three)\n",
                   argv[0], a.c_str(), argv[0]);
      return 2;
    }
  }
#if !TESSERA_HAS_CUPTI
  if (profile) {
    std::fprintf(stderr, "%s: --profile needs CUPTI, which CMake did not find when this program was built (the "
                 "CUDA toolkit's libcupti; reconfigure with it installed)\n", argv[0]);
    return 2;
  }
#endif
  const auto wanted = [&](const std::string& r) { return ("," + rows + ",").find("," + r + ",") != std::string::npos; };
  for (std::size_t b = 0, e; b <= rows.size(); b = e + 1) {
    e = std::min(rows.find(',', b), rows.size());
    if (const std::string r = rows.substr(b, e - b); std::find(known.begin(), known.end(), r) == known.end()) {
      std::fprintf(stderr, "%s: unknown row '%s' in --rows (known: cuda, cuda-bf16, float8, cuda-bf16-cudnn, "
                   "float8-cudnn)\n", argv[0], r.c_str());
      return 2;
    }
  }
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
    const double bf16_peak = bf16_dense_peak(prop);
    std::printf("# The Llama on one GPU: %s (sm_%d%d)\n\n", prop.name, prop.major, prop.minor);
    std::printf("Llama 3 8B-shaped stack of %lld layers (%.2fB parameters; all 32 need %.0f GiB at 16 bytes per "
                "parameter), f32 state, batch %lld x %lld tokens, no checkpointing; median of 5 steps after 2 warm-up. "
                "Backends: cuda (f32 GEMMs, no TF32), cuda-bf16 (bf16 GEMM operands, f32 accumulation; the attention "
                "forward %s, TESSERA_ATTENTION_FORWARD; the backward's dq %s, TESSERA_DQ_PATH).\n\n",
                static_cast<long long>(c.n_layers), static_cast<double>(param_count(c)) / 1e9,
                16.0 * static_cast<double>(param_count(llama3_8b::config)) / (1 << 30), static_cast<long long>(B),
                static_cast<long long>(T),
                cuda::default_forward_path() == cuda::forward_path::wide ? "wide (128 rows a block)"
                                                                          : "narrow (64 rows a block)",
                cuda::default_dq_path() == cuda::dq_path::fused ? "inside the dk/dv kernel" : "from its own kernel");
    std::printf("| backend | step (s) | tokens/s | TFLOP/s (TorchTitan's count) | measured GEMM peak of its operands "
                "(TFLOP/s) | MFU vs that peak | MFU vs dense bf16 peak (%.0f TFLOP/s) | peak GPU memory, tracked (GiB) "
                "| its estimate (GiB) |\n"
                "|---|---|---|---|---|---|---|---|---|\n",
                bf16_peak / 1e12);
    if (wanted("cuda")) row<cuda_kernels>(c, B, T, bf16_peak);
    if (wanted("cuda-bf16")) row<cuda_bf16_kernels>(c, B, T, bf16_peak);
    if (wanted("float8")) row<cuda_bf16_kernels>(c, B, T, bf16_peak, float8_rowwise);
    // cuDNN's attention for the bf16 operands' rows; a row that fails leaves the others
    std::string cudnn_notes;
    int failed = 0;
    if (wanted("cuda-bf16-cudnn") || wanted("float8-cudnn")) {
      if (const std::string why = cuda::cudnn_attention_unavailable(); !why.empty()) {
        cudnn_notes += "\ncuDNN's attention rows: not run here (" + why + ")\n";
      } else {
        const cuda::attention_library before = cuda::default_attention_library();
        cuda::set_default_attention_library(cuda::attention_library::cudnn);
        for (const bool f8 : {false, true}) {
          if (!wanted(f8 ? "float8-cudnn" : "cuda-bf16-cudnn")) continue;
          try {
            row<cuda_bf16_kernels>(c, B, T, bf16_peak, f8 ? float8_rowwise : f8_linears{});
          } catch (const std::exception& e) {
            cudnn_notes += std::string("\nFAILED: the ") + (f8 ? "float8-cudnn" : "cuda-bf16-cudnn") +
                           " row: " + e.what() + "\n";
            ++failed;
          }
        }
        cuda::set_default_attention_library(before);
      }
    }
    std::printf("%s", cudnn_notes.c_str());
    std::printf("\nWeights initialized on the host (%u threads) and uploaded by the first row, copied in from its "
                "host copy by the others:", std::thread::hardware_concurrency());
    for (const auto& [name, secs] : init_seconds) std::printf(" %s %.1f s;", name.c_str(), secs);
    std::printf("\n");
    for (const forward_ab& f : other_forward)  // the same model, 5 more steps after 1 warm-up
      std::printf("\n%s with the %s attention forward (TESSERA_ATTENTION_FORWARD=%s): step %.3f s against the row's "
                  "%.3f s (%.2fx)\n",
                  f.name.c_str(), f.path == cuda::forward_path::wide ? "wide" : "narrow",
                  f.path == cuda::forward_path::wide ? "wide" : "narrow", f.other, f.step, f.step / f.other);
#if TESSERA_HAS_CUPTI
    for (const profiled& p : profiles) {
      std::printf("\n## GPU time by kernel: %s, one step (CUPTI)\n\n", p.name.c_str());
      tessera_bench::kernel_profile::print(p.r, p.step);
    }
#endif
    if (failed) return 1;
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
