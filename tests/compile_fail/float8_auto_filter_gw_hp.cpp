// expect: tessera::float8: fp8::auto_filter_small_kn has no thresholds for fp8::rowwise_with_gw_hp
// max-errors: 1
#include <tessera/parallel/float8.hpp>
using namespace tessera;
constexpr auto d = float8<fp8::rowwise_with_gw_hp, fp8::auto_filter_small_kn>::desc;
