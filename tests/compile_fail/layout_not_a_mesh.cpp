// expect: the first argument must be a tessera::mesh
#include <tessera/layout/layout.hpp>
using namespace tessera;
using L = layout_t<int, 2, shard<0>>;
int main() {}
