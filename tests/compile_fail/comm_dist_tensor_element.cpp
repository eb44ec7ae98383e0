// expect: tessera::dist_tensor: the element type has no comm::dtype
#include <tessera/tensor/dist_tensor.hpp>
struct opaque { int x; };
using M = tessera::mesh<tessera::axis<"x", 2>>;
using L = tessera::layout_t<M, 1, tessera::dim<0, "x">>;
int main() { return sizeof(tessera::dist_tensor<opaque, L>) > 0 ? 0 : 1; }
