// expect: source and target layouts describe tensors of different rank
// max-errors: 1
#include <tessera/plan/plan.hpp>
#include <tessera/plan/plan.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using P = plan_t<layout_t<M, 2, shard<0>, replicate>, layout_t<M, 3, shard<0>, replicate>>;
constexpr int n = P::size;
int main() {}
