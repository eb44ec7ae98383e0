// expect: tessera::float8: fp8::all_gather needs fp8::tensorwise scaling
// max-errors: 1
#include <tessera/parallel/float8.hpp>
using namespace tessera;
constexpr auto d = float8<fp8::rowwise, fp8::all_gather>::desc;
