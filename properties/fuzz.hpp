// The fuzzer behind `attncheck fuzz` and `attncheck mutants`: cases from the property generators, each
// checked against the reference (checks.hpp); the first failure is shrunk through RapidCheck's shrink
// tree to the smallest case that still fails and saved as a repro file (repro.hpp).
//
// Determinism: case i uses RapidCheck's Random seeded from (seed, i) and size i % 101, so a seed names
// the same sequence of cases on every machine; --shard k/n runs the cases i with i % n == k, which
// splits one campaign over n machines with no coordination.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "properties/case_spec.hpp"
#include "properties/checks.hpp"
#include "properties/generators.hpp"

namespace attncheck::properties {

struct FuzzOptions {
  std::uint64_t seed = 1;
  std::optional<double> seconds;      // stop after this long (the default when neither is set: 60 s)
  std::optional<std::int64_t> cases;  // or after this many cases
  std::int64_t shard_index = 0;
  std::int64_t shard_count = 1;
  GenLimits limits;
  std::string repro_dir = ".";    // where the failing case is saved
  double shrink_seconds = 60.0;   // shrinking stops after this long with the smallest failure so far
  double progress_seconds = 2.0;  // between progress lines (0: none)
};

struct Counterexample {
  CaseSpec original;
  CaseSpec shrunk;
  CheckOutcome outcome;  // the shrunk case's
  std::int64_t shrink_steps = 0;
  double shrink_seconds = 0.0;
  std::string repro_path;
};

struct FuzzReport {
  std::int64_t cases = 0;  // checked, including unsupported ones and the failing one
  std::int64_t unsupported = 0;
  std::map<std::string, std::int64_t> unsupported_reasons;  // each reason given, with how many cases gave it
  // Cases checked on what they computed with some tensors declined (DeclinedParts): counted apart, and
  // each declined reason with how many cases gave it (once per case, however many tensors it covered).
  std::int64_t with_declined = 0;
  std::map<std::string, std::int64_t> declined_reasons;
  double seconds = 0.0;  // until the failure (or the end), without shrinking
  std::int64_t largest_work = 0;
  std::string largest;  // describe() of the largest case checked (unsupported ones aside)
  std::optional<Counterexample> failure;
  double cases_per_second() const { return seconds > 0 ? static_cast<double>(cases) / seconds : 0.0; }
  // Cases were drawn and the implementation declined every one: nothing was checked. Never clean.
  bool ran_nothing() const { return cases > 0 && unsupported == cases; }
  // The most frequent unsupported reasons, "N x reason", most frequent first.
  std::vector<std::string> top_unsupported_reasons(std::size_t count) const;
  // The same for declined reasons.
  std::vector<std::string> top_declined_reasons(std::size_t count) const;
};

FuzzReport fuzz(impl::Implementation& implementation, const FuzzOptions& options, std::ostream* progress);

// The (seed, index) -> spec mapping the fuzzer uses, for tests and replays.
CaseSpec fuzz_case(std::uint64_t seed, std::int64_t index, const GenLimits& limits);

}  // namespace attncheck::properties
