// expect: tessera::ac::selective_op<...>: an op is listed twice; list each op to keep once
// max-errors: 1
#include <tessera/parallel/activation_checkpoint.hpp>
using P = tessera::activation_checkpointing<tessera::ac::selective_op<tessera::ac_op::wq, tessera::ac_op::wq>>;
constexpr auto d = P::desc;
