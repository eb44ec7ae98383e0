// expect: an axis named in the layout is not an axis of the mesh
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using L = layout_t<M, 2, dim<0, "cp">>;
int main() {}
