// Compile-time tests: every static_assert here is checked when this file compiles.
#include <doctest/doctest.h>

#include <string_view>
#include <tessera/pipeline/checked.hpp>
#include <tessera/pipeline/lower.hpp>

namespace {
using namespace tessera::pipeline;

constexpr bool valid_both(schedule_kind k, int p, int v, int m) {
  const schedule s = generate(k, p, v, m);
  return verify(s).ok && verify(lower(s)).ok;
}
// Every generator, verified as generated and as lowered, including m < p and m not a
// multiple of p (PyTorch rejects several of these). One static_assert per case keeps
// each constant evaluation small.
static_assert(valid_both(schedule_kind::gpipe, 4, 1, 3));
static_assert(valid_both(schedule_kind::gpipe, 2, 2, 3));
static_assert(valid_both(schedule_kind::one_f_one_b, 4, 1, 2));
static_assert(valid_both(schedule_kind::one_f_one_b, 3, 1, 5));
static_assert(valid_both(schedule_kind::interleaved_1f1b, 4, 2, 3));
static_assert(valid_both(schedule_kind::interleaved_1f1b, 2, 4, 3));
static_assert(valid_both(schedule_kind::looped_bfs, 2, 2, 3));
static_assert(valid_both(schedule_kind::interleaved_zero_bubble, 2, 2, 3));
static_assert(valid_both(schedule_kind::interleaved_zero_bubble, 3, 1, 2));
static_assert(valid_both(schedule_kind::zbv_zero_bubble, 2, 2, 3));
static_assert(valid_both(schedule_kind::zbv_zero_bubble, 4, 2, 1));
static_assert(valid_both(schedule_kind::dualpipe_v, 2, 2, 1));
static_assert(valid_both(schedule_kind::dualpipe_v, 3, 2, 4));

// Closed forms (F=1, B=2 per chunk): GPipe and 1F1B take (m + p - 1)(F + B).
static_assert(simulate(gpipe(4, 1, 8)).makespan == 33);
static_assert(simulate(one_f_one_b(4, 8)).makespan == 33);
// 1F1B keeps p - r activations on rank r; GPipe keeps all m.
constexpr bool one_f_one_b_memory() {
  const simulation s = simulate(one_f_one_b(4, 8));
  for (int r = 0; r < 4; ++r)
    if (s.peak_activations[static_cast<std::size_t>(r)] != 4 - r) return false;
  return simulate(gpipe(4, 1, 8)).peak_activations[0] == 8;
}
static_assert(one_f_one_b_memory());
// Interleaving shrinks the bubble: with costs per chunk divided by v, interleaved 1F1B
// beats 1F1B; zero bubble beats interleaved 1F1B.
static_assert(simulate(interleaved_1f1b(2, 2, 4), per_chunk({}, 2)).makespan < simulate(one_f_one_b(2, 4)).makespan);
static_assert(simulate(interleaved_zero_bubble(2, 2, 4), per_chunk({}, 2)).makespan <
              simulate(interleaved_1f1b(2, 2, 4), per_chunk({}, 2)).makespan);

// The verifier names problems.
constexpr problem what_of(std::span<const std::string_view> rows) { return verify(from_table(rows).value).what; }
constexpr std::string_view ok_rows[] = {"0F0,0F1,0B0,0B1", "1F0,1B0,1F1,1B1"};
constexpr std::string_view order_rows[] = {"0F0,0B0,0F1,0B1", "1B0,1F0,1F1,1B1"};
constexpr std::string_view dup_rows[] = {"0F0,0F0,0B0", "1F0,1B0"};
constexpr std::string_view missing_rows[] = {"0F0,0F1,0B0", "1F0,1B0,1F1,1B1"};
constexpr std::string_view mixed_rows[] = {"0F0,0B0,0W0"};
constexpr std::string_view wrong_rank_rows[] = {"0F0,0B0,1F0", "1B0"};
constexpr std::string_view local_rows[] = {"0F0,0SEND_F0,1RECV_F0,1F0,1B0,0B0"};
constexpr std::string_view crisscross_rows[] = {"0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1",
                                               "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1"};
constexpr std::string_view fsdp_rows[] = {"0UNSHARD,0F0,0RESHARD,0B0"};
constexpr std::string_view reduce_rows[] = {"0F0,0F1,0B0,0REDUCE_GRAD,0B1"};
static_assert(what_of(ok_rows) == problem::none);
static_assert(what_of(order_rows) == problem::dependency_order);
static_assert(what_of(dup_rows) == problem::duplicate);
static_assert(what_of(missing_rows) == problem::missing);
static_assert(what_of(mixed_rows) == problem::mixed_backward);
static_assert(what_of(wrong_rank_rows) == problem::wrong_rank);
static_assert(what_of(local_rows) == problem::local_transfer);
static_assert(what_of(crisscross_rows) == problem::deadlock);
static_assert(what_of(fsdp_rows) == problem::fsdp_order);
static_assert(what_of(reduce_rows) == problem::fsdp_order);
// The criss-crossed example with each rank's sends after its recvs (what lower() does)
// runs.
constexpr std::string_view fixed_rows[] = {"0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0RECV_B1,0B1",
                                           "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1"};
static_assert(what_of(fixed_rows) == problem::none);

// The compile-time entry points.
constexpr auto gen = [] { return interleaved_1f1b(2, 2, 4); };
using interleaved = checked_schedule<gen>;
static_assert(interleaved::valid && interleaved::ranks == 2 && interleaved::size == 2 * 2 * 4 * 2);
static_assert(verify(interleaved::value()).ok);
using zbv = generated_schedule<schedule_kind::zbv_zero_bubble, 2, 2, 3>;
static_assert(zbv::stages == 4 && zbv::size == 4 * 3 * 3);

// Printing and parsing as PyTorch.
static_assert(format(action{op::SEND_B, 4, 2}).view() == "4SEND_B2");
static_assert(format(action{op::UNSHARD, 1, -1}).view() == "1UNSHARD");
static_assert(parse_cell("(0F3;7B1)OVERLAP_F_B").count == 2);
static_assert(!parse_cell("0X1").ok && !parse_cell("F1").ok && !parse_cell("0F").ok);
}  // namespace

TEST_CASE("pipeline: the static checks above compiled") { CHECK(interleaved::valid); }
