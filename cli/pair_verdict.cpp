#include "cli/pair_verdict.hpp"

#include <cmath>

#include "impl/implementation.hpp"
#include "reference/memory_estimate.hpp"

namespace attncheck::cli {

std::uint64_t PairMemory::bound_bytes() const {
  return static_cast<std::uint64_t>(std::ceil(reference::kPeakLayerBytesFactor * static_cast<double>(layer_bytes))) +
         reference::kPeakFixedAllowanceBytes;
}

PairVerdict::Kind failure_kind(const std::exception& error) {
  return dynamic_cast<const impl::NoAnswer*>(&error) != nullptr ? PairVerdict::Kind::no_answer
                                                                 : PairVerdict::Kind::raised;
}

std::string verdict_word(PairVerdict::Kind kind) {
  switch (kind) {
    case PairVerdict::Kind::judged:
      return "judged";
    case PairVerdict::Kind::unsupported:
      return "unsup.";
    case PairVerdict::Kind::raised:
      return "FAIL: raised";
    case PairVerdict::Kind::no_answer:
      return "NO ANSWER";
  }
  return "judged";
}

}  // namespace attncheck::cli
