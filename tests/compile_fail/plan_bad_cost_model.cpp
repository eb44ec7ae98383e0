// expect: Cost::value is not a usable cost model: the constant above
// expect-gcc: Cost = my_links; tessera::cost_model_problem::which constant = tessera::cost_model_problem::GBps; int index = 1
// expect-clang: plan_cost_model_invalid<my_links, tessera::cost_model_problem::GBps, 1>
// max-errors: 1
#include <tessera/plan/plan.hpp>
using namespace tessera;
using M = mesh<axis<"dp", 2>, axis<"tp", 4>>;
// A link profile typed in by hand, with the tp axis's bandwidth left at zero.
struct my_links {
  static constexpr cost_model value = cost_model{}.with_axis(1, 0.0, 0.6);
};
using P = plan_t<layout_t<M, 2, shard<0>, replicate>, layout_t<M, 2, replicate, replicate>, float, extents<64, 64>, my_links>;
constexpr int n = P::size;
int main() {}
