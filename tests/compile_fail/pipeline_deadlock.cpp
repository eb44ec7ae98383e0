// expect: invalid_schedule_at<0, 3, 0, tessera::pipeline::op::SEND_F, 1, tessera::pipeline::problem::deadlock
// Criss-crossed blocking sends (as in pytorch#127332): rank 0 sends microbatch 1's
// activation while rank 1 sends microbatch 0's gradient, and each waits for the other's
// recv. With blocking send/recv no rank can move: rejected when the program compiles.
#include <string_view>
#include <tessera/pipeline/checked.hpp>

constexpr auto lowered = [] {
  constexpr std::string_view rows[] = {
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1",
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1"};
  return tessera::pipeline::from_table(rows).value;
};
using sched = tessera::pipeline::checked_schedule<lowered>;
int main() { return sched::ranks; }
