// tessera/pipeline/verify.hpp: the constexpr schedule verifier.
//
// verify(s) checks, in this order, and stops at the first problem:
//  1. shape and ranges: stages and microbatches in range, each action on the rank that
//     holds its stage, sends/recvs only between stages on different ranks;
//  2. counts: per (stage, microbatch) one F and either one B or one I and one W; in a
//     lowered schedule, every cross-rank tensor sent once and received once;
//  3. FSDP: compute of a stage only while it is unsharded, REDUCE_GRAD after its last
//     backward; each WAIT_* after the operation it waits for;
//  4. execution under blocking semantics: F(s-1,mb) before F(s,mb), F(s,mb) and
//     B/I(s+1,mb) before B/I(s,mb), I before W; a SEND completes only when the peer is
//     at the matching RECV and vice versa (rendezvous). A rank that can never move is a
//     deadlock, reported with the rank, the step and the action it is stuck at.
#pragma once

#include <string_view>
#include <tessera/pipeline/detail/verify_text.hpp>
#include <tessera/pipeline/simulate.hpp>
#include <tessera/pipeline/schedule.hpp>
#include <vector>

namespace tessera::pipeline {

namespace detail {

struct pair_counts {
  std::vector<int> n[op_count];
  constexpr void init(std::size_t pairs) {
    for (auto& v : n) v.assign(pairs, 0);
  }
};

constexpr bool depends_locally_later(const schedule& s, int rank, std::size_t from, const action& need) {
  const auto& list = s.actions[static_cast<std::size_t>(rank)];
  for (std::size_t j = from; j < list.size(); ++j)
    if (list[j] == need) return true;
  return false;
}

constexpr int find_step(const schedule& s, int rank, const action& a) {
  if (rank < 0) return -1;
  const auto& list = s.actions[static_cast<std::size_t>(rank)];
  for (std::size_t j = 0; j < list.size(); ++j)
    if (list[j] == a) return static_cast<int>(j);
  return -1;
}

}  // namespace detail

/// Checks every rule above. `result.ok` is true for a valid schedule; otherwise
/// `what`, `rank`, `step`, `act` (and `other`, `other_rank` where it applies) locate the
/// problem and `text` says it in words.
constexpr verify_result verify(const schedule& s) {
  using detail::fail;
  const int S = s.stages, M = s.microbatches, P = s.ranks;
  if (P < 1 || S < 1 || M < 1 || static_cast<int>(s.actions.size()) != P ||
      static_cast<int>(s.stage_rank.size()) != S)
    return fail(problem::bad_shape, -1, -1, {}, {}, -1);
  for (int st = 0; st < S; ++st)
    if (s.rank_of(st) < 0 || s.rank_of(st) >= P)
      return fail(problem::missing, -1, -1, action{op::F, st, 0}, {}, -1);
  const std::size_t pairs = static_cast<std::size_t>(S) * static_cast<std::size_t>(M);
  auto idx = [&](int st, int mb) { return static_cast<std::size_t>(st) * static_cast<std::size_t>(M) + static_cast<std::size_t>(mb); };
  detail::pair_counts cnt;
  cnt.init(pairs);
  std::vector<int> stage_ops(static_cast<std::size_t>(S) * op_count, 0);
  bool lowered = false;
  // 1. ranges, ranks, duplicates.
  for (int r = 0; r < P; ++r) {
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const action a = list[k];
      const int step = static_cast<int>(k);
      if (a.stage < 0 || a.stage >= S) return fail(problem::stage_out_of_range, r, step, a, {}, -1);
      if (has_microbatch(a.kind) && (a.mb < 0 || a.mb >= M))
        return fail(problem::microbatch_out_of_range, r, step, a, {}, -1);
      if (s.rank_of(a.stage) != r) return fail(problem::wrong_rank, r, step, a, {}, s.rank_of(a.stage));
      if (is_comm(a.kind)) {
        lowered = true;
        const int peer_stage = (a.kind == op::SEND_F || a.kind == op::RECV_B) ? a.stage + 1 : a.stage - 1;
        if (peer_stage < 0 || peer_stage >= S) return fail(problem::stage_out_of_range, r, step, a, {}, -1);
        if (s.rank_of(peer_stage) == r) return fail(problem::local_transfer, r, step, a, {}, r);
      }
      if (has_microbatch(a.kind)) {
        int& n = cnt.n[static_cast<int>(a.kind)][idx(a.stage, a.mb)];
        if (++n > 1) return fail(problem::duplicate, r, step, a, {}, -1);
      } else {
        ++stage_ops[static_cast<std::size_t>(a.stage) * op_count + static_cast<std::size_t>(a.kind)];
        if (a.kind == op::REDUCE_GRAD && stage_ops[static_cast<std::size_t>(a.stage) * op_count + static_cast<std::size_t>(a.kind)] > 1)
          return fail(problem::duplicate, r, step, a, {}, -1);
      }
    }
  }
  // 2. counts.
  for (int st = 0; st < S; ++st)
    for (int mb = 0; mb < M; ++mb) {
      const std::size_t i = idx(st, mb);
      const int home = s.rank_of(st);
      auto n = [&](op k) { return cnt.n[static_cast<int>(k)][i]; };
      if (n(op::F) == 0) return fail(problem::missing, home, -1, action{op::F, st, mb}, {}, -1);
      if (n(op::B) == 0 && n(op::I) == 0) return fail(problem::missing, home, -1, action{op::B, st, mb}, {}, -1);
      if (n(op::B) == 1 && (n(op::I) + n(op::W)) > 0) {
        const action a{n(op::I) ? op::I : op::W, st, mb};
        return fail(problem::mixed_backward, home, detail::find_step(s, home, a), a, action{op::B, st, mb}, home);
      }
      if (n(op::I) == 1 && n(op::W) == 0) return fail(problem::missing, home, -1, action{op::W, st, mb}, {}, -1);
      if (n(op::W) == 1 && n(op::I) == 0) return fail(problem::missing, home, -1, action{op::I, st, mb}, {}, -1);
      if (lowered) {
        if (st + 1 < S && s.rank_of(st + 1) != home) {
          if (n(op::SEND_F) == 0) return fail(problem::missing, home, -1, action{op::SEND_F, st, mb}, {}, -1);
          if (cnt.n[static_cast<int>(op::RECV_F)][idx(st + 1, mb)] == 0)
            return fail(problem::missing, s.rank_of(st + 1), -1, action{op::RECV_F, st + 1, mb}, {}, -1);
        }
        if (st > 0 && s.rank_of(st - 1) != home) {
          if (n(op::SEND_B) == 0) return fail(problem::missing, home, -1, action{op::SEND_B, st, mb}, {}, -1);
          if (cnt.n[static_cast<int>(op::RECV_B)][idx(st - 1, mb)] == 0)
            return fail(problem::missing, s.rank_of(st - 1), -1, action{op::RECV_B, st - 1, mb}, {}, -1);
        }
      }
    }
  // 3. FSDP and WAIT placement, in program order per rank.
  {
    std::vector<int> remaining_bw(static_cast<std::size_t>(S), 0);
    for (int st = 0; st < S; ++st)
      for (int mb = 0; mb < M; ++mb) remaining_bw[static_cast<std::size_t>(st)] += cnt.n[static_cast<int>(op::B)][idx(st, mb)] + cnt.n[static_cast<int>(op::W)][idx(st, mb)];
    std::vector<char> unsharded(static_cast<std::size_t>(S), 0), reduced(static_cast<std::size_t>(S), 0);
    std::vector<char> sent(pairs * 2, 0);
    for (int st = 0; st < S; ++st)
      unsharded[static_cast<std::size_t>(st)] = stage_ops[static_cast<std::size_t>(st) * op_count + static_cast<int>(op::UNSHARD)] == 0;
    for (int r = 0; r < P; ++r) {
      const auto& list = s.actions[static_cast<std::size_t>(r)];
      for (std::size_t k = 0; k < list.size(); ++k) {
        const action a = list[k];
        const auto st = static_cast<std::size_t>(a.stage);
        const int step = static_cast<int>(k);
        switch (a.kind) {
          case op::UNSHARD: unsharded[st] = 1; break;
          case op::RESHARD: unsharded[st] = stage_ops[st * op_count + static_cast<int>(op::UNSHARD)] == 0; break;
          case op::REDUCE_GRAD:
            if (remaining_bw[st] > 0) return fail(problem::fsdp_order, r, step, a, {}, -1);
            reduced[st] = 1;
            break;
          case op::WAIT_REDUCE_GRAD:
            if (!reduced[st]) return fail(problem::wait_order, r, step, a, action{op::REDUCE_GRAD, a.stage, -1}, r);
            break;
          case op::SEND_F: sent[idx(a.stage, a.mb) * 2] = 1; break;
          case op::SEND_B: sent[idx(a.stage, a.mb) * 2 + 1] = 1; break;
          case op::WAIT_SEND_F:
          case op::WAIT_SEND_B: {
            const bool f = a.kind == op::WAIT_SEND_F;
            if (!sent[idx(a.stage, a.mb) * 2 + (f ? 0 : 1)])
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
  }
  // 4. execution with blocking send/recv.
  std::vector<char> done[op_count];
  for (auto& d : done) d.assign(pairs, 0);
  auto is_done = [&](op k, int st, int mb) { return done[static_cast<int>(k)][idx(st, mb)] != 0; };
  // What a compute action needs, or {false} when it can run. `need` is set to the first
  // missing input.
  auto missing_input = [&](int r, const action& a, action& need) -> bool {
    switch (a.kind) {
      case op::F:
        if (a.stage == 0) return false;
        if (lowered && s.rank_of(a.stage - 1) != r) need = action{op::RECV_F, a.stage, a.mb};
        else need = action{op::F, a.stage - 1, a.mb};
        return !is_done(need.kind, need.stage, need.mb);
      case op::B:
      case op::I:
        need = action{op::F, a.stage, a.mb};
        if (!is_done(op::F, a.stage, a.mb)) return true;
        if (a.stage + 1 == S) return false;
        if (lowered && s.rank_of(a.stage + 1) != r) need = action{op::RECV_B, a.stage, a.mb};
        else need = action{cnt.n[static_cast<int>(op::B)][idx(a.stage + 1, a.mb)] ? op::B : op::I, a.stage + 1, a.mb};
        return !is_done(need.kind, need.stage, need.mb);
      case op::W: need = action{op::I, a.stage, a.mb}; return !is_done(op::I, a.stage, a.mb);
      case op::SEND_F: need = action{op::F, a.stage, a.mb}; return !is_done(op::F, a.stage, a.mb);
      case op::SEND_B:
        need = action{cnt.n[static_cast<int>(op::B)][idx(a.stage, a.mb)] ? op::B : op::I, a.stage, a.mb};
        return !is_done(need.kind, need.stage, need.mb);
      default: return false;
    }
  };
  auto peer_of = [&](const action& a) -> action {  // the matching op on the other side
    switch (a.kind) {
      case op::SEND_F: return action{op::RECV_F, a.stage + 1, a.mb};
      case op::RECV_F: return action{op::SEND_F, a.stage - 1, a.mb};
      case op::SEND_B: return action{op::RECV_B, a.stage - 1, a.mb};
      case op::RECV_B: return action{op::SEND_B, a.stage + 1, a.mb};
      default: return a;
    }
  };
  std::vector<std::size_t> pc(static_cast<std::size_t>(P), 0);
  std::vector<int> work;
  std::vector<char> queued(static_cast<std::size_t>(P), 1);
  for (int r = P - 1; r >= 0; --r) work.push_back(r);
  auto current = [&](int r, action& out) {
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    if (pc[static_cast<std::size_t>(r)] >= list.size()) return false;
    out = list[pc[static_cast<std::size_t>(r)]];
    return true;
  };
  auto wake = [&](int q) {
    if (q >= 0 && q < P && !queued[static_cast<std::size_t>(q)]) {
      queued[static_cast<std::size_t>(q)] = 1;
      work.push_back(q);
    }
  };
  auto mark = [&](const action& a) {
    if (has_microbatch(a.kind)) done[static_cast<int>(a.kind)][idx(a.stage, a.mb)] = 1;
  };
  while (!work.empty()) {
    const int r = work.back();
    work.pop_back();
    queued[static_cast<std::size_t>(r)] = 0;
    action a{};
    while (current(r, a)) {
      action need{};
      if (is_comm(a.kind)) {
        const bool send = a.kind == op::SEND_F || a.kind == op::SEND_B;
        if (send && missing_input(r, a, need)) break;
        const action want = peer_of(a);
        const int q = s.rank_of(want.stage);
        action at{};
        if (!current(q, at) || !(at == want)) break;  // the peer is not there yet
        if (!send) {  // the peer's send must have its data
          action n2{};
          if (missing_input(q, at, n2)) break;
        }
        mark(a);
        mark(at);
        ++pc[static_cast<std::size_t>(r)];
        ++pc[static_cast<std::size_t>(q)];
        wake(q);
        continue;
      }
      if (is_compute(a.kind) && missing_input(r, a, need)) break;
      mark(a);
      ++pc[static_cast<std::size_t>(r)];
      if (is_compute(a.kind)) {
        const int c = detail::consumer_rank(s, a);
        if (c != r) wake(c);
        if (a.kind == op::F && a.stage + 1 < S) wake(s.rank_of(a.stage + 1));
      }
    }
  }
  // 5. diagnosis: an input that comes later on the same rank first, then a deadlock.
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < P; ++r) {
      action a{};
      if (!current(r, a)) continue;
      const int step = static_cast<int>(pc[static_cast<std::size_t>(r)]);
      action need{};
      if (missing_input(r, a, need)) {
        const int nr = is_comm(need.kind) || is_compute(need.kind) ? s.rank_of(need.stage) : r;
        if (nr == r && detail::depends_locally_later(s, r, static_cast<std::size_t>(step), need))
          return fail(problem::dependency_order, r, step, a, need, r);
        if (pass == 1) return fail(problem::deadlock, r, step, a, need, nr);
      } else if (pass == 1) {
        const action want = is_comm(a.kind) ? peer_of(a) : action{};
        return fail(problem::deadlock, r, step, a, want, is_comm(a.kind) ? s.rank_of(want.stage) : -1);
      }
    }
  return verify_result{};
}

}  // namespace tessera::pipeline
