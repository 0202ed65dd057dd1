#include "properties/fuzz.hpp"

#include <fmt/format.h>

#include <chrono>
#include <set>

#include "core/generation/splitmix_stream.hpp"
#include "properties/repro.hpp"

namespace attncheck::properties {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

rc::Random random_for(std::uint64_t seed, std::int64_t index) {
  SplitMixStream stream(seed, "attncheck-fuzz", static_cast<std::uint64_t>(index));
  return rc::Random(stream.next());
}

int size_for(std::int64_t index) {
  return static_cast<int>(index % 101);
}

bool fails(impl::Implementation& implementation, const CaseSpec& spec, CheckOutcome* outcome) {
  CheckOutcome result = check_matches_reference(implementation, make_case(spec));
  const bool failed = result.verdict == Verdict::fail;
  if (failed && outcome) *outcome = std::move(result);
  return failed;
}

// Greedy descent through RapidCheck's shrink tree: take the first shrink that still fails, repeat
// until none does (or the time is up). Every accepted step is a strictly smaller case.
Counterexample shrink(impl::Implementation& implementation, rc::Shrinkable<CaseSpec> failing, CheckOutcome outcome,
                      double budget_seconds) {
  const Clock::time_point start = Clock::now();
  Counterexample counterexample{.original = failing.value(), .shrunk = failing.value(), .outcome = std::move(outcome)};
  bool progressed = true;
  while (progressed && seconds_since(start) < budget_seconds) {
    progressed = false;
    auto candidates = failing.shrinks();
    while (auto candidate = candidates.next()) {
      if (seconds_since(start) >= budget_seconds) break;
      CheckOutcome candidate_outcome;
      if (fails(implementation, candidate->value(), &candidate_outcome)) {
        failing = std::move(*candidate);
        counterexample.shrunk = failing.value();
        counterexample.outcome = std::move(candidate_outcome);
        ++counterexample.shrink_steps;
        progressed = true;
        break;
      }
    }
  }
  counterexample.shrink_seconds = seconds_since(start);
  return counterexample;
}

// "N x reason" for the `count` most frequent reasons, most frequent first (ties in reason order).
std::vector<std::string> top_reasons(const std::map<std::string, std::int64_t>& reasons, std::size_t count) {
  std::vector<std::pair<std::int64_t, std::string>> ranked;
  for (const auto& [reason, given] : reasons) ranked.emplace_back(given, reason);
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < std::min(count, ranked.size()); ++i) {
    lines.push_back(fmt::format("{} x {}", ranked[i].first, ranked[i].second));
  }
  return lines;
}

}  // namespace

std::vector<std::string> FuzzReport::top_unsupported_reasons(std::size_t count) const {
  return top_reasons(unsupported_reasons, count);
}

std::vector<std::string> FuzzReport::top_declined_reasons(std::size_t count) const {
  return top_reasons(declined_reasons, count);
}

CaseSpec fuzz_case(std::uint64_t seed, std::int64_t index, const GenLimits& limits) {
  return case_specs(limits)(random_for(seed, index), size_for(index)).value();
}

FuzzReport fuzz(impl::Implementation& implementation, const FuzzOptions& options, std::ostream* progress) {
  const std::optional<double> seconds = options.seconds || options.cases ? options.seconds : std::optional(60.0);
  const rc::Gen<CaseSpec> generator = case_specs(options.limits);
  FuzzReport report;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_progress = start;
  for (std::int64_t k = 0;; ++k) {
    if (options.cases && report.cases >= *options.cases) break;
    if (seconds && seconds_since(start) >= *seconds) break;
    const std::int64_t index = options.shard_index + k * options.shard_count;
    rc::Shrinkable<CaseSpec> shrinkable = generator(random_for(options.seed, index), size_for(index));
    const CaseSpec spec = shrinkable.value();
    CheckOutcome outcome = check_matches_reference(implementation, make_case(spec));
    ++report.cases;
    if (const std::int64_t w = work(spec); outcome.verdict != Verdict::unsupported && w > report.largest_work) {
      report.largest_work = w;
      report.largest = describe(spec);
    }
    if (outcome.verdict == Verdict::unsupported) {
      ++report.unsupported;
      ++report.unsupported_reasons[outcome.unsupported_reason.substr(0, 200)];
    }
    if (outcome.report && outcome.report->declined_count() > 0) {
      ++report.with_declined;
      std::set<std::string> reasons;  // once per case
      for (const TensorReport& tensor : outcome.report->tensors) {
        if (tensor.status == TensorStatus::declined) reasons.insert(tensor.declined_reason.substr(0, 200));
      }
      for (const std::string& reason : reasons) ++report.declined_reasons[reason];
    }
    if (outcome.verdict == Verdict::fail) {
      report.seconds = seconds_since(start);
      if (progress) {
        *progress << fmt::format("fuzz {}: case {} (index {}) fails {}: {}; shrinking...\n", implementation.name(),
                                 report.cases, index, outcome.property, outcome.detail);
      }
      report.failure = shrink(implementation, std::move(shrinkable), std::move(outcome), options.shrink_seconds);
      report.failure->repro_path =
          write_repro(make_case(report.failure->shrunk), options.repro_dir, implementation.name());
      return report;
    }
    if (progress && options.progress_seconds > 0 &&
        std::chrono::duration<double>(Clock::now() - last_progress).count() >= options.progress_seconds) {
      last_progress = Clock::now();
      const double elapsed = seconds_since(start);
      *progress << fmt::format("fuzz {}: {} cases ({} unsupported), {:.1f} cases/s, largest: {}\n",
                               implementation.name(), report.cases, report.unsupported, report.cases / elapsed,
                               report.largest);
    }
  }
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace attncheck::properties
