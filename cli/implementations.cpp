#include "cli/implementations.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/input_error.hpp"
#include "reference/reference.hpp"

namespace attncheck::cli {

std::vector<std::string> implementation_names() {
  return {"reference", "reference-tp"};
}

Result run_implementation(const std::string& name, const Case& test_case) {
  if (name == "reference") return reference::run_reference(test_case);
  if (name == "reference-tp") return reference::run_reference_tp(test_case);
  ViolationList violations;
  violations.add("--impl", name, "must name an implementation attncheck has",
                 fmt::format("valid: {}", fmt::join(implementation_names(), ", ")));
  violations.throw_if_any("unknown implementation");
  return {};
}

bool produces_rank_gradients(const std::string& name) {
  return name == "reference-tp";
}

}  // namespace attncheck::cli
