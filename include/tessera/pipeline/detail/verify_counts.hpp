// tessera/pipeline/detail/verify_counts.hpp: the verifier's static phases (1 to 4).
//
// Phases 1-4 of verify() (tessera/pipeline/verify.hpp) read each rank's list in program
// order without running it: the schedule's sizes, every action on its own, how many of
// each action there are, and the order of FSDP and WAIT actions on each rank. Each phase
// returns a passing verify_result (`ok`) or the first problem it finds; verify() runs
// them in order and stops at the first failure, so each phase may rely on what the
// phases before it ensure ("Requires"). Phases 5-6 (detail/verify_run.hpp) run the
// schedule.
#pragma once

#include <cstddef>
#include <tessera/pipeline/detail/verify_text.hpp>
#include <tessera/pipeline/schedule.hpp>
#include <vector>

namespace tessera::pipeline::detail {

/// What phase 2 counts and the later phases read: how often each action occurs.
/// Filled by check_actions(); read-only afterwards.
struct tally {
  int stages = 0, microbatches = 0, ranks = 0;
  bool lowered = false;           ///< the schedule has SEND/RECV actions
  /// Per op with a microbatch, per (stage, mb) pair: [op][pair], one vector (an array of
  /// vectors is not destroyed element by element in nvcc 13's constant evaluation, which
  /// then reports their allocations as leaked and refuses a user's schedule table)
  std::vector<int> n;
  std::vector<int> stage_ops;  ///< per (stage, op) for the ops without a microbatch

  constexpr explicit tally(const schedule& s)
      : stages(s.stages), microbatches(s.microbatches), ranks(s.ranks),
        n(static_cast<std::size_t>(op_count) * pairs(), 0),
        stage_ops(static_cast<std::size_t>(s.stages) * op_count, 0) {}
  constexpr std::size_t pairs() const {
    return static_cast<std::size_t>(stages) * static_cast<std::size_t>(microbatches);
  }
  /// Index of (stage, microbatch) in the per-pair arrays.
  constexpr std::size_t pair(int st, int mb) const {
    return static_cast<std::size_t>(st) * static_cast<std::size_t>(microbatches) + static_cast<std::size_t>(mb);
  }
  constexpr int& count(op k, int st, int mb) { return n[per_op(k, pairs()) + pair(st, mb)]; }
  constexpr int count(op k, int st, int mb) const { return n[per_op(k, pairs()) + pair(st, mb)]; }
  /// Where op k's run of `size` entries starts in a per-op, per-pair vector.
  static constexpr std::size_t per_op(op k, std::size_t size) { return static_cast<std::size_t>(k) * size; }
  constexpr int& stage_count(op k, int st) {
    return stage_ops[static_cast<std::size_t>(st) * op_count + static_cast<std::size_t>(k)];
  }
  constexpr int stage_count(op k, int st) const {
    return stage_ops[static_cast<std::size_t>(st) * op_count + static_cast<std::size_t>(k)];
  }
  /// The backward that produces the input gradient of (st, mb): B, or I when it is split.
  constexpr op backward_of(int st, int mb) const { return count(op::B, st, mb) ? op::B : op::I; }
};

/// The step at which rank `rank` runs `a`, or -1.
constexpr int find_step(const schedule& s, int rank, const action& a) {
  if (rank < 0) return -1;
  const auto& list = s.actions[static_cast<std::size_t>(rank)];
  for (std::size_t j = 0; j < list.size(); ++j)
    if (list[j] == a) return static_cast<int>(j);
  return -1;
}

/// Phase 1, sizes: the schedule's shape is consistent.
///
/// Requires: nothing.
/// Checks:   at least one rank, stage and microbatch; one action list per rank and one
///           rank per stage; every stage's rank in [0, ranks).
/// Fails:    problem::bad_shape; problem::missing (action F of the stage, no rank) when
///           a stage's rank is out of range.
/// Ensures:  s.rank_of(st) is a valid rank for every stage st.
constexpr verify_result check_sizes(const schedule& s) {
  const int S = s.stages, M = s.microbatches, P = s.ranks;
  if (P < 1 || S < 1 || M < 1 || static_cast<int>(s.actions.size()) != P ||
      static_cast<int>(s.stage_rank.size()) != S)
    return fail(problem::bad_shape, -1, -1, {}, {}, -1);
  for (int st = 0; st < S; ++st)
    if (s.rank_of(st) < 0 || s.rank_of(st) >= P) return fail(problem::missing, -1, -1, action{op::F, st, 0}, {}, -1);
  return {};
}

/// Phase 2, actions one by one: each action is in range and on its rank; counts them.
///
/// Requires: check_sizes(s) passed; `t` is freshly built from `s`.
/// Checks:   stage in range; microbatch in range (ops that have one); the action's stage
///           runs on this rank; a SEND/RECV talks to a stage that exists, on another
///           rank; no action with a microbatch, and no REDUCE_GRAD, appears twice.
/// Fails:    stage_out_of_range, microbatch_out_of_range, wrong_rank (other_rank: the
///           stage's rank), local_transfer, duplicate; at the first offending action in
///           rank order, then program order.
/// Ensures:  t.count(k, st, mb) <= 1 for every op k with a microbatch, t.stage_count
///           holds the FSDP ops per stage, t.lowered says whether any SEND/RECV exists.
constexpr verify_result check_actions(const schedule& s, tally& t) {
  for (int r = 0; r < t.ranks; ++r) {
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const action a = list[k];
      const int step = static_cast<int>(k);
      if (a.stage < 0 || a.stage >= t.stages) return fail(problem::stage_out_of_range, r, step, a, {}, -1);
      if (has_microbatch(a.kind) && (a.mb < 0 || a.mb >= t.microbatches))
        return fail(problem::microbatch_out_of_range, r, step, a, {}, -1);
      if (s.rank_of(a.stage) != r) return fail(problem::wrong_rank, r, step, a, {}, s.rank_of(a.stage));
      if (is_comm(a.kind)) {
        t.lowered = true;
        const int peer_stage = (a.kind == op::SEND_F || a.kind == op::RECV_B) ? a.stage + 1 : a.stage - 1;
        if (peer_stage < 0 || peer_stage >= t.stages) return fail(problem::stage_out_of_range, r, step, a, {}, -1);
        if (s.rank_of(peer_stage) == r) return fail(problem::local_transfer, r, step, a, {}, r);
      }
      if (has_microbatch(a.kind)) {
        if (++t.count(a.kind, a.stage, a.mb) > 1) return fail(problem::duplicate, r, step, a, {}, -1);
      } else if (++t.stage_count(a.kind, a.stage) > 1 && a.kind == op::REDUCE_GRAD) {
        return fail(problem::duplicate, r, step, a, {}, -1);
      }
    }
  }
  return {};
}

/// Phase 3, counts and send/recv matching: every (stage, microbatch) is complete.
///
/// Requires: check_actions(s, t) passed.
/// Checks:   per pair one F, and either one B or one I and one W (not both forms); in a
///           lowered schedule, for each pair whose next (previous) stage is on another
///           rank, one SEND_F (SEND_B) here and the matching RECV_F (RECV_B) there.
/// Fails:    missing (step -1; rank: where the absent action belongs), mixed_backward
///           (the I or W that conflicts with B); pairs in stage-major order, F first.
/// Ensures:  every compute action that the dependencies of phase 5 name exists exactly
///           once, and every cross-rank transfer has both ends.
constexpr verify_result check_counts(const schedule& s, const tally& t) {
  for (int st = 0; st < t.stages; ++st)
    for (int mb = 0; mb < t.microbatches; ++mb) {
      const int home = s.rank_of(st);
      const int f = t.count(op::F, st, mb), b = t.count(op::B, st, mb);
      const int i = t.count(op::I, st, mb), w = t.count(op::W, st, mb);
      if (f == 0) return fail(problem::missing, home, -1, action{op::F, st, mb}, {}, -1);
      if (b == 0 && i == 0) return fail(problem::missing, home, -1, action{op::B, st, mb}, {}, -1);
      if (b == 1 && (i + w) > 0) {
        const action a{i ? op::I : op::W, st, mb};
        return fail(problem::mixed_backward, home, find_step(s, home, a), a, action{op::B, st, mb}, home);
      }
      if (i == 1 && w == 0) return fail(problem::missing, home, -1, action{op::W, st, mb}, {}, -1);
      if (w == 1 && i == 0) return fail(problem::missing, home, -1, action{op::I, st, mb}, {}, -1);
      if (!t.lowered) continue;
      if (st + 1 < t.stages && s.rank_of(st + 1) != home) {
        if (t.count(op::SEND_F, st, mb) == 0) return fail(problem::missing, home, -1, action{op::SEND_F, st, mb}, {}, -1);
        if (t.count(op::RECV_F, st + 1, mb) == 0)
          return fail(problem::missing, s.rank_of(st + 1), -1, action{op::RECV_F, st + 1, mb}, {}, -1);
      }
      if (st > 0 && s.rank_of(st - 1) != home) {
        if (t.count(op::SEND_B, st, mb) == 0) return fail(problem::missing, home, -1, action{op::SEND_B, st, mb}, {}, -1);
        if (t.count(op::RECV_B, st - 1, mb) == 0)
          return fail(problem::missing, s.rank_of(st - 1), -1, action{op::RECV_B, st - 1, mb}, {}, -1);
      }
    }
  return {};
}

/// Phase 4, FSDP and WAIT order: each rank's list, read in program order.
///
/// Requires: check_counts(s, t) passed.
/// Checks:   a stage with UNSHARD actions computes only between an UNSHARD and the next
///           RESHARD (a stage without any is always unsharded); its REDUCE_GRAD comes
///           after its last B or W; WAIT_REDUCE_GRAD after the REDUCE_GRAD, WAIT_SEND_F
///           (WAIT_SEND_B) after the SEND_F (SEND_B) of the same stage and microbatch.
/// Fails:    fsdp_order (other: the UNSHARD to put first; none for an early
///           REDUCE_GRAD), wait_order (other: the operation waited for).
/// Ensures:  nothing the later phases read; they ignore FSDP and WAIT actions.
constexpr verify_result check_fsdp_and_waits(const schedule& s, const tally& t) {
  const auto S = static_cast<std::size_t>(t.stages);
  std::vector<int> remaining_bw(S, 0);  // B and W actions of the stage not yet passed
  for (int st = 0; st < t.stages; ++st)
    for (int mb = 0; mb < t.microbatches; ++mb)
      remaining_bw[static_cast<std::size_t>(st)] += t.count(op::B, st, mb) + t.count(op::W, st, mb);
  std::vector<char> unsharded(S, 0), reduced(S, 0);
  std::vector<char> sent(t.pairs() * 2, 0);  // per pair: SEND_F, SEND_B passed
  for (int st = 0; st < t.stages; ++st) unsharded[static_cast<std::size_t>(st)] = t.stage_count(op::UNSHARD, st) == 0;
  for (int r = 0; r < t.ranks; ++r) {
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const action a = list[k];
      const auto st = static_cast<std::size_t>(a.stage);
      const int step = static_cast<int>(k);
      switch (a.kind) {
        case op::UNSHARD: unsharded[st] = 1; break;
        case op::RESHARD: unsharded[st] = t.stage_count(op::UNSHARD, a.stage) == 0; break;
        case op::REDUCE_GRAD:
          if (remaining_bw[st] > 0) return fail(problem::fsdp_order, r, step, a, {}, -1);
          reduced[st] = 1;
          break;
        case op::WAIT_REDUCE_GRAD:
          if (!reduced[st]) return fail(problem::wait_order, r, step, a, action{op::REDUCE_GRAD, a.stage, -1}, r);
          break;
        case op::SEND_F: sent[t.pair(a.stage, a.mb) * 2] = 1; break;
        case op::SEND_B: sent[t.pair(a.stage, a.mb) * 2 + 1] = 1; break;
        case op::WAIT_SEND_F:
        case op::WAIT_SEND_B: {
          const bool f = a.kind == op::WAIT_SEND_F;
          if (!sent[t.pair(a.stage, a.mb) * 2 + (f ? 0 : 1)])
            return fail(problem::wait_order, r, step, a, action{f ? op::SEND_F : op::SEND_B, a.stage, a.mb}, r);
          break;
        }
        default:
          if (is_compute(a.kind)) {
            if (!unsharded[st]) return fail(problem::fsdp_order, r, step, a, action{op::UNSHARD, a.stage, -1}, r);
            if (a.kind == op::B || a.kind == op::W) --remaining_bw[st];
          }
      }
    }
  }
  return {};
}

}  // namespace tessera::pipeline::detail
