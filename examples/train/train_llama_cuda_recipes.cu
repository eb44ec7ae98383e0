// train_llama --device cuda --recipe: the second half of the shipped recipes on GPUs (the
// pipeline and context-parallel ones; cuda_recipe_half.hpp), compiled by nvcc beside
// train_llama_cuda.cu.
#include <string>

#include "cuda_recipe_half.hpp"

namespace train_llama_cli {
#ifdef TESSERA_HAS_NCCL
TESSERA_RECIPE_HALF(1, tessera::cuda_kernels);
#endif
}  // namespace train_llama_cli
