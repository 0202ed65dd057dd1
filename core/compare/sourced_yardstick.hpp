// A yardstick (core/compare/tolerance.hpp) and where it came from: every report says which one set a
// tolerance below fp64. A golden's yardstick is stored (bound to its verified integrity digest), recomputed
// (stored without a binding that counts, and equal to its recomputation) or computed now
// (cli/yardstick_source.hpp); the fuzzer's and the property suite's are always computed now.
#pragma once

#include <string>
#include <string_view>

#include "core/compare/compare.hpp"

namespace attncheck {

enum class YardstickSource {
  none,        // fp64 within 2^16 ulps of every tensor's scale: no yardstick
  stored,      // read from the golden, its binding matching the file's verified integrity digest
  recomputed,  // stored without a binding that counts, recomputed and equal: the recomputation is used
  computed,    // nothing current stored: computed now
};

struct SourcedYardstick {
  YardstickErrors errors;  // fp64: empty unless a tensor beyond 2^16 ulps had it computed (contract "fp64")
  YardstickSource source = YardstickSource::none;
  std::string contract;  // "fp32.float32.replicated-kv"; "fp64" or empty for fp64
};

// "stored", "recomputed", "computed" or "none" (not to_string: it would hide attncheck::to_string in callers).
std::string_view source_name(YardstickSource source);
// One line for reports: "yardstick fp32.float32.replicated-kv: stored in the golden, bound to its integrity
// digest"; "" for fp64.
std::string describe(const SourcedYardstick& yardstick);

}  // namespace attncheck
