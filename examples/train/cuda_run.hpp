// train_llama's single-GPU mode (--device cuda, TOML job.device = "cuda"): the run's inputs,
// and run_on_cuda, defined in train_llama_cuda.cu -- compiled by nvcc and linked into
// train_llama when the CUDA toolkit is found (TESSERA_HAS_CUDA_TRAINER). docs/cuda.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <tessera/model/llama_config.hpp>
#include <tessera/train/trainer.hpp>

namespace train_llama_cli {

struct cuda_inputs {
  const tessera::llama_config* cfg = nullptr;
  const std::vector<std::int32_t>* tokens = nullptr;
  std::int64_t steps = 0, batch = 0, seq_len = 0, accum = 1;
  std::uint64_t seed = 0;
  bool shuffle = true;
  tessera::train::optimizer_options opt;
  std::string init_from, save_weights, save_dtype, metrics, trace_file;
};

/// Why --device cuda cannot run here ("" when a CUDA device is visible).
std::string cuda_unavailable();

/// Trains cfg on CUDA device 0 (device_llama<cuda_kernels> under train::basic_trainer):
/// progress lines on stdout as the CPU run prints them; 0 on success. Throws tessera::error
/// when there is no device or the state does not fit it.
int run_on_cuda(const cuda_inputs& in);

}  // namespace train_llama_cli
