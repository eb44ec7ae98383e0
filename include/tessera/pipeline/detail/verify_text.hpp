// tessera/pipeline/detail/verify_text.hpp: the verifier's result and its words.
#pragma once

#include <string_view>
#include <tessera/pipeline/action.hpp>

namespace tessera::pipeline {

/// What is wrong with a schedule.
enum class problem : unsigned char {
  none,
  bad_shape,                ///< no ranks, stages or microbatches, or inconsistent sizes
  stage_out_of_range,
  microbatch_out_of_range,
  wrong_rank,               ///< the action's stage runs on another rank
  local_transfer,           ///< a SEND/RECV between two stages of one rank
  duplicate,
  missing,
  mixed_backward,           ///< both B and I/W for one (stage, microbatch)
  fsdp_order,               ///< compute on a resharded stage, or REDUCE_GRAD too early
  wait_order,               ///< a WAIT_* before the operation it waits for
  dependency_order,         ///< an action before its input on the same rank
  deadlock                  ///< no rank can move under blocking send/recv
};

constexpr std::string_view problem_name(problem p) noexcept {
  constexpr std::string_view n[] = {"none", "bad_shape", "stage_out_of_range", "microbatch_out_of_range",
                                    "wrong_rank", "local_transfer", "duplicate", "missing",
                                    "mixed_backward", "fsdp_order", "wait_order", "dependency_order",
                                    "deadlock"};
  return n[static_cast<int>(p)];
}

/// The verifier's answer. Structural, so it can be a template argument: the compile-time
/// entry point puts it (and its fields) into the type that fails, where the compiler's
/// message shows them.
struct verify_result {
  bool ok = true;
  problem what = problem::none;
  int rank = -1;        ///< rank of the offending action (-1: none)
  int step = -1;        ///< its index in that rank's list (-1: the action is missing)
  action act{};         ///< the offending (or missing) action
  action other{};       ///< what it waits for or conflicts with
  int other_rank = -1;  ///< where `other` runs
  char text[200]{};     ///< the same in words
  constexpr std::string_view message() const noexcept {
    std::size_t n = 0;
    while (n < sizeof text && text[n] != 0) ++n;
    return {text, n};
  }
};

namespace detail {

struct text_builder {
  char* out;
  int n = 0;
  int cap;
  constexpr text_builder& operator<<(std::string_view s) {
    for (char c : s)
      if (n < cap - 1) out[n++] = c;
    return *this;
  }
  constexpr text_builder& operator<<(int v) {
    char buf[16]{};
    int k = 0;
    append_int(buf, k, v);
    return *this << std::string_view(buf, static_cast<std::size_t>(k));
  }
  constexpr text_builder& operator<<(const action& a) { return *this << format(a).view(); }
};

constexpr verify_result fail(problem what, int rank, int step, action act, action other, int other_rank) {
  verify_result r;
  r.ok = false;
  r.what = what;
  r.rank = rank;
  r.step = step;
  r.act = act;
  r.other = other;
  r.other_rank = other_rank;
  text_builder t{r.text, 0, static_cast<int>(sizeof r.text)};
  if (rank >= 0 && step >= 0) t << "rank " << rank << ", step " << step << ", " << act << ": ";
  switch (what) {
    case problem::none: break;
    case problem::bad_shape: t << "schedule has no ranks, stages or microbatches, or sizes that disagree"; break;
    case problem::stage_out_of_range: t << "stage (or the stage it talks to) is out of range"; break;
    case problem::microbatch_out_of_range: t << "microbatch is out of range"; break;
    case problem::wrong_rank: t << "stage " << act.stage << " runs on rank " << other_rank << ", not here"; break;
    case problem::local_transfer: t << "both stages are on this rank; pass the tensor locally, with no send/recv"; break;
    case problem::duplicate: t << "appears twice"; break;
    case problem::missing:
      if (step < 0) t << "rank " << rank << " never runs " << act << " (stage " << act.stage << ", microbatch " << act.mb << ")";
      break;
    case problem::mixed_backward: t << "stage " << act.stage << " microbatch " << act.mb << " has both B and I/W"; break;
    case problem::fsdp_order:
      if (act.kind == op::REDUCE_GRAD) t << "REDUCE_GRAD before the last backward of stage " << act.stage;
      else t << "stage " << act.stage << " is resharded here; put " << other << " before it";
      break;
    case problem::wait_order: t << "waits for " << other << ", which has not run on this rank"; break;
    case problem::dependency_order: t << "needs " << other << ", which comes later on the same rank"; break;
    case problem::deadlock:
      t << "deadlock: waits for " << other;
      if (other_rank >= 0) t << " on rank " << other_rank;
      t << ", and no rank can make progress";
      break;
  }
  return r;
}

}  // namespace detail
}  // namespace tessera::pipeline
