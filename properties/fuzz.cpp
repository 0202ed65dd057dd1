#include "properties/fuzz.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>
#include <functional>

#include <chrono>
#include <set>
#include <stdexcept>

#include "core/generation/splitmix_stream.hpp"
#include "properties/repro.hpp"
#include "properties/shrinking.hpp"

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

// "N x reason" for the `count` most frequent reasons, most frequent first (ties in reason order).
std::vector<std::string> top_reasons(const std::map<std::string, std::int64_t>& reasons, std::size_t count) {
  std::vector<std::pair<std::int64_t, std::string>> ranked;
  for (const auto& [reason, given] : reasons) ranked.emplace_back(given, reason);
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < std::min(count, ranked.size()); ++i) {
    lines.push_back(fmt::format("{} x {}", ranked[i].first, ranked[i].second));
  }
  // Every case accounted for: the rest in one line, never left out silently.
  std::int64_t rest = 0;
  for (std::size_t i = count; i < ranked.size(); ++i) rest += ranked[i].first;
  if (rest > 0) lines.push_back(fmt::format("{} x for {} other reasons", rest, ranked.size() - count));
  return lines;
}

void say(std::ostream* progress, const std::string& line) {
  if (progress) *progress << line << '\n' << std::flush;
}

// The repro `write` makes, or why it could not: the failure is reported either way (a folder, FIFO or symlink in
// the way is the repro's problem, not the run's).
void record_repro(Counterexample& failure, const std::function<std::string()>& write) {
  try {
    failure.repro_path = write();
  } catch (const ReproNotWritten& error) {
    failure.repro_path.clear();
    failure.repro_problem = error.what();
  }
}

// After the shrink in the fuzzing instance: where the failure reproduces (fresh instances), and its repro.
// `earlier` are the indices the fuzzing instance ran before the failing one.
// `original_outcome` is the original case's, in the fuzzing instance.
void reproduce(const std::string& name, const ImplementationFactory& open_fresh, const FuzzOptions& options,
               const std::vector<std::int64_t>& earlier, CheckOutcome original_outcome, Counterexample& failure,
               std::ostream* progress) {
  // A reproduction counts only as the same failure: the same property (a timeout is not a mismatch).
  const std::string property = original_outcome.property;
  const auto same_failure = [&property](const CheckOutcome& outcome) {
    return outcome.verdict == Verdict::fail && outcome.property == property;
  };
  say(progress, fmt::format("fuzz {}: checking the shrunk case in a fresh instance...", name));
  CheckOutcome alone = check_alone(open_fresh, failure.shrunk);
  if (same_failure(alone)) {
    failure.reproduction = Reproduction::alone;
    failure.outcome = std::move(alone);
    record_repro(failure, [&] { return write_repro(make_case(failure.failing), options.repro_dir, name); });
    return;
  }
  const bool shrank = !(failure.shrunk == failure.original);
  if (shrank) {
    say(progress, fmt::format("fuzz {}: it passes there; checking the original case in a fresh instance...", name));
    CheckOutcome original = check_alone(open_fresh, failure.original);
    if (same_failure(original)) {
      failure.reproduction = Reproduction::original_alone;
      failure.failing = failure.original;
      failure.failing_is_shrunk = false;
      failure.outcome = std::move(original);
      record_repro(failure, [&] { return write_repro(make_case(failure.failing), options.repro_dir, name); });
      return;
    }
  }
  if (property == kAnswersInTime) {
    // No sequence search for a timeout: every replay could cost the whole limit again.
    failure.reproduction = Reproduction::not_reproduced;
    failure.outcome = std::move(original_outcome);
    failure.failing = failure.original;
    failure.failing_is_shrunk = false;
    record_repro(failure, [&] { return write_repro(make_case(failure.original), options.repro_dir, name); });
    return;
  }
  say(progress, fmt::format("fuzz {}: it passes alone in a fresh instance; replaying the {} earlier cases from the "
                            "start (at most {} cases in all)...",
                            name, earlier.size(), options.sequence_cases));
  const auto case_at = [&options](std::int64_t index) { return fuzz_case(options.seed, index, options.limits); };
  SequenceSearch search = find_sequence(open_fresh, earlier, case_at, failure.original, options.sequence_cases);
  failure.sequence_cases_run = search.cases_run;
  failure.sequence_budget_spent = search.budget_spent;
  failure.sequence_longest_tried = search.longest_tried;
  failure.failing = failure.original;
  failure.failing_is_shrunk = false;
  if (!search.reproduced || search.outcome.property != property) {
    failure.reproduction = Reproduction::not_reproduced;
    failure.outcome = std::move(original_outcome);
    record_repro(failure, [&] { return write_repro(make_case(failure.original), options.repro_dir, name); });
    return;
  }
  failure.reproduction = Reproduction::after_earlier_cases;
  failure.earlier_cases = search.earlier;
  failure.outcome = std::move(search.outcome);
  // The shrunk case in the original's place, if the same earlier cases make it fail too.
  const std::int64_t replay_cost = static_cast<std::int64_t>(search.earlier.size()) + 1;
  if (shrank && failure.sequence_cases_run + replay_cost <= options.sequence_cases) {
    failure.sequence_cases_run += replay_cost;
    CheckOutcome shrunk = replay_sequence(open_fresh, search.earlier, case_at, failure.shrunk);
    if (same_failure(shrunk)) {
      failure.failing = failure.shrunk;
      failure.failing_is_shrunk = true;
      failure.outcome = std::move(shrunk);
    }
  }
  std::vector<SequenceCase> cases;
  for (const std::int64_t index : failure.earlier_cases) {
    cases.push_back({.test_case = make_case(case_at(index)), .name = fmt::format("case-{}", index)});
  }
  cases.push_back(
      {.test_case = make_case(failure.failing),
       .name = fmt::format("failing-case-{}{}", failure.original_index, failure.failing_is_shrunk ? "-shrunk" : "")});
  const std::string comment = fmt::format(
      "attncheck sequence repro: run these cases in this order in ONE instance of the implementation\n"
      "(attncheck replay FOLDER --impl NAME); the last fails only after the ones before it, and passes alone.\n"
      "{}: fuzz seed {}, {}",
      name, options.seed, describe_sequence(failure.earlier_cases, failure.original_index));
  record_repro(failure, [&] { return write_sequence_repro(cases, comment, options.repro_dir, name); });
}

// The features a case exercised as the check judged it: its parts only where they were judged.
FeatureSet judged_features(const Capabilities& capabilities, const Case& test_case) {
  const Admission admission = admit(capabilities, outline_of(test_case));
  FeatureSet features = admission.features;
  if (admission.parts_not_stated.contains("grads")) features.erase(Feature::backward);
  if (admission.parts_not_stated.contains("decode")) features.erase(Feature::decode);
  if (!admission.per_rank_gradients) {
    features.erase(Feature::tensor_parallel);
    features.erase(Feature::kv_replication);
  }
  if (!admission.context_parallel) features.erase(Feature::context_parallel);
  return features;
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

std::string describe_sequence(const std::vector<std::int64_t>& earlier, std::int64_t failing_index) {
  return fmt::format("case{} [{}] then the failing one (case {})", earlier.size() == 1 ? "" : "s",
                     fmt::join(earlier, ", "), failing_index);
}

FuzzReport fuzz(impl::Implementation& implementation, const ImplementationFactory& open_fresh,
                const FuzzOptions& requested, std::ostream* progress) {
  if (!open_fresh) throw std::logic_error("fuzz() needs a way to open a fresh instance of the implementation");
  // Every case, its shrinking and its replays drawn within what the implementation states.
  FuzzOptions options = requested;
  options.limits = requested.limits.within(implementation.capabilities(), implementation.name());
  const std::optional<double> seconds = options.seconds || options.cases ? options.seconds : std::optional(60.0);
  const rc::Gen<CaseSpec> generator = case_specs(options.limits);
  FuzzReport report;
  report.capabilities = implementation.capabilities();
  report.case_budget = options.cases;
  report.time_bounded = !options.cases;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_progress = start;
  for (std::int64_t k = 0;; ++k) {
    if (options.cases && report.cases >= *options.cases) break;
    if (seconds && seconds_since(start) >= *seconds) break;
    if (options.cases && options.time_limit_seconds && seconds_since(start) >= *options.time_limit_seconds) {
      report.stopped_by_time_limit = true;
      break;
    }
    const std::int64_t index = options.shard_index + k * options.shard_count;
    rc::Shrinkable<CaseSpec> shrinkable = generator(random_for(options.seed, index), size_for(index));
    const CaseSpec spec = shrinkable.value();
    const Case test_case = make_case(spec);
    CheckOutcome outcome = check_matches_reference(implementation, test_case);
    ++report.cases;
    if (const std::int64_t w = work(spec); outcome.verdict != Verdict::unsupported && w > report.largest_work) {
      report.largest_work = w;
      report.largest = describe(spec);
    }
    if (outcome.verdict == Verdict::unsupported) {
      ++report.unsupported;
      ++report.unsupported_reasons[outcome.unsupported_reason.substr(0, 200)];
    } else {
      for (const Feature feature : judged_features(implementation.capabilities(), test_case).list()) {
        ++report.exercised[feature];
      }
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
      say(progress, fmt::format("fuzz {}: case {} (index {}) fails {}: {}; shrinking...", implementation.name(),
                                report.cases, index, outcome.property, outcome.detail));
      const CheckOutcome original_outcome = outcome;
      // A timeout is not shrunk: every candidate could cost the whole limit, and a smaller case answering in
      // time says nothing about the one that did not.
      const bool timed_out = outcome.property == kAnswersInTime;
      ShrinkResult shrunk = shrink_failure(implementation, shrinkable, std::move(outcome),
                                           {.candidates = timed_out ? 0 : options.shrink_candidates,
                                            .time_limit_seconds = options.shrink_time_limit_seconds,
                                            .min_seq = options.limits.min_seq});
      Counterexample failure{.original = spec,
                             .original_index = index,
                             .shrunk = shrunk.shrunk,
                             .failing = shrunk.shrunk,
                             .outcome = std::move(shrunk.outcome),
                             .shrink_steps = shrunk.steps,
                             .shrink_candidates = shrunk.candidates,
                             .shrink_length_probes = shrunk.length_probes,
                             .shrink_budget_spent = shrunk.budget_spent,
                             .shrink_stopped_by_time_limit = shrunk.stopped_by_time_limit,
                             .shrink_seconds = shrunk.seconds};
      std::vector<std::int64_t> earlier;  // the indices this instance ran before, in order
      for (std::int64_t j = 0; j < k; ++j) earlier.push_back(options.shard_index + j * options.shard_count);
      reproduce(implementation.name(), open_fresh, options, earlier, original_outcome, failure, progress);
      report.failure = std::move(failure);
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
