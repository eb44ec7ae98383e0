// expect: tessera::local_extents_t: the first argument must be a layout
#include <tessera/layout/layout.hpp>
using namespace tessera;
using E = local_extents_t<int, extents<4>>;
int main() {}
