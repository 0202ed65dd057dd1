#include "cli/yardstick_source.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "cli/heartbeat.hpp"
#include "core/compare/judge.hpp"
#include "core/errors/input_error.hpp"
#include "golden/stored_yardstick.hpp"
#include "reference/run_time_estimate.hpp"
#include "reference/yardstick.hpp"

namespace attncheck::cli {

SourcedYardstick golden_yardstick(const std::string& golden_path, const golden::Golden& golden,
                                  const NamedTensors& expected, Precision precision, RopeAngles angles,
                                  TpConvention convention, std::ostream* heartbeat) {
  std::optional<Case> completed;  // the case with the weights `compare` left out, made only to compute a yardstick
  if (precision == Precision::fp64) {
    // The fp64 yardstick (a candidate beyond 2^16 ulps of a tensor's scale) is never stored: computed now, within
    // its work bound (the judge keeps the first verdict, with this reason, beyond it).
    if (std::string beyond = reference::fp64_yardstick_beyond_bound(golden.test_case); !beyond.empty()) {
      throw NoYardstick(beyond);
    }
    std::optional<Heartbeat> beating;
    if (heartbeat != nullptr) {
      beating.emplace(*heartbeat,
                      fmt::format("{}: a tensor is beyond 2^16 ulps; computing the fp64 yardstick", golden_path),
                      reference::estimated_yardstick_seconds(golden.test_case, precision));
    }
    return {.errors = reference::yardstick_errors(golden::case_with_weights(golden, completed), expected, precision,
                                                  angles, convention),
            .source = YardstickSource::computed,
            .contract = "fp64"};
  }
  const golden::YardstickContract contract{precision, angles, convention};
  SourcedYardstick sourced{.errors = {}, .source = YardstickSource::computed, .contract = golden::contract_key(contract)};
  std::optional<golden::StoredYardstick> stored =
      golden::read_stored_yardstick(golden_path, contract, reference::kYardstickVersion, golden.verified_digest);
  const bool complete = stored && std::all_of(expected.begin(), expected.end(),
                                              [&](const auto& entry) { return stored->errors.count(entry.first) > 0; });
  if (complete && stored->bound) {
    sourced.errors = std::move(stored->errors);
    sourced.source = YardstickSource::stored;
    return sourced;
  }
  {
    std::optional<Heartbeat> beating;
    if (heartbeat != nullptr) {
      beating.emplace(*heartbeat, fmt::format("{}: computing the yardstick {}", golden_path, sourced.contract),
                      reference::estimated_yardstick_seconds(golden.test_case, precision));
    }
    sourced.errors = reference::yardstick_errors(golden::case_with_weights(golden, completed), expected, precision,
                                                 angles, convention);
  }
  if (!complete) return sourced;
  // Stored without a binding that counts: only a claim, held to its recomputation as --verify holds it.
  std::vector<std::string> differing;
  for (const auto& [name, error] : sourced.errors) {
    const double claimed = stored->errors.at(name);
    if (!golden::same_yardstick_value(claimed, error)) {
      differing.push_back(fmt::format("@{} = {:.17g} (recomputed {:.17g})", name, claimed, error));
    }
  }
  if (!differing.empty()) {
    ViolationList violations;
    violations.add(fmt::format("/yardstick/{}", sourced.contract), fmt::format("{}", fmt::join(differing, ", ")),
                   "a stored yardstick that is not bound to the file's verified integrity digest must equal its "
                   "recomputation (a yardstick sets the tolerance: an edited one would loosen the check)",
                   fmt::format("store it again with `attncheck golden yardstick {}` (after `attncheck golden seal` if "
                               "the file carries no integrity digest), or delete /yardstick",
                               golden_path));
    violations.throw_if_any(fmt::format("HDF5 file '{}'", golden_path));
  }
  sourced.source = YardstickSource::recomputed;
  return sourced;
}

}  // namespace attncheck::cli
