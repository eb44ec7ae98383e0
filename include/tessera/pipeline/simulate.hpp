// tessera/pipeline/simulate.hpp: timing of a schedule under per-action costs.
//
// Each rank runs its compute actions in program order, each as early as its inputs allow
// (F(s-1,mb) before F(s,mb); F(s,mb) and B/I(s+1,mb) before B/I(s,mb); I before W); a
// tensor crossing ranks arrives `latency` after it is produced (sends do not block the
// sender, as PyTorch's isend). SEND/RECV and FSDP actions of a lowered schedule take no
// time here. The result: makespan, per-rank busy and idle time (the bubble), and per-rank
// peak live activations in stage chunks (F adds one, B or W frees it).
#pragma once

#include <tessera/pipeline/schedule.hpp>
#include <vector>

namespace tessera::pipeline {

/// Cost of one action on one stage chunk, and of one message between ranks.
struct costs {
  double F = 1, B = 2, I = 1, W = 1, latency = 0;
  constexpr double of(op k) const noexcept {
    switch (k) {
      case op::F: return F;
      case op::B: return B;
      case op::I: return I;
      case op::W: return W;
      default: return 0;
    }
  }
};

/// Costs given per full stage (one rank's share of the model when it holds one stage),
/// divided by the stages each rank holds: the convention of the PyTorch comparison.
constexpr costs per_chunk(costs full, int stages_per_rank) noexcept {
  const double v = stages_per_rank > 0 ? stages_per_rank : 1;
  return costs{full.F / v, full.B / v, full.I / v, full.W / v, full.latency};
}

struct simulation {
  bool ok = false;      ///< false: some rank waits forever (see stuck_rank / stuck_step)
  int stuck_rank = -1;
  int stuck_step = -1;
  double makespan = 0;
  double bubble = 0;                     ///< idle share of p * makespan, in [0, 1]
  std::vector<double> busy, idle;        ///< per rank
  std::vector<int> peak_activations;     ///< per rank, in stage chunks
  std::vector<std::vector<double>> start, finish;  ///< per rank, per action (program order)
};

namespace detail {
/// Index of (stage, microbatch) in flat per-pair arrays.
constexpr std::size_t pair_index(const schedule& s, int stage, int mb) {
  return static_cast<std::size_t>(stage) * static_cast<std::size_t>(s.microbatches) + static_cast<std::size_t>(mb);
}
/// The rank that consumes what `a` produces (F: next stage's F; B/I: previous stage's),
/// or -1. Used to wake waiting ranks.
constexpr int consumer_rank(const schedule& s, const action& a) {
  if (a.kind == op::F) return a.stage + 1 < s.stages ? s.rank_of(a.stage + 1) : s.rank_of(a.stage);
  if (a.kind == op::B || a.kind == op::I) return a.stage > 0 ? s.rank_of(a.stage - 1) : -1;
  return -1;
}
}  // namespace detail

namespace detail {
/// The simulation with the cost of each compute action from `cost_of(action)` and
/// `latency` per message between ranks.
template <class CostOf>
constexpr simulation simulate_with(const schedule& s, double latency, CostOf cost_of) {
  simulation r;
  const auto p = static_cast<std::size_t>(s.ranks);
  r.busy.assign(p, 0);
  r.idle.assign(p, 0);
  r.peak_activations.assign(p, 0);
  r.start.assign(p, std::vector<double>{});
  r.finish.assign(p, std::vector<double>{});
  const std::size_t pairs = static_cast<std::size_t>(s.stages) * static_cast<std::size_t>(s.microbatches);
  std::vector<double> fdone(pairs, -1), bdone(pairs, -1), wdone(pairs, -1);
  std::vector<std::size_t> pc(p, 0);
  std::vector<double> free_at(p, 0);
  std::vector<int> live(p, 0);
  for (std::size_t q = 0; q < p; ++q) {
    r.start[q].assign(s.actions[q].size(), 0);
    r.finish[q].assign(s.actions[q].size(), 0);
  }
  std::vector<int> work;
  std::vector<char> queued(p, 1);
  for (std::size_t q = p; q > 0; --q) work.push_back(static_cast<int>(q - 1));
  auto arrival = [&](double t, int from_stage, int to_stage) {
    return s.rank_of(from_stage) == s.rank_of(to_stage) ? t : t + latency;
  };
  while (!work.empty()) {
    const int rank = work.back();
    work.pop_back();
    const auto q = static_cast<std::size_t>(rank);
    queued[q] = 0;
    const auto& list = s.actions[q];
    while (pc[q] < list.size()) {
      const action a = list[pc[q]];
      if (!is_compute(a.kind)) {
        r.start[q][pc[q]] = r.finish[q][pc[q]] = free_at[q];
        ++pc[q];
        continue;
      }
      if (a.stage < 0 || a.stage >= s.stages || a.mb < 0 || a.mb >= s.microbatches) return r;
      double ready = free_at[q];
      bool can = true;
      const std::size_t i = detail::pair_index(s, a.stage, a.mb);
      if (a.kind == op::F) {
        if (a.stage > 0) {
          const double t = fdone[detail::pair_index(s, a.stage - 1, a.mb)];
          if (t < 0) can = false; else ready = ready > arrival(t, a.stage - 1, a.stage) ? ready : arrival(t, a.stage - 1, a.stage);
        }
      } else if (a.kind == op::B || a.kind == op::I) {
        if (fdone[i] < 0) can = false; else ready = ready > fdone[i] ? ready : fdone[i];
        if (can && a.stage + 1 < s.stages) {
          const double t = bdone[detail::pair_index(s, a.stage + 1, a.mb)];
          if (t < 0) can = false; else ready = ready > arrival(t, a.stage + 1, a.stage) ? ready : arrival(t, a.stage + 1, a.stage);
        }
      } else {  // W
        if (bdone[i] < 0) can = false; else ready = ready > bdone[i] ? ready : bdone[i];
      }
      if (!can) break;
      const double cost = cost_of(a);
      const double end = ready + cost;
      r.start[q][pc[q]] = ready;
      r.finish[q][pc[q]] = end;
      r.busy[q] += cost;
      free_at[q] = end;
      if (a.kind == op::F) fdone[i] = end, ++live[q];
      else if (a.kind == op::W) wdone[i] = end, --live[q];
      else {
        bdone[i] = end;
        if (a.kind == op::B) --live[q];
      }
      if (live[q] > r.peak_activations[q]) r.peak_activations[q] = live[q];
      ++pc[q];
      const int wake = detail::consumer_rank(s, a);
      if (wake >= 0 && wake != rank && !queued[static_cast<std::size_t>(wake)]) {
        queued[static_cast<std::size_t>(wake)] = 1;
        work.push_back(wake);
      }
    }
  }
  r.ok = true;
  for (std::size_t q = 0; q < p; ++q) {
    if (pc[q] < s.actions[q].size() && r.ok) {
      r.ok = false;
      r.stuck_rank = static_cast<int>(q);
      r.stuck_step = static_cast<int>(pc[q]);
    }
    if (free_at[q] > r.makespan) r.makespan = free_at[q];
  }
  double idle_sum = 0;
  for (std::size_t q = 0; q < p; ++q) {
    r.idle[q] = r.makespan - r.busy[q];
    idle_sum += r.idle[q];
  }
  r.bubble = r.makespan > 0 ? idle_sum / (static_cast<double>(p) * r.makespan) : 0;
  return r;
}
}  // namespace detail

/// Simulates `s` (compute actions only; others are skipped). Actions with out-of-range
/// stage or microbatch make the result not ok; run verify() for a diagnosis.
constexpr simulation simulate(const schedule& s, const costs& c = {}) {
  return detail::simulate_with(s, c.latency, [&](const action& a) { return c.of(a.kind); });
}

/// The same with costs per stage (`per_stage[st]` for the actions of stage st; stages
/// of unequal work, e.g. the embedding's and the head's), and `latency` per message.
constexpr simulation simulate_per_stage(const schedule& s, const std::vector<costs>& per_stage, double latency = 0) {
  return detail::simulate_with(s, latency, [&](const action& a) {
    return a.stage >= 0 && static_cast<std::size_t>(a.stage) < per_stage.size()
               ? per_stage[static_cast<std::size_t>(a.stage)].of(a.kind)
               : 0.0;
  });
}

}  // namespace tessera::pipeline
