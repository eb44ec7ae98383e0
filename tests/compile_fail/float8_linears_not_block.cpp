// expect: tessera::float8: fp8::linears<...> names the block linears to convert, each once
// max-errors: 1
#include <tessera/parallel/float8.hpp>
using namespace tessera;
// the output layer is not a block linear
constexpr auto d = float8<fp8::rowwise, fp8::linears<param_role::ffn_w1, param_role::output>>::desc;
