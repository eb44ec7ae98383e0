// tessera/pipeline/lower.hpp: adds communication (and optionally FSDP) actions.
//
// lower(s) inserts SEND_F/RECV_F for every activation and SEND_B/RECV_B for every
// gradient that crosses ranks (none between stages on one rank). Placement: the schedule
// is simulated under `plan_costs`; every message gets the start time of the action that
// consumes it, and each rank's compute actions and messages are ordered by time, messages
// of equal time in one global order. All ranks therefore meet their messages in one
// order, so the result cannot deadlock even when every send and recv blocks until its
// peer arrives (rendezvous); verify() checks that independently.
//
// With `fsdp`, each rank also gets UNSHARD before the first compute of each of its stages,
// RESHARD after the last, and REDUCE_GRAD after the last backward (B or W).
#pragma once

#include <algorithm>
#include <tessera/pipeline/detail/check.hpp>
#include <tessera/pipeline/schedule.hpp>
#include <tessera/pipeline/simulate.hpp>
#include <vector>

namespace tessera::pipeline {

struct lower_options {
  bool fsdp = false;                   ///< add UNSHARD / RESHARD / REDUCE_GRAD
  costs plan_costs{1, 2, 1, 1, 0};     ///< costs used only to order messages
};

namespace detail {
struct timed_action {
  double key;
  int cls;       // 0: message, 1: compute
  int order;     // global message order or program index
  action a;
};
}  // namespace detail

/// The lowered form of compute-only schedule `s`. Throws schedule_error (a compile error
/// in a constant evaluation) when `s` cannot run at all; verify() it first for details.
constexpr schedule lower(const schedule& s, const lower_options& opt = {}) {
  const simulation sim = simulate(s, opt.plan_costs);
  detail::check(sim.ok, "tessera::pipeline::lower: the schedule cannot run (some rank waits forever); verify() says where");
  const auto P = static_cast<std::size_t>(s.ranks);
  const std::size_t pairs = static_cast<std::size_t>(s.stages) * static_cast<std::size_t>(s.microbatches);
  auto idx = [&](int st, int mb) { return static_cast<std::size_t>(st) * static_cast<std::size_t>(s.microbatches) + static_cast<std::size_t>(mb); };
  std::vector<double> fstart(pairs, 0), bstart(pairs, 0);
  std::vector<std::vector<detail::timed_action>> items(P, std::vector<detail::timed_action>{});
  for (std::size_t r = 0; r < P; ++r)
    for (std::size_t k = 0; k < s.actions[r].size(); ++k) {
      const action a = s.actions[r][k];
      if (!is_compute(a.kind)) continue;
      if (a.kind == op::F) fstart[idx(a.stage, a.mb)] = sim.start[r][k];
      if (a.kind == op::B || a.kind == op::I) bstart[idx(a.stage, a.mb)] = sim.start[r][k];
      items[r].push_back({sim.start[r][k], 1, static_cast<int>(k), a});
    }
  for (std::size_t r = 0; r < P; ++r)
    for (const action& a : s.actions[r]) {
      const int order = static_cast<int>(idx(a.stage, a.mb)) * 2;
      if (a.kind == op::F && a.stage + 1 < s.stages && s.rank_of(a.stage + 1) != static_cast<int>(r)) {
        const double key = fstart[idx(a.stage + 1, a.mb)];
        items[r].push_back({key, 0, order, action{op::SEND_F, a.stage, a.mb}});
        items[static_cast<std::size_t>(s.rank_of(a.stage + 1))].push_back({key, 0, order, action{op::RECV_F, a.stage + 1, a.mb}});
      }
      if ((a.kind == op::B || a.kind == op::I) && a.stage > 0 && s.rank_of(a.stage - 1) != static_cast<int>(r)) {
        const double key = bstart[idx(a.stage - 1, a.mb)];
        items[r].push_back({key, 0, order + 1, action{op::SEND_B, a.stage, a.mb}});
        items[static_cast<std::size_t>(s.rank_of(a.stage - 1))].push_back({key, 0, order + 1, action{op::RECV_B, a.stage - 1, a.mb}});
      }
    }
  schedule out = make_empty(s.ranks, s.stages, s.microbatches, s.place);
  out.stage_rank = s.stage_rank;
  for (std::size_t r = 0; r < P; ++r) {
    auto& it = items[r];
    std::sort(it.begin(), it.end(), [](const detail::timed_action& x, const detail::timed_action& y) {
      if (x.key != y.key) return x.key < y.key;
      if (x.cls != y.cls) return x.cls < y.cls;
      return x.order < y.order;
    });
    auto& list = out.actions[r];
    list.reserve(it.size() + (opt.fsdp ? 3 * static_cast<std::size_t>(s.stages_per_rank()) : 0));
    for (const auto& t : it) list.push_back(t.a);
    if (!opt.fsdp) continue;
    // FSDP: positions of the first/last compute and last backward of each local stage.
    std::vector<action> with;
    with.reserve(list.size() + 3 * static_cast<std::size_t>(s.stages));
    std::vector<int> first(static_cast<std::size_t>(s.stages), -1), last(static_cast<std::size_t>(s.stages), -1),
        last_bw(static_cast<std::size_t>(s.stages), -1);
    for (std::size_t k = 0; k < list.size(); ++k) {
      const action a = list[k];
      if (!is_compute(a.kind)) continue;
      const auto st = static_cast<std::size_t>(a.stage);
      if (first[st] < 0) first[st] = static_cast<int>(k);
      last[st] = static_cast<int>(k);
      if (a.kind == op::B || a.kind == op::W) last_bw[st] = static_cast<int>(k);
    }
    for (std::size_t k = 0; k < list.size(); ++k) {
      const action a = list[k];
      const auto st = static_cast<std::size_t>(a.stage);
      if (is_compute(a.kind) && first[st] == static_cast<int>(k)) with.push_back(action{op::UNSHARD, a.stage, -1});
      with.push_back(a);
      if (is_compute(a.kind) && last_bw[st] == static_cast<int>(k)) with.push_back(action{op::REDUCE_GRAD, a.stage, -1});
      if (is_compute(a.kind) && last[st] == static_cast<int>(k)) with.push_back(action{op::RESHARD, a.stage, -1});
    }
    list.swap(with);
  }
  return out;
}

/// The compute actions of `s` only (drops SEND/RECV, FSDP and WAIT actions).
constexpr schedule compute_only(const schedule& s) {
  schedule out = make_empty(s.ranks, s.stages, s.microbatches, s.place);
  out.stage_rank = s.stage_rank;
  for (std::size_t r = 0; r < s.actions.size(); ++r)
    for (const action& a : s.actions[r])
      if (is_compute(a.kind)) out.actions[r].push_back(a);
  return out;
}

}  // namespace tessera::pipeline
