// expect: tessera::activation_checkpointing<Mode>: unknown mode; the modes are ac::full, ac::selective_layer<N> and ac::selective_op<ac_op...>
// max-errors: 1
#include <tessera/parallel/activation_checkpoint.hpp>
struct selective {};
using P = tessera::activation_checkpointing<selective>;
constexpr auto d = P::desc;
