// The yardstick a check of a golden file uses (core/compare/tolerance.hpp): the one stored in the golden for
// the candidate's contract when it is current (golden/stored_yardstick.hpp: same yardstick version, same
// case), else computed now (reference/yardstick.hpp: twelve naive runs of the layer). Both give the same
// numbers; storing saves the time (`attncheck golden yardstick` writes them; golden/SCHEMA.md).
#pragma once

#include <string>

#include "core/compare/compare.hpp"
#include "golden/golden_file.hpp"

namespace attncheck::cli {

struct SourcedYardstick {
  YardstickErrors errors;  // empty for fp64, which needs none
  bool stored = false;     // read from the golden rather than computed
};

// expected: what the candidate is held to (golden::expected_tensors under `convention`); every name in it
// must be in a stored yardstick for that one to be used.
SourcedYardstick golden_yardstick(const std::string& golden_path, const golden::Golden& golden,
                                  const NamedTensors& expected, Precision precision, RopeAngles angles,
                                  TpConvention convention);

}  // namespace attncheck::cli
