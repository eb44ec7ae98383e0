// train_llama --device cuda: one rank's training on the current CUDA device, the model's
// parameters, gradients, AdamW moments and activations in device memory
// (model/device_llama.hpp with kernels/cuda/backend.cuh), the loop train::basic_trainer's;
// with --recipe, the recipe's ranks on one GPU each (parallel_llama<R, cuda_kernels> over an
// NCCL device mesh, the loop parallel_run.hpp's; the recipes in two halves, this file's and
// train_llama_cuda_recipes.cu's, so nvcc compiles them side by side). Compiled by nvcc; see
// cuda_run.hpp.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cuda/backend.cuh>
#include <tessera/kernels/cuda/gemm.hpp>
#include <tessera/model/device_llama.hpp>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/train/data.hpp>
#include <tessera/train/hf_checkpoint.hpp>
#include <tessera/train/metrics.hpp>
#include <tessera/train/trainer.hpp>

#include <cstdlib>

#include "cuda_recipe_half.hpp"
#include "cuda_run.hpp"
#include "parallel_run.hpp"
#include "step_loop.hpp"

namespace train_llama_cli {
using namespace tessera;

std::string cuda_unavailable() {
  if (cuda_device_count() > 0) return "";
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  return std::string("--device cuda: no CUDA device (cudaGetDeviceCount: ") +
         (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) +
         "); train on the CPU (--device cpu) or run where a GPU is visible (CUDA_VISIBLE_DEVICES)";
}

int visible_gpus() { return cuda_device_count(); }

comm::device_uuid uuid_of_gpu(int device) {
  comm::device_uuid u{};
  cudaDeviceProp prop{};
  if (device >= 0 && device < cuda_device_count() && cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    static_assert(sizeof prop.uuid == sizeof u);
    std::memcpy(u.data(), &prop.uuid, sizeof u);
  }
  return u;
}

gpu_memory cuda_memory_of(int device) {
  if (device < 0 || device >= cuda_device_count()) return {};
  int current = 0;
  cuda_check(cudaGetDevice(&current), "cudaGetDevice");
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  std::size_t free_bytes = 0, total_bytes = 0;
  cudaDeviceProp prop{};
  const cudaError_t e = cudaMemGetInfo(&free_bytes, &total_bytes);
  cuda_check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  cuda_check(cudaSetDevice(current), "cudaSetDevice");
  cuda_check(e, "cudaMemGetInfo");
  return {static_cast<std::int64_t>(free_bytes), "GPU " + std::to_string(device) + " (" + prop.name + ")"};
}

std::int64_t cudnn_workspace_on(int device, const llama_dims& d) {
  struct on_device {  // `device` current while cuDNN is asked, the caller's again after (or on a throw)
    int before = 0;
    explicit on_device(int dev) {
      cuda_check(cudaGetDevice(&before), "cudaGetDevice");
      cuda_check(cudaSetDevice(dev), "cudaSetDevice");
    }
    ~on_device() { (void)cudaSetDevice(before); }
  } current(device);
  return cuda_bf16_kernels::cudnn_attention_workspace(d.B, d.T, d.heads, d.kv_heads, d.hd);
}

namespace {
/// run_on_cuda on backend K (cuda_kernels, or cuda_bf16_kernels for bf16 operands).
template <class K>
int run_on(const cuda_inputs& in) {
  const llama_config& c = *in.cfg;
  if (const std::string why = cuda_unavailable(); !why.empty()) throw error(why);
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::size_t free_bytes = 0, total_bytes = 0;  // that the step fits: train_llama.cpp, before the tokens
  cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");

  device_llama<K> model(c);
  std::vector<float> host(static_cast<std::size_t>(model.arena_size()));
  const auto slot = [&](std::int64_t i) {
    return host.data() + model.params().layout().slots()[static_cast<std::size_t>(i)].offset;
  };
  if (in.init_from.empty() || names_checkpoint(in.init_from)) {  // (a checkpoint: the checkpointer's)
    model.init_weights(in.seed);
  } else {
    train::load_hf_checkpoint(c, slot, in.init_from);
    model.load_params(host);
  }
  train::batch_loader loader(in.tokens, in.batch, in.seq_len, in.seed, in.shuffle);
  train::jsonl_writer jsonl;
  if (!in.metrics.empty()) jsonl = train::jsonl_writer(in.metrics);
  const double peak = K::gemm_peak_flops();  // of the GEMMs K runs: f32 or bf16 operands
  std::printf("model %s: %s parameters, %lld layers, dim %lld; on %s (sm_%d%d, %.1f GiB)\n",
              std::string(c.name).c_str(), train::group_thousands(std::to_string(model.num_params())).c_str(),
              static_cast<long long>(c.n_layers), static_cast<long long>(c.dim), prop.name, prop.major, prop.minor,
              static_cast<double>(total_bytes) / (1 << 30));
  const std::string compute =
      in.bf16 ? std::string("bf16 operands on the tensor cores (GEMMs; attention: ") +
                    cuda::attention_library_name(cuda::default_attention_library()) +
                    "), f32 accumulation and master weights"
              : "f32 (no TF32)";
  std::printf("compute: %s; measured %s GEMM peak (cuBLASLt): %.1f TFLOP/s (MFU denominator); %.1f MFLOP per "
              "token\n",
              compute.c_str(), in.bf16 ? "bf16" : "f32", peak / 1e12, flops_per_token(c, in.seq_len) / 1e6);

  train::basic_trainer<device_llama<K>> tr(model, loader, in.steps, in.accum, in.opt, peak);
  run_steps(model, tr, loader, in.checkpoint, jsonl, in.trace_file);
  if (!in.save_weights.empty()) {
    model.store_params(host);
    train::save_hf_checkpoint(c, slot, in.save_weights,
                              in.save_dtype == "bf16" ? train::safetensors::dtype::bf16 : train::safetensors::dtype::f32);
    std::printf("saved weights to %s\n", in.save_weights.c_str());
  }
  return 0;
}
}  // namespace

int run_on_cuda(const cuda_inputs& in) { return in.bf16 ? run_on<cuda_bf16_kernels>(in) : run_on<cuda_kernels>(in); }

int run_recipe_on_cuda(const std::string& name, comm::any_communicator* mpi, std::int64_t ranks, const run_inputs& in) {
  if (const std::string why = cuda_unavailable(); !why.empty()) throw error(why);
#ifndef TESSERA_HAS_NCCL
  (void)name, (void)mpi, (void)ranks, (void)in;
  throw error("--device cuda --recipe: this train_llama was built without NCCL (the ranks' communicators on GPUs); "
              "install NCCL and reconfigure, or train one rank with --device cuda");
#else
  if (in.bf16)
    return run_recipe_half<0, cuda_bf16_kernels>(name, mpi, ranks, in) ||
                   run_recipe_half<1, cuda_bf16_kernels>(name, mpi, ranks, in)
               ? 0
               : 2;
  return run_recipe_half<0, cuda_kernels>(name, mpi, ranks, in) || run_recipe_half<1, cuda_kernels>(name, mpi, ranks, in)
             ? 0
             : 2;
#endif
}

#ifdef TESSERA_HAS_NCCL
TESSERA_RECIPE_HALF(0, cuda_kernels);
#endif

}  // namespace train_llama_cli
