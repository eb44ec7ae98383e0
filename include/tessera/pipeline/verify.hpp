// tessera/pipeline/verify.hpp: the constexpr schedule verifier.
//
// verify(s) runs six phases in this order and stops at the first problem; each is a
// function of detail/verify_counts.hpp or detail/verify_run.hpp, documented there with
// what it requires, checks, reports and ensures for the phases after it:
//  1. check_sizes: ranks, stages and microbatches at least one, sizes that agree, every
//     stage on a rank that exists;
//  2. check_actions: each action's stage and microbatch in range, on the rank that holds
//     its stage, sends/recvs only between stages on different ranks, no duplicates;
//  3. check_counts: per (stage, microbatch) one F and either one B or one I and one W; in
//     a lowered schedule, every cross-rank tensor sent once and received once;
//  4. check_fsdp_and_waits: compute of a stage only while it is unsharded, REDUCE_GRAD
//     after its last backward; each WAIT_* after the operation it waits for;
//  5. run_blocking: execution under blocking semantics: F(s-1,mb) before F(s,mb),
//     F(s,mb) and B/I(s+1,mb) before B/I(s,mb), I before W; a SEND completes only when
//     the peer is at the matching RECV and vice versa (rendezvous);
//  6. diagnose_stuck: a rank left waiting for an input that comes later in its own list
//     is a dependency_order problem; otherwise a rank that can never move is a deadlock,
//     reported with the rank, the step and the action it is stuck at.
#pragma once

#include <tessera/pipeline/detail/verify_counts.hpp>
#include <tessera/pipeline/detail/verify_run.hpp>
#include <tessera/pipeline/detail/verify_text.hpp>
#include <tessera/pipeline/schedule.hpp>

namespace tessera::pipeline {

/// Checks every rule above. `result.ok` is true for a valid schedule; otherwise
/// `what`, `rank`, `step`, `act` (and `other`, `other_rank` where it applies) locate the
/// problem and `text` says it in words.
constexpr verify_result verify(const schedule& s) {
  if (verify_result r = detail::check_sizes(s); !r.ok) return r;
  detail::tally t(s);
  if (verify_result r = detail::check_actions(s, t); !r.ok) return r;
  if (verify_result r = detail::check_counts(s, t); !r.ok) return r;
  if (verify_result r = detail::check_fsdp_and_waits(s, t); !r.ok) return r;
  detail::blocking_run run(t);
  detail::run_blocking(s, t, run);
  return detail::diagnose_stuck(s, t, run);
}

}  // namespace tessera::pipeline
