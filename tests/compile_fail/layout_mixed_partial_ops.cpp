// expect: the partial axes of one layout must share one reduce op
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using L = layout_t<M, 2, partial<reduce::sum>, partial<reduce::max>>;
int main() {}
