#include "reference/yardstick.hpp"

#include <fmt/format.h>

#include "core/compare/rank_regroup.hpp"
#include "reference/emulated_layer.hpp"
#include "reference/run_time_estimate.hpp"

namespace attncheck::reference {

std::string fp64_yardstick_beyond_bound(const Case& test_case) {
  const double operations = reference_flops(test_case);
  if (operations <= kFp64YardstickWorkBound) return {};
  return fmt::format("the case's reference takes {:.3g} operations, beyond the fp64 yardstick's bound of {:.3g}",
                     operations, kFp64YardstickWorkBound);
}

YardstickErrors yardstick_errors(const Case& test_case, const NamedTensors& expected, Precision precision,
                                 RopeAngles angles, TpConvention tp_convention) {
  YardstickErrors errors;
  const auto held = [&](const Result& run) {
    return regroup_rank_tensors(named_tensors(run), test_case.plan, TpConvention::replicated_kv, tp_convention);
  };
  // fp64 (computed only for a candidate beyond 2^16 ulps of a tensor's scale, core/compare/tolerance.hpp): the
  // naive fp64 layer rounded to nearest, 8 jittered runs of it, and 8 with a flash-style backward (D from the
  // output, P from a stored log-sum-exp: PyTorch's CPU flash SDPA in double showed 8x the naive runs' error
  // behind a saturated softmax); the rounding of the case's own terms, which cancellation can make far larger
  // than ulps of the tensor's scale.
  constexpr std::uint64_t kJitteredRuns = 8;
  if (precision == Precision::fp64) {
    add_yardstick_run(expected, held(run_emulated(test_case, precision)), errors);
    for (const bool flash : {false, true}) {
      for (std::uint64_t seed = 1; seed <= kJitteredRuns; ++seed) {
        add_yardstick_run(expected,
                          held(run_emulated(test_case, precision,
                                            {.jitter_seed = seed, .d_from_output = flash, .p_from_lse = flash})),
                          errors);
      }
    }
    return errors;
  }
  // One run per IEEE rounding mode of the softmax chain (fp32; bf16/fp16 round to nearest only) and 8
  // jittered nearest-rounded ones (emulated_layer.hpp says why; with 4, torch-cpu-fp32's decode/out
  // exceeded twice the yardstick by 1% at fuzz seed 8, case 3,535). Folded one at a time: a Qwen3-32B
  // layer's gradients are 0.8 GB a run.
  for (const Rounding rounding : kRoundings) {
    if (precision != Precision::fp32 && rounding != Rounding::nearest) continue;
    add_yardstick_run(expected, held(run_emulated(test_case, precision, {.rounding = rounding, .angles = angles})),
                      errors);
  }
  for (std::uint64_t seed = 1; seed <= kJitteredRuns; ++seed) {
    add_yardstick_run(expected, held(run_emulated(test_case, precision, {.jitter_seed = seed, .angles = angles})),
                      errors);
  }
  // fp32: the same jittered runs with D formed from the output, as flash-style backwards form it
  // (emulated_layer.hpp). Only jittered runs reach the errors such kernels make (a nearest-rounded one
  // covered one of the first H200 run's four failing cases); bf16/fp16 kernels passed their fuzzing there
  // within the present yardstick, so theirs is left as it was.
  if (precision == Precision::fp32) {
    for (std::uint64_t seed = 1; seed <= kJitteredRuns; ++seed) {
      add_yardstick_run(
          expected,
          held(run_emulated(test_case, precision, {.jitter_seed = seed, .angles = angles, .d_from_output = true})),
          errors);
    }
  }
  return errors;
}

}  // namespace attncheck::reference
