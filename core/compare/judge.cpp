#include "core/compare/judge.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/compare/rank_regroup.hpp"
#include "core/compare/tolerance.hpp"

namespace attncheck {

NamedTensors answers_as_held(NamedTensors answers, const TpPlan& plan, TpConvention from, bool sharded,
                             TpConvention to) {
  if (!sharded) {
    std::erase_if(answers, [](const auto& entry) { return entry.first.starts_with("ranks/"); });
    return answers;
  }
  if (from == to) return answers;
  return regroup_rank_tensors(std::move(answers), plan, from, to);
}

Judgement judge(Expectation expectation, const Candidate& candidate, std::string_view name) {
  const Case& test_case = expectation.test_case;
  const bool sharded_case = test_case.plan.tp_size > 1;
  Judgement judgement;
  if (sharded_case && !candidate.sharded) {
    judgement.notes.push_back(fmt::format("rank gradients not compared: {} reports none (unsharded)", name));
  } else if (sharded_case && candidate.tp_convention != expectation.held_as) {
    judgement.notes.push_back(fmt::format("rank gradients judged as {} holds them, {}; the expected {} ones regrouped",
                                          name, to_string(candidate.tp_convention), to_string(expectation.held_as)));
  }
  judgement.expected = expectation.already_held
                           ? std::move(expectation.answers)
                           : answers_as_held(std::move(expectation.answers), test_case.plan, expectation.held_as,
                                             candidate.sharded, candidate.tp_convention);
  if (candidate.precision != Precision::fp64) {
    judgement.yardstick = expectation.yardstick(judgement.expected, candidate);
  }
  judgement.report =
      compare(test_case, judgement.expected, candidate.tensors, candidate.precision, &judgement.yardstick.errors,
              candidate.rope_angles, candidate.tp_convention, candidate.declined);
  // fp64 beyond 2^16 ulps of a tensor's scale: held once more to the fp64 yardstick, the rounding of the case's
  // own terms (core/compare/tolerance.hpp, kFp64YardstickFactor). Only a mismatch can be rounding; a case the
  // emulated layer cannot measure keeps the first verdict (never unjudged: the first rule alone is strict).
  const auto mismatched = [](const TensorReport& tensor) { return tensor.status == TensorStatus::mismatch; };
  if (candidate.precision == Precision::fp64 && expectation.yardstick &&
      std::any_of(judgement.report.tensors.begin(), judgement.report.tensors.end(), mismatched)) {
    try {
      SourcedYardstick fp64_yardstick = expectation.yardstick(judgement.expected, candidate);
      if (!fp64_yardstick.errors.empty()) {
        judgement.yardstick = std::move(fp64_yardstick);
        judgement.report =
            compare(test_case, judgement.expected, candidate.tensors, candidate.precision, &judgement.yardstick.errors,
                    candidate.rope_angles, candidate.tp_convention, candidate.declined);
      }
    } catch (const NoYardstick& error) {
      judgement.notes.push_back(fmt::format("fp64 yardstick not computed ({}): held to {} ulps of the scale alone",
                                            error.what(), kFp64ToleranceUlps));
    }
  }
  return judgement;
}

}  // namespace attncheck
