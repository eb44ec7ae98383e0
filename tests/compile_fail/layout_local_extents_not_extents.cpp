// expect: tessera::local_extents_t: the second argument must be tessera::extents
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>>;
using E = local_extents_t<layout_t<M, 1, shard<0>>, int>;
int main() {}
