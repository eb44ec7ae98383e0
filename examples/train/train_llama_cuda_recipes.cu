// train_llama --device cuda --recipe: the second half of the shipped recipes on GPUs (the
// pipeline and context-parallel ones; cuda_recipe_half.hpp), compiled by nvcc beside
// train_llama_cuda.cu.
#include <string>

#include "cuda_recipe_half.hpp"

namespace train_llama_cli {
#ifdef TESSERA_HAS_NCCL
template bool run_recipe_half<1>(const std::string&, tessera::comm::any_communicator*, std::int64_t,
                                 const run_inputs&);
#endif
}  // namespace train_llama_cli
