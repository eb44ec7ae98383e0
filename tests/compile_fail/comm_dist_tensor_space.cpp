// expect: tessera::dist_tensor: the memory space must be a data_space
#include <tessera/tensor/dist_tensor.hpp>
struct device_space {};
using M = tessera::mesh<tessera::axis<"x", 2>>;
using L = tessera::layout_t<M, 1, tessera::dim<0, "x">>;
int main() { return sizeof(tessera::dist_tensor<float, L, device_space>) > 0 ? 0 : 1; }
