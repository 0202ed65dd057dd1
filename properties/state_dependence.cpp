#include "properties/state_dependence.hpp"

#include <algorithm>

namespace attncheck::properties {

CheckOutcome check_alone(const ImplementationFactory& open, const CaseSpec& spec) {
  const std::unique_ptr<impl::Implementation> fresh = open();
  return check_matches_reference(*fresh, make_case(spec));
}

CheckOutcome replay_sequence(const ImplementationFactory& open, const std::vector<std::int64_t>& earlier,
                             const std::function<CaseSpec(std::int64_t)>& case_at, const CaseSpec& failing) {
  const std::unique_ptr<impl::Implementation> fresh = open();
  for (const std::int64_t index : earlier) {
    try {
      fresh->run(make_case(case_at(index)));
    } catch (const impl::InternalFault&) {
      throw;  // attncheck's own failure: never part of the state being reproduced
    } catch (const std::exception&) {
      // Declined or failed, as it may have in the fuzzing instance: either way it ran, which is all the
      // state needs. Its answer is not what is being reproduced.
    }
  }
  return check_matches_reference(*fresh, make_case(failing));
}

namespace {

// The replays of one search, within its budget of cases.
class Search {
 public:
  Search(const ImplementationFactory& open, const std::function<CaseSpec(std::int64_t)>& case_at,
         const CaseSpec& failing, std::int64_t budget, SequenceSearch& result)
      : open_(open), case_at_(case_at), failing_(failing), budget_(budget), result_(result) {}

  // Whether running `earlier` then the failing case fits in what is left of the budget.
  bool affordable(const std::vector<std::int64_t>& earlier) const {
    return result_.cases_run + static_cast<std::int64_t>(earlier.size()) + 1 <= budget_;
  }

  // Replays `earlier` then the failing case (the caller checked affordable()); a failure is kept.
  bool reproduces(const std::vector<std::int64_t>& earlier) {
    result_.cases_run += static_cast<std::int64_t>(earlier.size()) + 1;
    ++result_.replays;
    result_.longest_tried = std::max<std::int64_t>(result_.longest_tried, static_cast<std::int64_t>(earlier.size()));
    CheckOutcome outcome = replay_sequence(open_, earlier, case_at_, failing_);
    if (outcome.verdict != Verdict::fail) return false;
    result_.reproduced = true;
    result_.earlier = earlier;
    result_.outcome = std::move(outcome);
    return true;
  }

 private:
  const ImplementationFactory& open_;
  const std::function<CaseSpec(std::int64_t)>& case_at_;
  const CaseSpec& failing_;
  std::int64_t budget_;
  SequenceSearch& result_;
};

// `cases` without its chunk `chunk` of `chunks` (near-equal chunks, in order).
std::vector<std::int64_t> without_chunk(const std::vector<std::int64_t>& cases, std::size_t chunk, std::size_t chunks) {
  const std::size_t begin = cases.size() * chunk / chunks;
  const std::size_t end = cases.size() * (chunk + 1) / chunks;
  std::vector<std::int64_t> rest(cases.begin(), cases.begin() + static_cast<std::ptrdiff_t>(begin));
  rest.insert(rest.end(), cases.begin() + static_cast<std::ptrdiff_t>(end), cases.end());
  return rest;
}

}  // namespace

SequenceSearch find_sequence(const ImplementationFactory& open, const std::vector<std::int64_t>& earlier,
                             const std::function<CaseSpec(std::int64_t)>& case_at, const CaseSpec& failing,
                             std::int64_t budget) {
  SequenceSearch result;
  Search search(open, case_at, failing, budget, result);
  // The shortest suffix of 1, 2, 4, ... earlier cases (all of them last) that reproduces.
  std::vector<std::int64_t> sequence;
  for (std::size_t length = 1; !earlier.empty(); length = std::min(2 * length, earlier.size())) {
    const std::vector<std::int64_t> suffix(earlier.end() - static_cast<std::ptrdiff_t>(length), earlier.end());
    if (!search.affordable(suffix)) {
      result.budget_spent = true;
      return result;
    }
    if (search.reproduces(suffix)) {
      sequence = suffix;
      break;
    }
    if (length == earlier.size()) return result;  // all of them, from the start: not reproduced
  }
  if (!result.reproduced) return result;
  // Delta debugging (Zeller's ddmin, complements only): drop one of n chunks while it still fails;
  // when none can go, split finer, down to single cases.
  std::size_t chunks = 2;
  while (true) {
    bool dropped = false;
    for (std::size_t chunk = 0; chunk < std::min(chunks, sequence.size()); ++chunk) {
      const std::vector<std::int64_t> rest = without_chunk(sequence, chunk, std::min(chunks, sequence.size()));
      if (rest.empty()) continue;  // the failing case alone: the caller saw it pass
      if (!search.affordable(rest)) {
        result.budget_spent = true;
        return result;
      }
      if (search.reproduces(rest)) {
        sequence = rest;
        chunks = std::max<std::size_t>(chunks - 1, 2);
        dropped = true;
        break;
      }
    }
    if (dropped) continue;
    if (chunks >= sequence.size()) break;  // no single case can go
    chunks = std::min(2 * chunks, sequence.size());
  }
  return result;
}

}  // namespace attncheck::properties
