// A rough duration of the work on a case, printed before a computation that will take long (cli/heartbeat.hpp),
// so that nobody watches a silent terminal for minutes wondering whether attncheck hangs. It decides nothing:
// no verdict, limit or case budget depends on it.
//
// The model: the fp64 reference's arithmetic (projection GEMMs forward and backward, the attention blocks,
// decoding's re-run of its calls) in floating-point operations, plus a cost per score (masks, exp, softmax)
// and per parameter (generating the weights, first touches of their pages, the gradient sketches), over this
// machine's rate measured once per process by timing a small Eigen GEMM. The constants were fitted on the
// committed goldens on the project's 2-core VM (docs/MEASUREMENTS.md, "Time estimates"); estimates land
// within about 2x of the time taken there.
#pragma once

#include "core/model/case.hpp"
#include "core/model/precision.hpp"

#include <string>

namespace attncheck::reference {

// The fp64 reference's work on a case of this plan and these sizes, in floating-point operations' time: its
// products forward, backward and decoding, and each score's elementwise steps (the case itself need not exist
// yet: golden make estimates before generating it).
double reference_flops(const TpPlan& plan, std::int64_t batch, std::int64_t seq, const DecodeSchedule& decode);
double reference_flops(const Case& test_case);

// This machine's double-precision GEMM rate now, in operations per second: the best of three timings of a
// 192 x 192 x 192 Eigen product on the reference's threads. Measured on the first call (tens of
// milliseconds), then cached.
double measured_flop_rate();

// Seconds the fp64 reference should take on the case here, and the yardstick of `precision` (its runs of the
// emulated layer, each slower than a reference run; fp64's is computed only for a candidate beyond 2^16 ulps).
double estimated_reference_seconds(const TpPlan& plan, std::int64_t batch, std::int64_t seq,
                                   const DecodeSchedule& decode);
double estimated_reference_seconds(const Case& test_case);
double estimated_yardstick_seconds(const Case& test_case, Precision precision);

// "about 40 s", "about 3 min", "about 2.5 h".
std::string describe_duration(double seconds);

}  // namespace attncheck::reference
