// tessera/pipeline/detail/verify_run.hpp: the verifier's dynamic phases (5 and 6).
//
// Phase 5 runs the schedule as the executor would with blocking point-to-point calls;
// phase 6 explains why ranks are left with actions they never reached. Both rely on
// phases 1-4 (detail/verify_counts.hpp) having passed: every stage, microbatch and rank
// is in range and every action that a dependency names exists exactly once.
#pragma once

#include <cstddef>
#include <tessera/pipeline/detail/verify_counts.hpp>
#include <tessera/pipeline/simulate.hpp>
#include <vector>

namespace tessera::pipeline::detail {

/// The state of a blocking run (phase 5), read by the diagnosis (phase 6).
struct blocking_run {
  std::vector<char> done;       ///< per op with a microbatch, per pair: has run ([op][pair], as tally::n)
  std::vector<std::size_t> pc;  ///< per rank: index of its next action

  constexpr explicit blocking_run(const tally& t)
      : done(static_cast<std::size_t>(op_count) * t.pairs(), 0), pc(static_cast<std::size_t>(t.ranks), 0) {}
  constexpr bool is_done(const tally& t, const action& a) const {
    return done[tally::per_op(a.kind, t.pairs()) + t.pair(a.stage, a.mb)] != 0;
  }
  constexpr void mark(const tally& t, const action& a) {
    if (has_microbatch(a.kind)) done[tally::per_op(a.kind, t.pairs()) + t.pair(a.stage, a.mb)] = 1;
  }
  /// The action rank r is at, in `out`; false when its list is finished.
  constexpr bool current(const schedule& s, int r, action& out) const {
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    if (pc[static_cast<std::size_t>(r)] >= list.size()) return false;
    out = list[pc[static_cast<std::size_t>(r)]];
    return true;
  }
};

/// The dependency rule: whether action `a` of rank `r` still waits for an input.
/// F(s, mb) needs F(s-1, mb); B or I(s, mb) needs F(s, mb), then the backward of
/// (s+1, mb); W needs I; SEND_F needs the F it sends, SEND_B the backward it sends. In
/// a lowered schedule an input from another rank is its RECV on this rank instead.
/// Returns true and sets `need` to the first input not yet done; false when `a` can run
/// (RECV, FSDP and WAIT actions need nothing here).
constexpr bool missing_input(const schedule& s, const tally& t, const blocking_run& run, int r, const action& a,
                             action& need) {
  switch (a.kind) {
    case op::F:
      if (a.stage == 0) return false;
      if (t.lowered && s.rank_of(a.stage - 1) != r) need = action{op::RECV_F, a.stage, a.mb};
      else need = action{op::F, a.stage - 1, a.mb};
      return !run.is_done(t, need);
    case op::B:
    case op::I:
      need = action{op::F, a.stage, a.mb};
      if (!run.is_done(t, need)) return true;
      if (a.stage + 1 == t.stages) return false;
      if (t.lowered && s.rank_of(a.stage + 1) != r) need = action{op::RECV_B, a.stage, a.mb};
      else need = action{t.backward_of(a.stage + 1, a.mb), a.stage + 1, a.mb};
      return !run.is_done(t, need);
    case op::W: need = action{op::I, a.stage, a.mb}; return !run.is_done(t, need);
    case op::SEND_F: need = action{op::F, a.stage, a.mb}; return !run.is_done(t, need);
    case op::SEND_B: need = action{t.backward_of(a.stage, a.mb), a.stage, a.mb}; return !run.is_done(t, need);
    default: return false;
  }
}

/// The other end of a SEND/RECV (SEND_F(s) <-> RECV_F(s+1), SEND_B(s) <-> RECV_B(s-1));
/// any other action is returned as it is.
constexpr action peer_of(const action& a) {
  switch (a.kind) {
    case op::SEND_F: return action{op::RECV_F, a.stage + 1, a.mb};
    case op::RECV_F: return action{op::SEND_F, a.stage - 1, a.mb};
    case op::SEND_B: return action{op::RECV_B, a.stage - 1, a.mb};
    case op::RECV_B: return action{op::SEND_B, a.stage + 1, a.mb};
    default: return a;
  }
}

/// Phase 5, blocking execution: runs every rank as far as it can go.
///
/// Requires: check_counts(s, t) passed (phase 4 is independent of this one).
/// Does:     each rank runs its actions in program order. A compute action runs once
///           missing_input() finds nothing missing; a SEND/RECV completes only when the
///           peer's current action is the matching RECV/SEND and the sending side has
///           its data (rendezvous), and then both ranks move on. A rank that cannot
///           move waits until a rank whose progress may unblock it moves (a worklist:
///           each action is tried a bounded number of times).
/// Ensures:  `run` (fresh from blocking_run(t)) says where each rank stopped (pc) and
///           what has run (done). Every rank at the end of its list means the schedule
///           runs to completion. (Filled in place: g++ 12 frees the vectors of a
///           returned blocking_run twice in a constant evaluation.)
constexpr void run_blocking(const schedule& s, const tally& t, blocking_run& run) {
  const auto P = static_cast<std::size_t>(t.ranks);
  std::vector<int> work;
  std::vector<char> queued(P, 1);
  for (int r = t.ranks - 1; r >= 0; --r) work.push_back(r);
  auto wake = [&](int q) {
    if (q >= 0 && q < t.ranks && !queued[static_cast<std::size_t>(q)]) {
      queued[static_cast<std::size_t>(q)] = 1;
      work.push_back(q);
    }
  };
  while (!work.empty()) {
    const int r = work.back();
    work.pop_back();
    queued[static_cast<std::size_t>(r)] = 0;
    action a{};
    while (run.current(s, r, a)) {
      action need{};
      if (is_comm(a.kind)) {
        const bool send = a.kind == op::SEND_F || a.kind == op::SEND_B;
        if (send && missing_input(s, t, run, r, a, need)) break;
        const action want = peer_of(a);
        const int q = s.rank_of(want.stage);
        action at{};
        if (!run.current(s, q, at) || !(at == want)) break;  // the peer is not there yet
        if (!send && missing_input(s, t, run, q, at, need)) break;  // the peer's send must have its data
        run.mark(t, a);
        run.mark(t, at);
        ++run.pc[static_cast<std::size_t>(r)];
        ++run.pc[static_cast<std::size_t>(q)];
        wake(q);
        continue;
      }
      if (is_compute(a.kind) && missing_input(s, t, run, r, a, need)) break;
      run.mark(t, a);
      ++run.pc[static_cast<std::size_t>(r)];
      if (is_compute(a.kind)) {
        const int c = consumer_rank(s, a);
        if (c != r) wake(c);
        if (a.kind == op::F && a.stage + 1 < t.stages) wake(s.rank_of(a.stage + 1));
      }
    }
  }
}

/// Whether rank `rank` runs `need` at step `from` or later.
constexpr bool depends_locally_later(const schedule& s, int rank, std::size_t from, const action& need) {
  const auto& list = s.actions[static_cast<std::size_t>(rank)];
  for (std::size_t j = from; j < list.size(); ++j)
    if (list[j] == need) return true;
  return false;
}

/// Phase 6, diagnosis: why some rank did not finish, or a pass.
///
/// Requires: `run` was filled by run_blocking(s, t, run).
/// Checks:   first, over all stopped ranks in rank order, whether one waits for an input
///           that comes later in its own list (a mistake in that rank's order, reported
///           before any deadlock it causes); then the first stopped rank is a deadlock.
/// Fails:    dependency_order (other: the input, on this rank); deadlock (other: the
///           missing input, or the peer's matching SEND/RECV, with its rank).
/// Ensures:  a pass means every rank ran its whole list.
constexpr verify_result diagnose_stuck(const schedule& s, const tally& t, const blocking_run& run) {
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < t.ranks; ++r) {
      action a{};
      if (!run.current(s, r, a)) continue;
      const int step = static_cast<int>(run.pc[static_cast<std::size_t>(r)]);
      action need{};
      if (missing_input(s, t, run, r, a, need)) {
        const int nr = is_comm(need.kind) || is_compute(need.kind) ? s.rank_of(need.stage) : r;
        if (nr == r && depends_locally_later(s, r, static_cast<std::size_t>(step), need))
          return fail(problem::dependency_order, r, step, a, need, r);
        if (pass == 1) return fail(problem::deadlock, r, step, a, need, nr);
      } else if (pass == 1) {
        const action want = is_comm(a.kind) ? peer_of(a) : action{};
        return fail(problem::deadlock, r, step, a, want, is_comm(a.kind) ? s.rank_of(want.stage) : -1);
      }
    }
  return {};
}

}  // namespace tessera::pipeline::detail
