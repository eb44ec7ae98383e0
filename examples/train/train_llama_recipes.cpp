// train_llama --recipe on CPU ranks: the second half of the shipped recipes (the pipeline and
// context-parallel ones; cpu_recipe_half.hpp), compiled beside train_llama.cpp.
#include <cstdint>
#include <string>

#include "cpu_recipe_half.hpp"

namespace train_llama_cli {
TESSERA_CPU_RECIPE_HALF(1);
}  // namespace train_llama_cli
