// The executor on the threads backend: one training step of a toy MLP with every
// generator schedule gives the gradients of running the stages in sequence on one rank.
#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <tessera/comm/threads.hpp>
#include <tessera/pipeline/executor.hpp>
#include <tessera/pipeline/generators.hpp>
#include <tessera/pipeline/lower.hpp>
#include <vector>

#include "toy_mlp.hpp"

using namespace tessera::pipeline;
namespace comm = tessera::comm;

#include "failure.hpp"  // tests/support

namespace {

using testing_support::has;

template <class F>
std::string failure_of(F f) {
  return testing_support::failure_of<tessera::error>(f);
}

std::vector<std::size_t> sizes_of(const toy::config& c) {
  return std::vector<std::size_t>(static_cast<std::size_t>(c.stages) + 1, c.per_mb());
}

/// Runs `s` (compute only) lowered on p threads; checks every rank's gradients, outputs,
/// call counts, and that only cross-rank boundaries sent anything.
void check_schedule(const schedule& compute, const std::string& name) {
  const int p = compute.ranks;
  toy::config c;
  c.stages = compute.stages;
  c.microbatches = compute.microbatches;
  std::vector<float> want_out;
  const toy::mlp want = toy::sequential(c, &want_out);
  const executor ex(lower(compute), sizes_of(c));
  const std::vector<float> x = toy::batch_input(c);
  std::vector<float> out(c.batch(), 0.0f);
  std::vector<std::string> problems;
  std::vector<run_stats> stats(static_cast<std::size_t>(p));
  // Stages whose weight gradients the schedule accumulates in microbatch order 0..m-1
  // must match the reference exactly; the others within the rounding bound.
  std::vector<int> last_mb(static_cast<std::size_t>(c.stages), -1);
  std::vector<char> in_order(static_cast<std::size_t>(c.stages), 1);
  for (const auto& list : compute.actions)
    for (const action& a : list)
      if (a.kind == op::B || a.kind == op::W) {
        const auto si = static_cast<std::size_t>(a.stage);
        in_order[si] = in_order[si] && a.mb == last_mb[si] + 1;
        last_mb[si] = a.mb;
      }
  std::mutex m;
  comm::run_threads(p, [&](comm::threads_communicator& cm) {
    toy::mlp mine(c);
    stats[static_cast<std::size_t>(cm.rank())] = ex.run(cm, mine, x, out);
    std::lock_guard<std::mutex> lock(m);
    int local = 0;
    for (int st = 0; st < c.stages; ++st) {
      if (compute.rank_of(st) != cm.rank()) continue;
      ++local;
      std::string why;
      if (!toy::same_grads(mine, want, st, &why, in_order[static_cast<std::size_t>(st)] != 0)) problems.push_back(why);
    }
    if (mine.calls_f != local * c.microbatches || mine.calls_i != local * c.microbatches ||
        mine.calls_w != local * c.microbatches)
      problems.push_back("rank " + std::to_string(cm.rank()) + ": wrong number of callback calls");
    if (!mine.x_saved.empty() || !mine.dz_saved.empty() || !mine.y_saved.empty())
      problems.push_back("rank " + std::to_string(cm.rank()) + ": a forward without its backward");
  });
  INFO(name, " p=", p, " stages=", c.stages, " m=", c.microbatches);
  for (const auto& why : problems) CHECK_MESSAGE(false, why);
  // The forward is the same arithmetic on the same values: outputs are bit-identical.
  CHECK(out == want_out);
  int crossing = 0;
  for (int st = 0; st + 1 < c.stages; ++st) crossing += compute.rank_of(st) != compute.rank_of(st + 1);
  int sends = 0, recvs = 0;
  std::size_t floats = 0;
  for (const auto& st : stats) {
    sends += st.sends;
    recvs += st.recvs;
    floats += st.floats_sent;
  }
  CHECK(sends == 2 * crossing * c.microbatches);
  CHECK(recvs == sends);
  CHECK(floats == static_cast<std::size_t>(sends) * c.per_mb());
}

}  // namespace

TEST_CASE("executor: every schedule gives the sequential gradients (threads)") {
  struct shape {
    int p, v, m;
  };
  const shape shapes[] = {{2, 1, 1}, {2, 1, 3}, {2, 2, 4}, {3, 2, 5}, {4, 1, 8}, {4, 2, 6}};
  for (schedule_kind k : all_schedule_kinds)
    for (const shape& sh : shapes) {
      const bool v_shape = k == schedule_kind::zbv_zero_bubble || k == schedule_kind::dualpipe_v;
      const int v = v_shape ? 2 : sh.v;
      check_schedule(generate(k, sh.p, v, sh.m), std::string(schedule_name(k)));
    }
}

TEST_CASE("executor: one rank runs every stage locally, without messages") {
  toy::config c;
  c.stages = 3;
  c.microbatches = 2;
  const toy::mlp want = toy::sequential(c);
  const executor ex(lower(gpipe(1, 3, 2)), sizes_of(c));
  comm::run_threads(1, [&](comm::threads_communicator& cm) {
    toy::mlp mine(c);
    const run_stats st = ex.run(cm, mine, toy::batch_input(c), {});
    CHECK(st.sends == 0);
    CHECK(st.forwards == 6);
    CHECK(st.backward_weights == 6);
    for (int s = 0; s < 3; ++s) CHECK(toy::same_grads(mine, want, s));
  });
}

TEST_CASE("executor: bad schedules and sizes are reported with rank, step and action") {
  toy::config c;
  c.stages = 2;
  c.microbatches = 2;
  // Not lowered: stage 0 feeds stage 1 on another rank with no SEND/RECV.
  CHECK(has(failure_of([&] { executor ex(one_f_one_b(2, 2), sizes_of(c)); }), "not lowered"));
  // Wrong number of boundary sizes.
  CHECK(has(failure_of([&] { executor ex(lower(one_f_one_b(2, 2)), {6, 6}); }), "expected stages + 1 = 3"));
  // An order the verifier rejects: 1F0 before 0F0 on the one rank.
  schedule bad = gpipe(1, 2, 2);
  auto& list = bad.actions[0];
  for (std::size_t i = 0; i + 1 < list.size(); ++i)
    if (list[i] == action{op::F, 0, 0}) std::swap(list[i], list[i + 1]);
  const std::string why = failure_of([&] { executor ex(bad, sizes_of(c)); });
  CHECK(has(why, "invalid schedule"));
  CHECK(has(why, "rank 0"));
  CHECK(has(why, "1F0"));
  // A batch of the wrong size, on the rank of stage 0; a communicator of the wrong size.
  const executor ex(lower(one_f_one_b(2, 2)), sizes_of(c));
  const std::vector<float> x(5, 0.0f);
  const std::string batch = failure_of([&] {
    comm::run_threads(2, [&](comm::threads_communicator& cm) {
      toy::mlp mine(c);
      ex.run(cm, mine, x, {});
    });
  });
  CHECK(has(batch, "rank 0: the batch input has 5 floats, expected microbatches * boundary(0) = 12"));
  const std::string ranks = failure_of([&] {
    comm::run_threads(3, [&](comm::threads_communicator& cm) {
      toy::mlp mine(c);
      ex.run(cm, mine, toy::batch_input(c), {});
    });
  });
  CHECK(has(ranks, "the communicator has 3 ranks, the schedule 2"));
  // A size the peers disagree on: rank 1 expects a larger activation than rank 0 sends.
  auto big = sizes_of(c);
  big[1] = 7;
  const executor ex_big(lower(one_f_one_b(2, 2)), big);
  const std::string mismatch = failure_of([&] {
    comm::run_threads(2, [&](comm::threads_communicator& cm) {
      toy::mlp mine(c);
      (cm.rank() == 0 ? ex : ex_big).run(cm, mine, toy::batch_input(c), {});
    });
  });
  CHECK(has(mismatch, "tessera::pipeline::executor: rank "));
  // Both ranks see the mismatch; run_threads reports whichever threw first: the receiver
  // (RECV_F) or the sender (SEND_F, or WAIT_SEND_F when it completes its async send).
  CHECK((has(mismatch, "RECV_F") || has(mismatch, "SEND_F")));
  CHECK(has(mismatch, "does not match"));
}

namespace {
/// The toy MLP with FSDP hooks that record when they run.
struct mlp_with_hooks : toy::mlp {
  using toy::mlp::mlp;
  std::vector<int> unshards = std::vector<int>(8, 0), reshards = std::vector<int>(8, 0), reduces = std::vector<int>(8, 0);
  std::vector<int> w_at_reduce = std::vector<int>(8, -1);
  void unshard(int s) { ++unshards[static_cast<std::size_t>(s)]; }
  void reshard(int s) { ++reshards[static_cast<std::size_t>(s)]; }
  void reduce_grad(int s) {
    ++reduces[static_cast<std::size_t>(s)];
    w_at_reduce[static_cast<std::size_t>(s)] = calls_w;
  }
};
}  // namespace

TEST_CASE("executor: FSDP actions call the stage's hooks, REDUCE_GRAD after its last backward") {
  const schedule s = zbv_zero_bubble(2, 3);
  toy::config c;
  c.stages = s.stages;
  c.microbatches = s.microbatches;
  const toy::mlp want = toy::sequential(c);
  lower_options opt;
  opt.fsdp = true;
  const executor ex(lower(s, opt), sizes_of(c));
  std::vector<std::string> problems;
  std::mutex m;
  comm::run_threads(2, [&](comm::threads_communicator& cm) {
    mlp_with_hooks mine(c);
    ex.run(cm, mine, toy::batch_input(c), {});
    std::lock_guard<std::mutex> lock(m);
    for (int st = 0; st < c.stages; ++st) {
      const auto si = static_cast<std::size_t>(st);
      const int n = s.rank_of(st) == cm.rank() ? 1 : 0;
      if (mine.unshards[si] != n || mine.reshards[si] != n || mine.reduces[si] != n)
        problems.push_back("stage " + std::to_string(st) + ": hooks not called once on its rank");
      if (n == 1 && !toy::same_grads(mine, want, st)) problems.push_back("stage " + std::to_string(st) + ": gradients");
    }
    // The rank's last REDUCE_GRAD comes after all its W: every microbatch of both stages.
    int last = 0;
    for (int v : mine.w_at_reduce) last = v > last ? v : last;
    if (last != 2 * c.microbatches) problems.push_back("a REDUCE_GRAD before the last backward");
  });
  for (const auto& why : problems) CHECK_MESSAGE(false, why);
  CHECK(problems.empty());
}
