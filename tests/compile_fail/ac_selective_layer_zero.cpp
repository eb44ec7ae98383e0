// expect: tessera::ac::selective_layer<N>: N must be at least 1 (every N-th block is checkpointed; 1 checkpoints every block, as ac::full)
// max-errors: 1
#include <tessera/parallel/activation_checkpoint.hpp>
using P = tessera::activation_checkpointing<tessera::ac::selective_layer<0>>;
constexpr auto d = P::desc;
