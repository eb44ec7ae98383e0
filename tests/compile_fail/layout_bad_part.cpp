// expect: each part must be shard<D>, replicate, partial<Op>
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>>;
using L = layout_t<M, 2, int>;
int main() {}
