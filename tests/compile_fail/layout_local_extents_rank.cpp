// expect: the extents' rank differs from the layout's tensor rank
#include <tessera/layout/layout.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>>;
using E = local_extents_t<layout_t<M, 1, shard<0>>, extents<4, 4>>;
int main() {}
