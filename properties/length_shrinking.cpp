#include "properties/length_shrinking.hpp"

#include <algorithm>

namespace attncheck::properties {

CaseSpec with_length(const CaseSpec& spec, std::int64_t seq) {
  CaseSpec shorter = spec;
  InputOptions& inputs = shorter.inputs;
  inputs.seq = seq;
  for (std::int64_t& keys : inputs.key_lengths) keys = std::min(keys, seq);
  DecodeSchedule& decode = inputs.decode;
  if (decode.empty()) return shorter;
  // The calls at the end of the row are what a decode bug lives in: the prefill gives way first.
  const std::int64_t excess = decode.total() - seq;
  if (excess > 0) decode.prefill = std::max<std::int64_t>(1, decode.prefill - excess);
  while (decode.total() > seq && !decode.steps.empty()) {
    std::int64_t& last = decode.steps.back();
    const std::int64_t over = decode.total() - seq;
    if (last > over) {
      last -= over;
    } else {
      decode.steps.pop_back();
    }
  }
  if (decode.steps.empty()) decode = {.prefill = seq - 1, .steps = {1}};  // still a decoding case
  return shorter;
}

LengthShrink shrink_length(const CaseSpec& spec, std::int64_t min_seq, std::int64_t max_probes,
                           const std::function<bool(const CaseSpec&)>& fails) {
  LengthShrink result{.spec = spec};
  // Invariant: `high` fails; every length below `low` that was probed passed.
  std::int64_t low = std::min(min_seq, spec.inputs.seq);
  std::int64_t high = spec.inputs.seq;
  while (low < high) {
    if (result.probes >= max_probes) {
      result.budget_spent = true;
      break;
    }
    const std::int64_t middle = low + (high - low) / 2;
    const CaseSpec probe = with_length(spec, middle);
    ++result.probes;
    if (fails(probe)) {
      high = middle;
      result.spec = probe;
    } else {
      low = middle + 1;
    }
  }
  return result;
}

}  // namespace attncheck::properties
