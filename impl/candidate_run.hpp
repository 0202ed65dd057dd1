// One implementation run on one case, the one way every command runs it (golden check, run, fuzz, mutants,
// the property suite): the case admitted by the implementation's capabilities first (core/capabilities), then
// run, its refusals and failures told apart, and its stated promises checked. The caller judges the candidate
// against a golden's or the oracle's answers with judge() (core/compare/judge.hpp).
#pragma once

#include <string>

#include "core/capabilities/capabilities.hpp"
#include "impl/implementation.hpp"

namespace attncheck::impl {

struct CandidateRun {
  enum class Kind {
    answered,        // tensors to judge
    not_stated,      // outside its stated capabilities (or what it runs): not run, nothing computed
    declined,        // it answered Unsupported for a case it made no promise about (or cannot run here at all)
    broken_promise,  // it declined a case, or a part of one, that its stated capabilities include
    raised,          // it failed: a crash, a worker's error, an invalid candidate
    no_answer,       // no answer within its time limit (NoAnswer)
    out_of_memory,   // attncheck's process ran out of memory running it (std::bad_alloc)
  };
  Kind kind = Kind::answered;
  std::string message;  // all but answered: why
  std::string reason;   // not_stated and declined: the reason alone (what `fuzz` tallies), without the name
  // answered: what it returned (core/compare/candidate.hpp), less any tensor inside a part attncheck declined on
  // its behalf (Admission::parts_not_stated, added to its declined parts with their reasons); `sharded` only
  // where the admission judges the case's per-rank gradients and it reported them.
  Candidate candidate;
};

// "answered", "not stated", "declined", "broken promise", "raised", "no answer", "out of memory".
std::string_view to_string(CandidateRun::Kind kind);

// Runs the case if `admission` (admit(implementation.capabilities(), its outline), or narrower) admits it.
// InputError other than Unsupported is the user's bad input and propagates.
CandidateRun run_candidate(Implementation& implementation, const Case& test_case, const Admission& admission);

}  // namespace attncheck::impl
