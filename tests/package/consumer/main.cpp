#include <tessera/tessera.hpp>

using M = tessera::mesh<tessera::axis<"dp", 2>, tessera::axis<"tp", 2>>;
using P = tessera::plan_t<tessera::layout_t<M, 2, tessera::shard<0>, tessera::replicate>,
                          tessera::layout_t<M, 2, tessera::replicate, tessera::shard<1>>>;
int main() { return P::size > 0 ? 0 : 1; }
