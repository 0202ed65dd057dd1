// The yardstick a check of a golden file uses (core/compare/tolerance.hpp), and where it came from. A yardstick
// sets a tolerance, so a value stored in the file is used as it stands only when it is bound to the integrity
// digest verified when the golden was read (Golden::verified_digest; golden/stored_yardstick.hpp and SCHEMA.md
// "Stored yardsticks" say what that binding does and does not protect against); a stored one without
// that is checked against a recomputation (reference/yardstick.hpp: up to twenty naive runs of the layer) and the
// file is refused (exit 2) when they differ; with no current stored one the yardstick is computed now. Every
// report says which of these it used (describe()).
#pragma once

#include <ostream>
#include <string>

#include "core/compare/compare.hpp"
#include "core/compare/sourced_yardstick.hpp"
#include "golden/golden_file.hpp"

namespace attncheck::cli {

// expected: what the candidate is held to (golden::expected_tensors under `convention`); every name in it
// must be in a stored yardstick for that one to be used. InputError when a stored yardstick that is not bound
// differs from its recomputation.
// heartbeat: where to print plain progress lines while a yardstick is computed (cli/heartbeat.hpp), or nullptr.
SourcedYardstick golden_yardstick(const std::string& golden_path, const golden::Golden& golden,
                                  const NamedTensors& expected, Precision precision, RopeAngles angles,
                                  TpConvention convention, std::ostream* heartbeat = nullptr);

}  // namespace attncheck::cli
