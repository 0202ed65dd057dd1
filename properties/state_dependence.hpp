// Failures that depend on what an implementation ran before. The fuzzer runs every case in one
// instance (for exec: one worker process), so a cache that is never cleared, or a buffer reused with
// stale contents, makes a case fail only after certain earlier cases. Such a failure is real, but its
// shrunk case passes when replayed alone; these functions tell the two apart in FRESH instances
// (impl::open_implementation again: for exec:, a new worker process) and find a short sequence of the
// earlier cases that reproduces it, bounded by a budget of cases run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "impl/implementation.hpp"
#include "properties/case_spec.hpp"
#include "properties/checks.hpp"

namespace attncheck::properties {

// Opens a fresh instance of the implementation being fuzzed.
using ImplementationFactory = std::function<std::unique_ptr<impl::Implementation>()>;

// The case checked in a fresh instance.
CheckOutcome check_alone(const ImplementationFactory& open, const CaseSpec& spec);

struct SequenceSearch {
  bool reproduced = false;
  std::vector<std::int64_t> earlier;  // reproduced: the earlier cases' indices, in the order they ran
  CheckOutcome outcome;               // reproduced: the failing case's, at the end of that sequence
  std::int64_t cases_run = 0;         // earlier and failing cases run in all the replays
  std::int64_t replays = 0;           // fresh instances opened
  bool budget_spent = false;          // stopped by the budget (the sequence may not be the shortest)
  std::int64_t longest_tried = 0;     // not reproduced: the most earlier cases any replay ran first
};

// `earlier` are the indices of the cases the fuzzing instance ran before `failing`, in order; `case_at`
// gives an index's spec. Each replay opens a fresh instance, runs some of the earlier cases in their
// order (their answers are not judged: they only set the state) and then checks `failing`. The search
// tries the last 1, 2, 4, ... earlier cases up to all of them (state is often left by recent cases),
// then drops cases from the shortest that reproduces (delta debugging: halves, quarters, ..., single
// cases) while it still fails. At most `budget` cases are run in all. The caller has seen `failing`
// pass alone in a fresh instance, so no replay runs it without earlier cases.
SequenceSearch find_sequence(const ImplementationFactory& open, const std::vector<std::int64_t>& earlier,
                             const std::function<CaseSpec(std::int64_t)>& case_at, const CaseSpec& failing,
                             std::int64_t budget);

// One replay: a fresh instance runs `earlier` (indices through case_at) and then checks `failing`.
CheckOutcome replay_sequence(const ImplementationFactory& open, const std::vector<std::int64_t>& earlier,
                             const std::function<CaseSpec(std::int64_t)>& case_at, const CaseSpec& failing);

}  // namespace attncheck::properties
