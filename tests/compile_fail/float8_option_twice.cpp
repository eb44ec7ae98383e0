// expect: tessera::float8: an option is given twice; give each option at most once
// max-errors: 1
#include <tessera/parallel/float8.hpp>
using namespace tessera;
constexpr auto d = float8<fp8::tensorwise, fp8::all_gather, fp8::all_gather>::desc;
