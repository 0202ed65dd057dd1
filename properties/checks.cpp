#include "properties/checks.hpp"

#include <fmt/format.h>

#include "core/compare/judge.hpp"
#include "core/resources/memory_room.hpp"
#include "impl/candidate_run.hpp"
#include "reference/reference.hpp"
#include "reference/yardstick.hpp"

namespace attncheck::properties {

std::string one_line(std::string_view text) {
  std::string line;
  bool space = false;
  for (const char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !line.empty();
      continue;
    }
    if (space) line += ' ';
    space = false;
    line += c;
  }
  return line;
}

NamedTensors oracle_tensors(const Case& test_case, bool sharded) {
  NamedTensors tensors = named_tensors(reference::run_reference_tp(test_case));
  // One rank's gradients are the layer's: a TP 1 case has no per-rank gradients (SCHEMA.md), so a
  // sharded implementation that writes tp_size 1 without ranks/0 is not missing anything.
  if (!sharded || test_case.plan.tp_size == 1)
    std::erase_if(tensors, [](const auto& entry) { return entry.first.starts_with("ranks/"); });
  return tensors;
}

OracleAnswer oracle_answer(const Case& test_case) {
  try {
    return {.tensors = oracle_tensors(test_case, /*sharded=*/true)};  // per-rank ones dropped if not asked
  } catch (const NotEnoughMemory&) {
    // This machine's memory now, not the case: never a case dropped as "unsupported" (a rerun with more room
    // would judge it, so the verdict would depend on the machine). It stops the run, naming the estimate (exit 2).
    throw;
  } catch (const InputError& error) {
    return {.declined = one_line(error.what())};
  }
}

namespace {

// The run's outcome when it produced nothing to judge, as the fuzzer counts it.
std::optional<CheckOutcome> unjudged(const impl::CandidateRun& run, const std::string& name,
                                     const std::string& property) {
  using Kind = impl::CandidateRun::Kind;
  switch (run.kind) {
    case Kind::answered:
      return std::nullopt;
    case Kind::not_stated:
    case Kind::declined:
      return CheckOutcome{.verdict = Verdict::unsupported,
                          .property = property,
                          .detail = run.message,
                          .unsupported_reason = run.reason};
    case Kind::broken_promise:
      return CheckOutcome{.verdict = Verdict::fail, .property = std::string(kKeepsItsPromise), .detail = run.message};
    case Kind::no_answer:  // its own verdict: a timeout is not a wrong answer
      return CheckOutcome{.verdict = Verdict::fail, .property = std::string(kAnswersInTime), .detail = run.message};
    case Kind::raised:
    case Kind::out_of_memory:
      break;
  }
  return CheckOutcome{
      .verdict = Verdict::fail, .property = property, .detail = fmt::format("{} raised: {}", name, run.message)};
}

// The oracle, from the answer given or computed now; the implementation has run and answered.
CheckOutcome judged(impl::Implementation& implementation, const Case& test_case, const impl::CandidateRun& run,
                    const OracleAnswer& oracle) {
  CheckOutcome outcome{.property = "matches-reference"};
  if (!oracle.tensors) {
    return {.verdict = Verdict::unsupported,
            .property = outcome.property,
            .detail = fmt::format("no reference answer: {}", oracle.declined),
            .unsupported_reason = fmt::format("no reference answer (the fp64 oracle declined the case: {})",
                                              oracle.declined)};
  }
  // The oracle's per-rank gradients are held replicated-kv; the judge regroups them to how it holds its own.
  const YardstickFinder yardstick = [&test_case](const NamedTensors& expected, const Candidate& candidate) {
    if (candidate.precision == Precision::fp64) {  // beyond its work bound the judge keeps the first verdict
      if (std::string beyond = reference::fp64_yardstick_beyond_bound(test_case); !beyond.empty()) {
        throw NoYardstick(beyond);
      }
    }
    try {
      return SourcedYardstick{.errors = reference::yardstick_errors(test_case, expected, candidate.precision,
                                                                    candidate.rope_angles, candidate.tp_convention),
                              .source = YardstickSource::computed};
    } catch (const NotEnoughMemory&) {
      throw;  // this machine's memory, not the case (see oracle_answer)
    } catch (const InputError& error) {  // a case the emulated yardstick cannot measure (longrope decode)
      throw NoYardstick(one_line(error.what()));
    }
  };
  CompareReport report;
  try {
    report = attncheck::judge({.test_case = test_case,
                               .answers = *oracle.tensors,
                               .held_as = TpConvention::replicated_kv,
                               .yardstick = yardstick},
                              run.candidate, implementation.name())
                 .report;
  } catch (const NoYardstick& error) {
    return {.verdict = Verdict::unsupported,
            .property = outcome.property,
            .detail = fmt::format("no yardstick: {}", error.what()),
            .unsupported_reason = fmt::format("no yardstick (the emulated layer cannot measure the case: {})",
                                              error.what())};
  } catch (const InputError& error) {  // declined parts that are malformed, `out`, or also supplied
    return {.verdict = Verdict::fail,
            .property = outcome.property,
            .detail = fmt::format("{} disagrees with itself: {}", implementation.name(), error.what())};
  }
  if (!report.passed()) {
    outcome.verdict = Verdict::fail;
    int listed = 0;
    for (const TensorReport& tensor : report.tensors) {
      if (tensor.status == TensorStatus::ok || tensor.status == TensorStatus::declined) continue;
      if (listed++ == 3) {
        outcome.detail += ", ...";
        break;
      }
      if (!outcome.detail.empty()) outcome.detail += ", ";
      outcome.detail += fmt::format("{} {}", tensor.name, to_string(tensor.status));
      if (tensor.status == TensorStatus::mismatch) outcome.detail += fmt::format(" ({:.3g} ulps)", tensor.error_ulps);
    }
  }
  outcome.report = std::move(report);
  return outcome;
}

}  // namespace

CheckOutcome check_matches_reference(impl::Implementation& implementation, const Case& test_case) {
  impl::CandidateRun run =
      impl::run_candidate(implementation, test_case, admit(implementation.capabilities(), outline_of(test_case)));
  if (auto outcome = unjudged(run, implementation.name(), "matches-reference")) return *outcome;
  return judged(implementation, test_case, run, oracle_answer(test_case));  // the oracle only now
}

CheckOutcome check_matches_reference(impl::Implementation& implementation, const Case& test_case,
                                     const OracleAnswer& oracle) {
  impl::CandidateRun run =
      impl::run_candidate(implementation, test_case, admit(implementation.capabilities(), outline_of(test_case)));
  if (auto outcome = unjudged(run, implementation.name(), "matches-reference")) return *outcome;
  return judged(implementation, test_case, run, oracle);
}

}  // namespace attncheck::properties
