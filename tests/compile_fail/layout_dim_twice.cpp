// expect: a tensor dimension is listed in two dim<>
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using L = layout_t<M, 2, dim<0, "dp">, dim<0, "tp">>;
int main() {}
