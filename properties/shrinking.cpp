#include "properties/shrinking.hpp"

#include <algorithm>
#include <chrono>

#include "properties/length_shrinking.hpp"

namespace attncheck::properties {

namespace {

using Clock = std::chrono::steady_clock;

// One shrink: its candidates, counted, timed, and the latest failure kept.
class Shrinker {
 public:
  Shrinker(impl::Implementation& implementation, const ShrinkBudget& budget, ShrinkResult& result)
      : implementation_(implementation),
        budget_(budget),
        result_(result),
        property_(result.outcome.property),
        start_(Clock::now()) {}

  // Whether another candidate may be checked; notes why not (a budget of none is no budget spent: a
  // timeout is not shrunk at all).
  bool may_try() {
    if (result_.candidates >= budget_.candidates) {
      result_.budget_spent = budget_.candidates > 0;
      return false;
    }
    if (budget_.time_limit_seconds > 0 && seconds() >= budget_.time_limit_seconds) {
      result_.stopped_by_time_limit = true;
      return false;
    }
    return true;
  }

  // Checks a candidate (the caller asked may_try()); a failure becomes the shrunk case.
  bool fails(const CaseSpec& candidate) {
    ++result_.candidates;
    CheckOutcome outcome = check_matches_reference(implementation_, make_case(candidate));
    // Only the same failure: a mismatch must not shrink onto a hang (answers-in-time) or a crash elsewhere.
    if (outcome.verdict != Verdict::fail || outcome.property != property_) return false;
    result_.shrunk = candidate;
    result_.outcome = std::move(outcome);
    ++result_.steps;
    return true;
  }

  // Bisection over the length of the shrunk case.
  void shrink_length_of_shrunk() {
    if (!may_try()) return;
    const std::int64_t remaining = budget_.candidates - result_.candidates;
    // A probe refused for time counts as passing: the bisection then ends within log2(seq) steps, and
    // its result is still a failing case.
    const LengthShrink length = shrink_length(result_.shrunk, budget_.min_seq, remaining,
                                              [this](const CaseSpec& probe) { return may_try() && fails(probe); });
    result_.length_probes += length.probes;
    if (length.budget_spent) result_.budget_spent = true;
  }

  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  impl::Implementation& implementation_;
  const ShrinkBudget& budget_;
  ShrinkResult& result_;
  std::string property_;  // the failure being shrunk
  Clock::time_point start_;
};

}  // namespace

ShrinkResult shrink_failure(impl::Implementation& implementation, const rc::Shrinkable<CaseSpec>& failing,
                            CheckOutcome outcome, const ShrinkBudget& budget) {
  ShrinkResult result{.shrunk = failing.value(), .outcome = std::move(outcome)};
  Shrinker shrinker(implementation, budget, result);

  shrinker.shrink_length_of_shrunk();
  const std::int64_t length = result.shrunk.inputs.seq;

  // The shrink tree, every candidate held at most at the bisected length (a geometry shrink draws its
  // inputs again from the same Random, so its length may differ). A candidate that capping makes equal
  // to the case at hand is no shrink and is skipped.
  rc::Shrinkable<CaseSpec> node = rc::shrinkable::map(
      failing, [length](CaseSpec spec) { return spec.inputs.seq > length ? with_length(spec, length) : spec; });
  const std::int64_t steps_before_tree = result.steps;
  bool progressed = true;
  while (progressed && shrinker.may_try()) {
    progressed = false;
    auto candidates = node.shrinks();
    while (auto candidate = candidates.next()) {
      const CaseSpec value = candidate->value();
      if (value == result.shrunk) continue;
      if (!shrinker.may_try()) break;
      if (shrinker.fails(value)) {
        node = std::move(*candidate);
        progressed = true;
        break;
      }
    }
  }
  // A smaller geometry may fail at a shorter length.
  if (result.steps > steps_before_tree) shrinker.shrink_length_of_shrunk();
  result.seconds = shrinker.seconds();
  return result;
}

}  // namespace attncheck::properties
