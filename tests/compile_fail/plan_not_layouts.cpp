// expect: tessera::plan_t: the source and target must be tessera layouts
// max-errors: 1
#include <tessera/plan/plan.hpp>
#include <tessera/plan/plan.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using P = plan_t<int, layout_t<M, 2, shard<0>, replicate>>;
constexpr int n = P::size;
int main() {}
