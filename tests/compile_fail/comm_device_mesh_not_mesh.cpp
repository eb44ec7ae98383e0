// expect: tessera::device_mesh: the argument must be a tessera::mesh<...>
#include <tessera/tensor/device_mesh.hpp>
int main() { return sizeof(tessera::device_mesh<int>) > 0 ? 0 : 1; }
