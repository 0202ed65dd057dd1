// Shrinking a failing case's sequence length first: the smallest length that still fails, everything
// else kept, found by bisection. Greedy descent through RapidCheck's shrink tree tries the geometry's
// shrinks first, each at the full length, so a long-profile failure at seq 2377 could spend its whole
// budget on a handful of candidates; a probe at half the length costs a quarter of a case, so bisecting
// the length first (about log2(seq) probes) makes every later candidate cheap.
#pragma once

#include <cstdint>
#include <functional>

#include "properties/case_spec.hpp"

namespace attncheck::properties {

// The spec at `seq` tokens (seq >= 2), everything else kept where it stays valid: explicit key lengths
// are capped at seq, and a decode schedule keeps its calls from the end of the row, shortening the
// prefill first (to at least one token) and then dropping the last calls until it fits.
CaseSpec with_length(const CaseSpec& spec, std::int64_t seq);

struct LengthShrink {
  CaseSpec spec;              // the shortest failing spec found (the input's when none shorter fails)
  std::int64_t probes = 0;    // lengths tried (each one call of `fails`)
  bool budget_spent = false;  // stopped because `max_probes` were tried, before the bisection ended
};

// Bisection over [min_seq, spec.inputs.seq] for the smallest length whose with_length() still fails,
// assuming a failing length stays failing when lengthened (where it does not, the result is still a
// failing length whose next shorter one passed). `fails` is called at most max_probes times; `spec`
// itself is known to fail and is not probed.
LengthShrink shrink_length(const CaseSpec& spec, std::int64_t min_seq, std::int64_t max_probes,
                           const std::function<bool(const CaseSpec&)>& fails);

}  // namespace attncheck::properties
