// expect: tessera::bench::transition: From and To must be tessera layouts
#include <tessera/bench/transition.hpp>

using M = tessera::mesh<tessera::axis<"dp", 2>>;
using L = tessera::layout_t<M, 1, tessera::shard<0>>;
static auto* b = tessera::bench::transition<L, int>("not a layout", {8});
int main() { return b != nullptr; }
