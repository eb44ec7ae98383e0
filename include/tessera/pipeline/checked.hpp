// tessera/pipeline/checked.hpp: schedules verified when the program compiles.
//
//   constexpr auto gen = [] { return tessera::pipeline::interleaved_1f1b(4, 2, 8); };
//   using sched = tessera::pipeline::checked_schedule<gen>;   // fails to compile if invalid
//   using zbv = tessera::pipeline::generated_schedule<schedule_kind::zbv_zero_bubble, 4, 2, 8>;
//
// A broken schedule fails with one static_assert inside `invalid_schedule_at<rank, step,
// stage, op, microbatch, problem, result>`, whose template arguments (shown by the
// compiler) locate the problem; g++ also prints the verifier's sentence in `result`.
// The verified schedule is kept in fixed-size arrays (a constexpr std::vector cannot
// outlive its constant evaluation) and rebuilt as a value by `value()`.
#pragma once

#include <array>
#include <cstddef>
#include <tessera/pipeline/generators.hpp>
#include <tessera/pipeline/schedule.hpp>
#include <tessera/pipeline/verify.hpp>

namespace tessera::pipeline {

/// Instantiated by checked_schedule; fails to compile exactly when the schedule is
/// invalid. Read the template arguments: the rank, the step in that rank's list, the
/// action (stage, op, microbatch) and the problem.
template <int Rank, int Step, int Stage, op Op, int Microbatch, problem What, verify_result Result>
struct invalid_schedule_at {
  static_assert(Result.ok,
                "tessera::pipeline: the schedule is invalid; the template arguments of "
                "invalid_schedule_at<rank, step, stage, op, microbatch, problem, ...> name the "
                "rank, the step and the action; run verify() at run time for the full sentence");
  static constexpr bool value = Result.ok;
};

/// Instantiated by generated_schedule; fails to compile when the generator rejects its
/// arguments, naming why (`Why`) and the arguments.
template <argument_problem Why, schedule_kind Kind, int Ranks, int StagesPerRank, int Microbatches>
struct bad_generator_arguments {
  static_assert(Why == argument_problem::none,
                "tessera::pipeline: the generator rejects its arguments; the first template "
                "argument of bad_generator_arguments<why, schedule, p, stages per rank, m> says why");
  static constexpr bool value = Why == argument_problem::none;
};

namespace detail {
struct schedule_info {
  verify_result result;
  int ranks = 0, stages = 0, microbatches = 0;
  placement place = placement::loop;
  std::size_t total = 0;
};
template <auto Gen>
constexpr schedule_info info_of() {
  const schedule s = Gen();
  return schedule_info{verify(s), s.ranks, s.stages, s.microbatches, s.place, s.size()};
}
}  // namespace detail

/// A schedule produced by the constexpr callable `Gen` (no captures), verified at
/// compile time and stored in fixed-size arrays.
template <auto Gen>
struct checked_schedule {
  static constexpr detail::schedule_info info = detail::info_of<Gen>();
  static constexpr verify_result result = info.result;
  // Instantiating the class runs its static_assert (the one error a broken schedule
  // gives); sizeof keeps this line valid either way.
  static_assert(sizeof(invalid_schedule_at<result.rank, result.step, result.act.stage, result.act.kind, result.act.mb,
                                           result.what, result>) > 0);
  static constexpr bool valid = result.ok;
  static constexpr int ranks = valid ? info.ranks : 0;
  static constexpr int stages = valid ? info.stages : 0;
  static constexpr int microbatches = valid ? info.microbatches : 0;
  static constexpr std::size_t size = valid ? info.total : 0;

  struct tables {
    std::array<int, static_cast<std::size_t>(ranks) + 1> offset{};  ///< rank r: [offset[r], offset[r+1])
    std::array<int, static_cast<std::size_t>(stages)> stage_rank{};
    std::array<action, size> actions{};
  };
  static constexpr tables table = [] {
    tables t;
    if constexpr (valid) {
      const schedule s = Gen();
      std::size_t n = 0;
      for (std::size_t r = 0; r < s.actions.size(); ++r) {
        t.offset[r] = static_cast<int>(n);
        for (const action& a : s.actions[r]) t.actions[n++] = a;
      }
      t.offset[s.actions.size()] = static_cast<int>(n);
      for (std::size_t st = 0; st < s.stage_rank.size(); ++st) t.stage_rank[st] = s.stage_rank[st];
    }
    return t;
  }();

  /// The schedule as a value again (usable at compile time and at run time).
  static constexpr schedule value() {
    schedule s = make_empty(ranks, stages, microbatches, info.place);
    for (int st = 0; st < stages; ++st)
      s.stage_rank[static_cast<std::size_t>(st)] = table.stage_rank[static_cast<std::size_t>(st)];
    for (int r = 0; r < ranks; ++r)
      for (int i = table.offset[static_cast<std::size_t>(r)]; i < table.offset[static_cast<std::size_t>(r) + 1]; ++i)
        s.actions[static_cast<std::size_t>(r)].push_back(table.actions[static_cast<std::size_t>(i)]);
    return s;
  }
};

/// The call `generate(Kind, Ranks, StagesPerRank, Microbatches)`, as a template argument.
template <schedule_kind Kind, int Ranks, int StagesPerRank, int Microbatches>
struct generator_call {
  static constexpr argument_problem why = argument_check(Kind, Ranks, StagesPerRank, Microbatches);
  // Instantiating the class runs its static_assert; sizeof keeps this line itself valid,
  // so the argument error is the only one reported.
  static_assert(sizeof(bad_generator_arguments<why, Kind, Ranks, StagesPerRank, Microbatches>) > 0);
  constexpr schedule operator()() const {
    if constexpr (why == argument_problem::none) return generate(Kind, Ranks, StagesPerRank, Microbatches);
    else {  // a trivial valid stand-in, so that only the argument error is reported
      schedule s = make_empty(1, 1, 1, placement::loop);
      s.actions[0].push_back(action{op::F, 0, 0});
      s.actions[0].push_back(action{op::B, 0, 0});
      return s;
    }
  }
};

/// Generator `Kind` with compile-time arguments, checked for its arguments and verified.
template <schedule_kind Kind, int Ranks, int StagesPerRank, int Microbatches>
using generated_schedule = checked_schedule<generator_call<Kind, Ranks, StagesPerRank, Microbatches>{}>;

}  // namespace tessera::pipeline
