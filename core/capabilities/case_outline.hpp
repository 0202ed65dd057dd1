// A case without its tensors: everything that decides which features it uses (core/capabilities/feature.hpp)
// and whether an implementation can run it, and nothing that costs memory. A golden's outline is read
// without generating its weights or inputs (golden::read_case_outline), so that a case an implementation
// does not state it supports is set aside before anything large is read or computed.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/capabilities/feature.hpp"
#include "core/model/case.hpp"

namespace attncheck {

struct CaseOutline {
  TpPlan plan;
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::vector<std::int64_t> positions;    // [batch, seq], as Inputs::positions
  std::vector<std::int64_t> key_lengths;  // [batch]
  DecodeSchedule decode;
  std::optional<CpSpec> context_parallel;

  const Geometry& geometry() const { return plan.geometry; }
};

CaseOutline outline_of(const Case& test_case);

// Whether some query of the case sees no key: padding, the causal limit and the window leave it nothing
// (core/model/case.hpp's mask, which KV-cache decoding keeps: the same keys per query).
bool has_keyless_queries(const CaseOutline& outline);

// Every feature the case uses, parts included (backward always: every case has an upstream gradient).
FeatureSet features_of(const CaseOutline& outline);

}  // namespace attncheck
