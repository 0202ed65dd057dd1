// Helpers shared by the property tests (RC_GTEST_PROP): the comparison every property asserts with,
// in the fp64 tolerance model of core/compare, and RC_CLASSIFY labels for coverage.
#pragma once

#include <rapidcheck.h>

#include <string>

#include "core/compare/compare.hpp"
#include "core/errors/input_error.hpp"
#include "core/model/result.hpp"
#include "properties/case_spec.hpp"
#include "reference/reference.hpp"

namespace attncheck::properties::testing {

// RC_ASSERTs that actual matches expected tensor by tensor (fp64 tolerance), printing the report.
inline void assert_close(const Case& test_case, const NamedTensors& expected, const NamedTensors& actual) {
  const CompareReport report = compare(test_case, expected, actual, Precision::fp64);
  if (!report.passed()) RC_FAIL(render_text(report));
}

// reference-tp's tensors for the case; the case is discarded when the oracle has no answer (a
// non-finite fp64 result).
inline NamedTensors reference_tp_or_discard(const Case& test_case) {
  try {
    return named_tensors(reference::run_reference_tp(test_case));
  } catch (const InputError&) {
    RC_DISCARD("no reference answer (a non-finite fp64 result)");
  }
  return {};
}

inline NamedTensors without_ranks(NamedTensors tensors) {
  std::erase_if(tensors, [](const auto& entry) { return entry.first.starts_with("ranks/"); });
  return tensors;
}

// Coverage of the generator, shown by RapidCheck after each property.
inline void classify(const CaseSpec& spec) {
  const Geometry g = resolve_geometry(spec.geometry);
  RC_CLASSIFY(g.head_dim_source() == HeadDimSource::derived, "head_dim omitted");
  RC_CLASSIFY(g.query_width() != g.hidden_size(), "query width != hidden");
  RC_CLASSIFY(g.group_size() > 1, "GQA");
  RC_CLASSIFY(spec.inputs.tp_size > g.num_kv_heads(), "TP > KV heads (replicated)");
  RC_CLASSIFY(g.rotary_dim() < g.head_dim(), "partial RoPE");
  RC_CLASSIFY(!spec.inputs.decode.empty(), "decode");
  RC_CLASSIFY(g.rotary_dim() == 0, "NoPE");
  RC_CLASSIFY(g.rope_scaling().type != RopeScalingType::none,
              std::string(to_string(g.rope_scaling().type)) + " RoPE scaling");
  RC_CLASSIFY(g.scale_source() == ScaleSource::attention_multiplier, "attention_multiplier");
  RC_CLASSIFY(g.attention_sinks(), "attention sinks");
}

}  // namespace attncheck::properties::testing
