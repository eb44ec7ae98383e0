// tessera/pipeline/generators.hpp: constexpr schedule generators.
//
//   gpipe(p, v, m)                     all forwards, then all backwards
//   one_f_one_b(p, m)                  1F1B: warm up, then one backward per forward
//   interleaved_1f1b(p, v, m)          Megatron's interleaved 1F1B, loop placement
//   looped_bfs(p, v, m)                each rank runs its stages breadth first
//   interleaved_zero_bubble(p, v, m)   ZB-H1 style: backward split into I and W,
//                                      W fills idle time, 1F1B's memory
//   zbv_zero_bubble(p, m)              ZB-V: two stages per rank in a V, split backward
//   dualpipe_v(p, m)                   DualPipeV: V placement, split backward, p+1 chunks
//                                      of extra activations allowed in flight
//
// Every generator accepts every m >= 1. Limits: p >= 1, 1 <= stages per rank <= 16;
// the V-shaped schedules have exactly two stages per rank (that is what a V is).
#pragma once

#include <string_view>
#include <tessera/pipeline/detail/check.hpp>
#include <tessera/pipeline/detail/greedy.hpp>
#include <tessera/pipeline/detail/static_order.hpp>
#include <tessera/pipeline/detail/v_order.hpp>
#include <tessera/pipeline/schedule.hpp>

namespace tessera::pipeline {

enum class schedule_kind : unsigned char {
  gpipe,
  one_f_one_b,
  interleaved_1f1b,
  looped_bfs,
  interleaved_zero_bubble,
  zbv_zero_bubble,
  dualpipe_v
};

inline constexpr schedule_kind all_schedule_kinds[] = {
    schedule_kind::gpipe,           schedule_kind::one_f_one_b,
    schedule_kind::interleaved_1f1b, schedule_kind::looped_bfs,
    schedule_kind::interleaved_zero_bubble, schedule_kind::zbv_zero_bubble,
    schedule_kind::dualpipe_v};

/// PyTorch's class-name suffix for each schedule (`ScheduleInterleaved1F1B`).
constexpr std::string_view schedule_name(schedule_kind k) noexcept {
  switch (k) {
    case schedule_kind::gpipe: return "GPipe";
    case schedule_kind::one_f_one_b: return "1F1B";
    case schedule_kind::interleaved_1f1b: return "Interleaved1F1B";
    case schedule_kind::looped_bfs: return "LoopedBFS";
    case schedule_kind::interleaved_zero_bubble: return "InterleavedZeroBubble";
    case schedule_kind::zbv_zero_bubble: return "ZBVZeroBubble";
    case schedule_kind::dualpipe_v: return "DualPipeV";
  }
  return "?";
}

/// The kind named `name` (case-sensitive, PyTorch's spelling); false when unknown.
constexpr bool parse_schedule_kind(std::string_view name, schedule_kind& out) noexcept {
  for (schedule_kind k : all_schedule_kinds)
    if (schedule_name(k) == name) {
      out = k;
      return true;
    }
  return false;
}

/// Largest number of stages one rank may hold.
inline constexpr int max_stages_per_rank = 16;

/// Why a generator rejects its arguments (an enumerator, so compile-time diagnostics
/// can name it in a template argument).
enum class argument_problem : unsigned char {
  none,
  ranks_below_1,
  microbatches_below_1,
  stages_per_rank_not_in_1_to_16,
  v_shape_needs_exactly_2_stages_per_rank
};

constexpr argument_problem argument_check(schedule_kind k, int p, int v, int m) noexcept {
  if (p < 1) return argument_problem::ranks_below_1;
  if (m < 1) return argument_problem::microbatches_below_1;
  if (v < 1 || v > max_stages_per_rank) return argument_problem::stages_per_rank_not_in_1_to_16;
  if ((k == schedule_kind::zbv_zero_bubble || k == schedule_kind::dualpipe_v) && v != 2)
    return argument_problem::v_shape_needs_exactly_2_stages_per_rank;
  return argument_problem::none;
}

/// Why (p, v, m) is not a valid input for `k`, in words, or an empty view when it is.
constexpr std::string_view check_arguments(schedule_kind k, int p, int v, int m) noexcept {
  switch (argument_check(k, p, v, m)) {
    case argument_problem::none: return {};
    case argument_problem::ranks_below_1: return "the number of pipeline ranks must be at least 1";
    case argument_problem::microbatches_below_1: return "the number of microbatches must be at least 1";
    case argument_problem::stages_per_rank_not_in_1_to_16: return "stages per rank must be between 1 and 16";
    case argument_problem::v_shape_needs_exactly_2_stages_per_rank:
      return "V-shaped schedules (ZBVZeroBubble, DualPipeV) hold exactly 2 stages per rank";
  }
  return {};
}

namespace detail {
constexpr int min_int(int a, int b) { return a < b ? a : b; }

/// Live-activation budget per rank (stage chunks) of each schedule: the memory the
/// schedule is known for. 1F1B: p - r; interleaved: Megatron's warm-up plus one, with
/// PyTorch's round size for the group; zero bubble H1: p full stages (or the peak of its
/// fixed order, see generate()); ZB-V: 1F1B's p full stages, less while the warm-up of
/// rank r holds m + 1 + r chunks; DualPipeV: one chunk more than ZB-V's p full stages.
constexpr std::vector<int> budget(schedule_kind k, int p, int v, int m) {
  std::vector<int> cap(static_cast<std::size_t>(p), 0);
  for (int r = 0; r < p; ++r) {
    int c = v * m;
    switch (k) {
      case schedule_kind::gpipe:
      case schedule_kind::looped_bfs: break;
      case schedule_kind::one_f_one_b: c = p - r; break;
      case schedule_kind::interleaved_1f1b: {
        const int rounds = m / p > 1 ? m / p : 1;
        c = (v - 1) * (m / rounds) + 2 * (p - 1 - r) + 1;
        break;
      }
      case schedule_kind::interleaved_zero_bubble: c = v * p; break;
      case schedule_kind::zbv_zero_bubble: c = min_int(2 * p, m + 1 + r); break;
      case schedule_kind::dualpipe_v: c = 2 * p + 1; break;
    }
    cap[static_cast<std::size_t>(r)] = min_int(c, v * m);
  }
  return cap;
}

constexpr greedy_policy policy_for(schedule_kind k, int p, int v, int m, const costs& c) {
  greedy_policy g;
  g.c = c;
  g.cap = budget(k, p, v, m);
  switch (k) {
    case schedule_kind::gpipe:
      g.breadth_first = true;
      g.forward_deep_first = true;
      break;
    case schedule_kind::looped_bfs:
      g.breadth_first = true;
      g.forward_deep_first = false;
      break;
    case schedule_kind::interleaved_zero_bubble:
    case schedule_kind::zbv_zero_bubble:
    case schedule_kind::dualpipe_v: g.split = true; break;
    default: break;
  }
  return g;
}
}  // namespace detail

/// Generates schedule `k` for p ranks, v stages per rank, m microbatches. `c` are the
/// per-chunk costs the list scheduler plans with (F=1, B=2, I=W=1 unless told).
/// Throws schedule_error (a compile error in a constant evaluation) on bad arguments.
constexpr schedule generate(schedule_kind k, int p, int v, int m, const costs& c = {}, int only_variant = -1) {
  const std::string_view why = check_arguments(k, p, v, m);
  detail::check(why.empty(), why);
  if (k == schedule_kind::one_f_one_b && v > 1) k = schedule_kind::interleaved_1f1b;
  const placement place = (k == schedule_kind::zbv_zero_bubble || k == schedule_kind::dualpipe_v)
                              ? placement::v_shape
                              : placement::loop;
  detail::greedy_policy base = detail::policy_for(k, p, v, m, c);
  std::vector<int>& budget = base.cap;
  // The list scheduler under a few tie-breaking rules; the best schedule within the
  // memory budget wins (shortest makespan under the planning costs, then least memory).
  schedule best;
  double best_time = 0;
  long best_mem = 0;
  bool best_fits = false;
  auto offer = [&](schedule& cand, const std::vector<int>& cap) {
    const simulation sim = simulate(cand, c);
    if (!sim.ok) return;
    bool fits = true;
    long mem = 0;
    for (int r = 0; r < p; ++r) {
      fits = fits && sim.peak_activations[static_cast<std::size_t>(r)] <= cap[static_cast<std::size_t>(r)];
      mem += sim.peak_activations[static_cast<std::size_t>(r)];
    }
    const bool take = best.ranks == 0 || (fits && !best_fits) ||
                      (fits == best_fits && (sim.makespan < best_time || (sim.makespan == best_time && mem < best_mem)));
    if (take) {
      best = static_cast<schedule&&>(cand);
      best_time = sim.makespan;
      best_mem = mem;
      best_fits = fits;
    }
  };
  // Megatron-style fixed orders for the interleaved schedules, in groups of p and of the
  // group size PyTorch would use (m / max(1, m / p)).
  if ((k == schedule_kind::interleaved_1f1b || k == schedule_kind::interleaved_zero_bubble) && only_variant < 0) {
    const bool split = k == schedule_kind::interleaved_zero_bubble;
    const int rounds = m / p > 1 ? m / p : 1;
    const int groups[2] = {p, m / rounds};
    for (int gi = split ? 1 : 0; gi >= 0 && gi < 2; split ? --gi : ++gi) {
      if (gi == (split ? 0 : 1) && groups[1] == groups[0]) break;
      const int G = groups[gi];
      std::vector<int> warm(static_cast<std::size_t>(p), 0), lag(static_cast<std::size_t>(p), 0);
      for (int r = 0; r < p; ++r) {
        warm[static_cast<std::size_t>(r)] = split ? (v - 1) * G + p - r : (v - 1) * G + 2 * (p - 1 - r);
        lag[static_cast<std::size_t>(r)] = split ? r : 0;
      }
      schedule cand = detail::static_order(p, v, m, G, warm, split, lag);
      if (split && gi == 1) {
        // ZB-H1 keeps the memory of its fixed order; with PyTorch's round size that can be
        // a little more than p full stages when p does not divide m.
        const simulation sim = simulate(cand, c);
        if (sim.ok)
          for (int r = 0; r < p; ++r) {
            const auto i = static_cast<std::size_t>(r);
            if (sim.peak_activations[i] > budget[i]) budget[i] = sim.peak_activations[i];
          }
      }
      offer(cand, budget);
    }
  }
  // The fixed ZB-V order for the V shapes, its cool-down W's deferred by r or by 2r I's
  // on rank r (the first is the better at F=1, B=2, I=W=1; the second wins some cases
  // when I costs more than W or messages have a latency).
  if (place == placement::v_shape && only_variant < 0) {
    for (int lag : {1, 2}) {
      schedule cand = detail::v_order(p, m, lag);
      offer(cand, budget);
    }
  }
  // The list scheduler under a few tie-breaking rules.
  // Measured over p in {2,4,8}, v in {1,2,4}, m in 1..4p, these are the ones that win.
  const int tried[4] = {base.breadth_first ? 0 : 2, base.breadth_first ? -1 : 0, base.split ? 10 : -1, base.split ? 8 : -1};
  for (int variant : tried) {
    if (variant < 0 || (only_variant >= 0 && variant != only_variant)) continue;
    detail::greedy_policy g = base;
    if (g.breadth_first) {
      g.backward_lifo = (variant & 1) != 0;
      g.forward_deep_first = (variant & 2) != 0;
      g.backward_mb_first = (variant & 4) != 0;
    } else {
      g.alternate = (variant & 1) == 0;
      g.backward_mb_first = (variant & 2) == 0;
      g.forward_deep_first = (variant & 4) == 0;
      g.w_follow = (variant & 8) != 0;
    }
    schedule cand = detail::greedy(p, p * v, m, place, g);
    offer(cand, g.cap);
  }
  return best;
}

constexpr schedule gpipe(int p, int v, int m) { return generate(schedule_kind::gpipe, p, v, m); }
constexpr schedule one_f_one_b(int p, int m) { return generate(schedule_kind::one_f_one_b, p, 1, m); }
constexpr schedule interleaved_1f1b(int p, int v, int m) { return generate(schedule_kind::interleaved_1f1b, p, v, m); }
constexpr schedule looped_bfs(int p, int v, int m) { return generate(schedule_kind::looped_bfs, p, v, m); }
constexpr schedule interleaved_zero_bubble(int p, int v, int m) {
  return generate(schedule_kind::interleaved_zero_bubble, p, v, m);
}
constexpr schedule zbv_zero_bubble(int p, int m) { return generate(schedule_kind::zbv_zero_bubble, p, 2, m); }
constexpr schedule dualpipe_v(int p, int m) { return generate(schedule_kind::dualpipe_v, p, 2, m); }

}  // namespace tessera::pipeline
