// expect: a shard dimension is out of range for the tensor rank
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using L = layout_t<M, 2, shard<2>, replicate>;
int main() {}
