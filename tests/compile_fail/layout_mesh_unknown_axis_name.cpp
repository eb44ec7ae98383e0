// expect: no axis of this mesh has that name; use one of the mesh's axis names
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
constexpr int i = M::axis_index<"cp">();
int main() {}
