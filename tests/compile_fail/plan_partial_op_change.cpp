// expect: partial(op1) -> partial(op2) on one mesh axis is not a transition
// expect-also: text<'d', 'p'>
// max-errors: 1
#include <tessera/plan/plan.hpp>
#include <tessera/plan/plan.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
using P = plan_t<layout_t<M, 2, partial<reduce::sum>, replicate>, layout_t<M, 2, partial<reduce::max>, replicate>>;
constexpr int n = P::size;
int main() {}
