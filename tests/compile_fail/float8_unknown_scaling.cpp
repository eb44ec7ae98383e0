// expect: tessera::float8<Scaling>: unknown scaling; the scalings are fp8::tensorwise, fp8::rowwise and fp8::rowwise_with_gw_hp
// max-errors: 1
#include <tessera/parallel/float8.hpp>
using namespace tessera;
struct blockwise {};
constexpr auto d = float8<blockwise>::desc;
