// Run-time verifier tests: messages name the rank, the step and the action.
#include <doctest/doctest.h>

#include <string>
#include <tessera/pipeline/pipeline.hpp>

using namespace tessera::pipeline;

TEST_CASE("verify: messages name rank, step and action") {
  SUBCASE("dependency order") {
    const schedule s = read_csv("0F0,0B0,0F1,0B1\n1B0,1F0,1F1,1B1\n");
    const verify_result r = verify(s);
    CHECK(r.what == problem::dependency_order);
    CHECK(r.rank == 1);
    CHECK(r.step == 0);
    CHECK(r.act == action{op::B, 1, 0});
    CHECK(r.message() == "rank 1, step 0, 1B0: needs 1F0, which comes later on the same rank");
  }
  SUBCASE("deadlock under blocking send/recv") {
    const schedule s = read_csv(
        "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
        "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n");
    const verify_result r = verify(s);
    CHECK(r.what == problem::deadlock);
    CHECK(r.rank == 0);
    CHECK(r.step == 3);
    CHECK(r.message() == "rank 0, step 3, 0SEND_F1: deadlock: waits for 1RECV_F1 on rank 1, and no rank can make progress");
  }
  SUBCASE("compute-level cycle across ranks") {
    // Rank 0 waits for 1B1 before 0B0... rank 1 waits for 0F1 which comes after 0B0.
    const schedule s = read_csv("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
    const verify_result r = verify(s);
    CHECK(r.what == problem::deadlock);
    CHECK(r.message().find("rank 0, step 1, 0B0") == 0);
  }
  SUBCASE("missing recv") {
    const schedule s = read_csv("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n");
    const verify_result r = verify(s);
    CHECK(r.what == problem::missing);
    CHECK(r.act == action{op::RECV_F, 1, 0});
    CHECK(r.message() == "rank 1 never runs 1RECV_F0 (stage 1, microbatch 0)");
  }
  SUBCASE("out of range and wrong rank") {
    CHECK(verify(read_csv("0F0,0B0,0F5\n")).what == problem::missing);  // m is inferred as 6
    schedule s = generate(schedule_kind::gpipe, 2, 1, 2);
    s.actions[0].push_back(action{op::F, 0, 7});
    CHECK(verify(s).what == problem::microbatch_out_of_range);
    s.actions[0].back() = action{op::F, 1, 0};
    const verify_result r = verify(s);
    CHECK(r.what == problem::wrong_rank);
    CHECK(r.other_rank == 1);
  }
}

TEST_CASE("lowering orders messages so that blocking send/recv cannot deadlock") {
  // A naive lowering (send right after the producer, recv right before the consumer)
  // of 1F1B criss-crosses; ours does not.
  for (int p : {2, 4, 8})
    for (int m : {1, 2, 3, 8, 13}) {
      const schedule s = one_f_one_b(p, m);
      schedule naive = make_empty(p, p, m, placement::loop);
      for (int r = 0; r < p; ++r)
        for (const action& a : s.actions[static_cast<std::size_t>(r)]) {
          auto& out = naive.actions[static_cast<std::size_t>(r)];
          if (a.kind == op::F && r > 0) out.push_back({op::RECV_F, a.stage, a.mb});
          if (a.kind == op::B && r + 1 < p) out.push_back({op::RECV_B, a.stage, a.mb});
          out.push_back(a);
          if (a.kind == op::F && r + 1 < p) out.push_back({op::SEND_F, a.stage, a.mb});
          if (a.kind == op::B && r > 0) out.push_back({op::SEND_B, a.stage, a.mb});
        }
      INFO("p=" << p << " m=" << m);
      if (m > 1 && p > 1) CHECK(verify(naive).what == problem::deadlock);
      CHECK(verify(lower(s)).ok);
    }
}

TEST_CASE("verify: each problem's message") {
  // One broken schedule per problem, with the exact sentence users see; the verifier's
  // phases (detail/verify_counts.hpp, verify_run.hpp) must keep every one of them.
  auto message = [](const schedule& s) { return std::string(verify(s).message()); };
  SUBCASE("sizes and single actions") {
    schedule empty = generate(schedule_kind::gpipe, 2, 1, 2);
    empty.microbatches = 0;
    CHECK(verify(empty).what == problem::bad_shape);
    CHECK(message(empty) == "schedule has no ranks, stages or microbatches, or sizes that disagree");
    CHECK(message(read_csv("0F0,0SEND_F0,0RECV_B0,0B0\n0F0\n")) ==
          "rank 0, step 1, 0SEND_F0: stage (or the stage it talks to) is out of range");
    schedule s = generate(schedule_kind::gpipe, 2, 1, 2);
    s.actions[0].push_back(action{op::F, 0, 7});
    CHECK(message(s) == "rank 0, step 4, 0F7: microbatch is out of range");
    s.actions[0].back() = action{op::F, 1, 0};
    CHECK(message(s) == "rank 0, step 4, 1F0: stage 1 runs on rank 1, not here");
    schedule local = make_empty(1, 2, 1, placement::loop);
    local.actions[0] = {{op::F, 0, 0}, {op::SEND_F, 0, 0}, {op::F, 1, 0}, {op::B, 1, 0}, {op::B, 0, 0}};
    CHECK(verify(local).what == problem::local_transfer);
    CHECK(message(local) == "rank 0, step 1, 0SEND_F0: both stages are on this rank; pass the tensor locally, with no send/recv");
    CHECK(message(read_csv("0F0,0B0,0F0,0B0\n")) == "rank 0, step 2, 0F0: appears twice");
  }
  SUBCASE("counts") {
    CHECK(message(read_csv("0F0,0B0,0I0,0W0\n")) == "rank 0, step 2, 0I0: stage 0 microbatch 0 has both B and I/W");
    CHECK(message(read_csv("0F0,0B0\n1F0,1B0,1SEND_B0\n")) == "rank 0 never runs 0SEND_F0 (stage 0, microbatch 0)");
  }
  SUBCASE("FSDP and WAIT order") {
    CHECK(message(read_csv("0UNSHARD,0F0,0RESHARD,0B0\n")) ==
          "rank 0, step 3, 0B0: stage 0 is resharded here; put 0UNSHARD before it");
    CHECK(message(read_csv("0F0,0REDUCE_GRAD,0B0\n")) ==
          "rank 0, step 1, 0REDUCE_GRAD: REDUCE_GRAD before the last backward of stage 0");
    CHECK(message(read_csv("0F0,0B0,0WAIT_REDUCE_GRAD\n")) ==
          "rank 0, step 2, 0WAIT_REDUCE_GRAD: waits for 0REDUCE_GRAD, which has not run on this rank");
    CHECK(message(read_csv("0F0,0WAIT_SEND_F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n")) ==
          "rank 0, step 1, 0WAIT_SEND_F0: waits for 0SEND_F0, which has not run on this rank");
    CHECK(verify(read_csv("0UNSHARD,0F0,0B0,0RESHARD,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n")).ok);
  }
}
