// expect: tessera::float8: unknown option; the options are fp8::all_gather, fp8::auto_filter_small_kn and fp8::linears<param_role...>
// max-errors: 1
#include <tessera/parallel/float8.hpp>
using namespace tessera;
constexpr auto d = float8<fp8::rowwise, fp8::tensorwise>::desc;
