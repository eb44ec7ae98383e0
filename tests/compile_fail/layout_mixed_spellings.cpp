// expect: spell a layout with DTensor placements (shard, replicate, partial) or with dim<>/partial_on<>, not both
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>>;
using L = layout_t<M, 2, shard<0>, dim<1, "dp">>;
int main() {}
