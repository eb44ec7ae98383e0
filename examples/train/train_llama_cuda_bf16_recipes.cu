// train_llama --device cuda --compute-dtype bf16 --recipe: the second half of the
// shipped recipes (the pipeline and context-parallel ones)
// with bf16 operands (cuda_bf16_kernels; cuda_recipe_half.hpp), compiled by nvcc beside the
// other halves.
#include <string>

#include "cuda_recipe_half.hpp"

namespace train_llama_cli {
#ifdef TESSERA_HAS_NCCL
TESSERA_RECIPE_HALF(1, tessera::cuda_bf16_kernels);
#endif
}  // namespace train_llama_cli
