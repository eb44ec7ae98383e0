// train_llama --device cuda --compute-dtype bf16 --recipe: the first half of the
// shipped recipes (no pipeline, no context parallel)
// with bf16 operands (cuda_bf16_kernels; cuda_recipe_half.hpp), compiled by nvcc beside the
// other halves.
#include <string>

#include "cuda_recipe_half.hpp"

namespace train_llama_cli {
#ifdef TESSERA_HAS_NCCL
TESSERA_RECIPE_HALF(0, tessera::cuda_bf16_kernels);
#endif
}  // namespace train_llama_cli
