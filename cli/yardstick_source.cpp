#include "cli/yardstick_source.hpp"

#include "golden/stored_yardstick.hpp"
#include "reference/yardstick.hpp"

namespace attncheck::cli {

SourcedYardstick golden_yardstick(const std::string& golden_path, const golden::Golden& golden,
                                  const NamedTensors& expected, Precision precision, RopeAngles angles,
                                  TpConvention convention) {
  if (precision == Precision::fp64) return {};
  const golden::YardstickContract contract{precision, angles, convention};
  if (std::optional<YardstickErrors> stored =
          golden::read_stored_yardstick(golden_path, contract, reference::kYardstickVersion)) {
    bool complete = true;
    for (const auto& [name, tensor] : expected) complete = complete && stored->count(name) > 0;
    if (complete) return {std::move(*stored), true};
  }
  return {reference::yardstick_errors(golden.test_case, expected, precision, angles, convention), false};
}

}  // namespace attncheck::cli
