// expect: the tensor rank must be between 0 and 8
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>>;
using L = layout_t<M, 9, replicate>;
int main() {}
