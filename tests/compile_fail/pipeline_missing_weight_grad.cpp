// expect: invalid_schedule_at<0, -1, 0, tessera::pipeline::op::W, 1, tessera::pipeline::problem::missing
// Microbatch 1's input gradient (0I1) runs but its weight gradient (0W1) never does.
#include <string_view>
#include <tessera/pipeline/checked.hpp>

constexpr auto table = [] {
  constexpr std::string_view rows[] = {"0F0,0F1,0I0,0W0,0I1"};
  return tessera::pipeline::from_table(rows).value;
};
using sched = tessera::pipeline::checked_schedule<table>;
int main() { return sched::ranks; }
