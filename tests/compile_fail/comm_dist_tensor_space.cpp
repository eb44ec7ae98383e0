// expect: tessera::dist_tensor: only the host memory space is implemented
#include <tessera/tensor/dist_tensor.hpp>
struct device_space {};
using M = tessera::mesh<tessera::axis<"x", 2>>;
using L = tessera::layout_t<M, 1, tessera::dim<0, "x">>;
int main() { return sizeof(tessera::dist_tensor<float, L, device_space>) > 0 ? 0 : 1; }
