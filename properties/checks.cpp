#include "properties/checks.hpp"

#include <fmt/format.h>

#include "core/compare/rank_regroup.hpp"
#include "reference/reference.hpp"
#include "reference/yardstick.hpp"

namespace attncheck::properties {

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
  } catch (const InputError& error) {
    return {.declined = error.what()};
  }
}

CheckOutcome check_matches_reference(impl::Implementation& implementation, const Case& test_case) {
  return check_matches_reference(implementation, test_case, oracle_answer(test_case));
}

CheckOutcome check_matches_reference(impl::Implementation& implementation, const Case& test_case,
                                     const OracleAnswer& oracle) {
  CheckOutcome outcome{.property = "matches-reference"};
  if (!oracle.tensors) {
    return {.verdict = Verdict::unsupported,
            .property = outcome.property,
            .detail = fmt::format("no reference answer: {}", oracle.declined),
            .unsupported_reason = "no reference answer (the fp64 oracle declined the case)"};
  }
  NamedTensors expected = *oracle.tensors;  // this check's copy: dropped and regrouped below for the implementation
  NamedTensors actual;
  try {
    actual = implementation.run(test_case);
  } catch (const impl::Unsupported& error) {
    return {.verdict = Verdict::unsupported,
            .property = outcome.property,
            .detail = error.what(),
            .unsupported_reason = error.violations().empty() ? error.what() : error.violations().front().rule};
  } catch (const impl::NoAnswer& error) {  // its own verdict: a timeout is not a wrong answer
    return {.verdict = Verdict::fail, .property = std::string(kAnswersInTime), .detail = error.what()};
  } catch (const std::exception& error) {
    return {.verdict = Verdict::fail,
            .property = outcome.property,
            .detail = fmt::format("{} raised: {}", implementation.name(), error.what())};
  }
  // Asked after the run: a worker's candidate declares its TP layout and precision contract.
  if (!implementation.sharded()) {
    std::erase_if(expected, [](const auto& entry) { return entry.first.starts_with("ranks/"); });
  }
  // The oracle's per-rank gradients (replicated-kv) regrouped to how the implementation holds its own.
  const TpConvention convention = implementation.tp_convention();
  expected = regroup_rank_tensors(std::move(expected), test_case.plan, TpConvention::replicated_kv, convention);
  const Precision precision = implementation.precision();
  const RopeAngles angles = implementation.rope_angles();
  YardstickErrors yardstick;
  try {
    yardstick = reference::yardstick_errors(test_case, expected, precision, angles, convention);
  } catch (const InputError& error) {  // a case the emulated yardstick cannot measure (longrope decode)
    return {.verdict = Verdict::unsupported,
            .property = outcome.property,
            .detail = fmt::format("no yardstick: {}", error.what()),
            .unsupported_reason = "no yardstick (the emulated layer cannot measure the case)"};
  }
  CompareReport report;
  try {
    report = compare(test_case, expected, actual, precision, &yardstick, angles, convention, implementation.declined());
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

}  // namespace attncheck::properties
