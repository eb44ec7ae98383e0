// expect: a DTensor-style layout needs exactly one placement per mesh axis
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using L = layout_t<M, 2, shard<0>>;
int main() {}
