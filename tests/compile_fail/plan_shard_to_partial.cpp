// expect: shard -> partial on one mesh axis is not a transition
// expect-also: text<'d', 'p'>
// max-errors: 1
#include <tessera/plan/plan.hpp>
#include <tessera/plan/plan.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using P = plan_t<layout_t<M, 2, shard<0>, replicate>, layout_t<M, 2, partial<>, replicate>>;
constexpr int n = P::size;
int main() {}
