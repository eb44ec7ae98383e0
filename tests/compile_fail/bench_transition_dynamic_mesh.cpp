// expect: tessera::bench::transition: the layouts' mesh has a dynamic axis
#include <tessera/bench/transition.hpp>

using M = tessera::mesh<tessera::axis<"dp">>;
using S = tessera::layout_t<M, 1, tessera::shard<0>>;
using R = tessera::layout_t<M, 1, tessera::replicate>;
static auto* b = tessera::bench::transition<S, R>("dynamic mesh", {8});
int main() { return b != nullptr; }
