// expect: tessera::mesh: a mesh with a dynamic axis
#include <tessera/tensor/device_mesh.hpp>

// a recipe's mesh with a data-parallel axis of no size, bound with {} as a static one is
using M = tessera::mesh<tessera::axis<"dp">, tessera::axis<"tp", 2>>;
void bind(const M& m);
int main() { bind({}); }
