// expect: tessera::ac::selective_op<...>: ac_op::count is not an op
// max-errors: 1
#include <tessera/parallel/activation_checkpoint.hpp>
using P = tessera::activation_checkpointing<tessera::ac::selective_op<tessera::ac_op::count>>;
constexpr auto d = P::desc;
