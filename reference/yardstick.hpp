// The yardstick below fp64: how far a naive implementation of the layer in the candidate's precision
// (emulated_layer.hpp) lands from the expected fp64 tensors, the worst of several runs that round
// differently, per tensor. compare() allows k times this plus a floor (core/compare/tolerance.hpp).
#pragma once

#include <string>

#include "core/compare/compare.hpp"
#include "core/model/case.hpp"
#include "core/model/precision.hpp"

namespace attncheck::reference {

// The version of what yardstick_errors computes (the emulated layer's arithmetic, the set of runs and
// their seeds). Yardsticks stored in goldens (golden/stored_yardstick.hpp) are used only under the
// version they were computed with: change this whenever a change to emulated_layer.cpp or
// yardstick.cpp can change any error, and recompute the committed goldens' (golden/data/make_goldens.sh).
// ctest golden.stored_yardsticks_current recomputes them and fails when they differ under this version.
inline constexpr const char* kYardstickVersion = "attncheck-yardstick-v3";

// Errors of the emulated layer in `precision` against `expected` (tensors under golden names, sketched
// where `expected` holds sketches): fp32, one run per IEEE rounding mode of the softmax chain, 8
// jittered runs and 8 jittered runs with the backward's D formed from the output (flash-style);
// bf16/fp16, one nearest-rounded and 8 jittered runs; fp64 (the second rule for an fp64 candidate beyond 2^16
// ulps of a tensor's scale, core/compare/tolerance.hpp), one nearest-rounded and 16 jittered fp64 runs, 8 of
// them with a flash-style backward.
// angles: how the candidate forms its RoPE angles (its declared contract); the yardstick forms them so.
// tp_convention: how `expected` holds its per-rank tensors; each run's (replicated-kv, as the reference's)
// are regrouped to it before they are measured, so every rank's line meets its own counterpart.
// The fp64 yardstick's work bound: its 17 emulated runs are computed only for a case whose fp64 reference takes at
// most this many operations (reference_flops, run_time_estimate.hpp: a count, the same on every machine). Within
// it: every case of the short, latent and context-parallel profiles, where fuzzing found cancellation, and the
// smaller long ones. Beyond it (the committed goldens of thousands of tokens: 17 runs took minutes), a candidate
// beyond 2^16 ulps is held to that rule alone and its report says so, instead of waiting for the runs.
inline constexpr double kFp64YardstickWorkBound = 4294967296.0;  // 2^32
// "" when the case is within the bound, else why not (for the report).
std::string fp64_yardstick_beyond_bound(const Case& test_case);

YardstickErrors yardstick_errors(const Case& test_case, const NamedTensors& expected, Precision precision,
                                 RopeAngles angles = RopeAngles::float32,
                                 TpConvention tp_convention = TpConvention::replicated_kv);

}  // namespace attncheck::reference
