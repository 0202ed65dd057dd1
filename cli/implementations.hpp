// The implementations `attncheck golden check/run` can run on a case, by name: the fp64 references, and
// mutants — deliberately broken variants that show the checks bite. (LibTorch and CUDA
// implementations join when their issues land.)
#pragma once

#include <string>
#include <vector>

#include "core/case.hpp"
#include "core/result.hpp"

namespace attncheck::cli {

std::vector<std::string> implementation_names();  // "reference", "reference-tp": what `attncheck run` checks
std::vector<std::string> mutant_names();          // "mutant-...": must fail against any applicable golden

// Runs `name` on the case (forward, backward, decoding); InputError for an unknown name.
Result run_implementation(const std::string& name, const Case& test_case);

// Whether the implementation produces per-rank gradients (is TP-sharded).
bool produces_rank_gradients(const std::string& name);

}  // namespace attncheck::cli
