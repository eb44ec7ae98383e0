// expect: invalid_schedule_at<1, 0, 1, tessera::pipeline::op::B, 0, tessera::pipeline::problem::dependency_order
// Rank 1 runs the backward of microbatch 0 (step 0) before its forward: rejected at
// compile time, naming rank 1, step 0, action 1B0 and the problem.
#include <string_view>
#include <tessera/pipeline/checked.hpp>

constexpr auto table = [] {
  constexpr std::string_view rows[] = {"0F0,0B0,0F1,0B1", "1B0,1F0,1F1,1B1"};
  return tessera::pipeline::from_table(rows).value;
};
using sched = tessera::pipeline::checked_schedule<table>;
int main() { return sched::ranks; }
