// Shrinking a failing case to a smaller one that still fails, in the instance that found it: the
// sequence length first, by bisection (length_shrinking.hpp), then a greedy descent through RapidCheck's
// shrink tree (the first shrink that still fails, repeated) with the length held at most where the
// bisection left it, then the length once more if the descent changed the case.
//
// The budget is a count of candidates tried, never seconds, so the shrunk case (and the repro written
// from it) is the same on every machine at any load. A time limit remains only to stop a runaway; when
// it fires the result says so, because the case it stopped at then depends on the machine.
#pragma once

#include <cstdint>

#include <rapidcheck.h>

#include "impl/implementation.hpp"
#include "properties/case_spec.hpp"
#include "properties/checks.hpp"

namespace attncheck::properties {

struct ShrinkBudget {
  std::int64_t candidates = 0;      // cases checked at most, length probes included
  double time_limit_seconds = 0.0;  // a runaway stop (0: none)
  std::int64_t min_seq = 3;         // the shortest length the bisection tries (the generator's own)
};

struct ShrinkResult {
  CaseSpec shrunk;
  CheckOutcome outcome;            // the shrunk case's, in the instance that shrank it
  std::int64_t steps = 0;          // accepted shrinks (a failing length probe counts as one)
  std::int64_t candidates = 0;     // cases checked
  std::int64_t length_probes = 0;  // of which: lengths tried by bisection
  bool budget_spent = false;       // the candidate budget ran out before no shrink failed any more
  bool stopped_by_time_limit = false;
  double seconds = 0.0;
};

ShrinkResult shrink_failure(impl::Implementation& implementation, const rc::Shrinkable<CaseSpec>& failing,
                            CheckOutcome outcome, const ShrinkBudget& budget);

}  // namespace attncheck::properties
