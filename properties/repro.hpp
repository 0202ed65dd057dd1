// Repro files: a failing case saved as a golden file (schema v1: geometry, inputs, weights and the
// reference's answers), which `attncheck replay FILE --impl NAME` (or any golden reader) replays.
#pragma once

#include <string>

#include "core/model/case.hpp"

namespace attncheck::properties {

// Writes <directory>/repro-<implementation>-<hash of the case>.h5 and returns its path.
std::string write_repro(const Case& test_case, const std::string& directory, const std::string& implementation);

// The command that replays it, quoted for a POSIX shell.
std::string replay_command(const std::string& path, const std::string& implementation);

}  // namespace attncheck::properties
