// expect: a static extent is not divisible by the static axis sizes that shard it
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using E = local_extents_t<layout_t<M, 2, shard<0>, shard<1>>, extents<8, 6>>;
int main() {}
