// The fuzzer behind `attncheck fuzz` and `attncheck mutants`: cases from the property generators, each
// checked against the reference (checks.hpp) in one instance of the implementation; the first failure
// is shrunk (shrinking.hpp: the length first, then RapidCheck's shrink tree), re-checked in a fresh
// instance, and saved as a repro file (repro.hpp). A failure that a fresh instance does not show
// depends on earlier cases: the shortest sequence of them that reproduces it is found and saved
// (state_dependence.hpp), and it is reported as such, never as a pass.
//
// Determinism: case i uses RapidCheck's Random seeded from (seed, i) and size i % 101, so a seed names
// the same sequence of cases on every machine; --shard k/n runs the cases i with i % n == k, which
// splits one campaign over n machines with no coordination. A verdict is decided by counts alone — a
// case budget, a shrink candidate budget, a sequence search budget — so it is the same on every
// machine at any load; a time limit only stops a runaway, and a run it stopped says so.
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
#include "properties/state_dependence.hpp"

namespace attncheck::properties {

// Shrink candidates checked at most by default (`--shrink-candidates`). Measured with the default seed
// on the 69 mutants, a greedy shrink to the end took at most 88 candidates (short profile); the long
// profile's two accumulation mutants, whose candidates take seconds each, are capped at 12 by the catalog.
inline constexpr std::int64_t kDefaultShrinkCandidates = 2000;
// Cases run at most finding the earlier cases a failure needs (`--sequence-cases`).
inline constexpr std::int64_t kDefaultSequenceCases = 2000;

struct FuzzOptions {
  std::uint64_t seed = 1;
  // The case budget: the verdict is these cases, the same on every machine.
  std::optional<std::int64_t> cases;
  // Or a time-bounded, exploratory run: how many cases it covers depends on the machine and its load
  // (the default when neither is set: 60 s).
  std::optional<double> seconds;
  // With `cases`: a runaway stop. A run it stops has no verdict (FuzzReport::stopped_by_time_limit).
  std::optional<double> time_limit_seconds;
  std::int64_t shard_index = 0;
  std::int64_t shard_count = 1;
  GenLimits limits;
  std::string repro_dir;  // where the failing case is saved; empty: a fresh temporary folder (repro_folder())
  std::int64_t shrink_candidates = kDefaultShrinkCandidates;
  double shrink_time_limit_seconds = 300.0;  // a runaway stop for shrinking (0: none)
  std::int64_t sequence_cases = kDefaultSequenceCases;
  double progress_seconds = 2.0;  // between progress lines (0: none)
};

// How the failure reproduces outside the instance that found it.
enum class Reproduction {
  alone,                // the shrunk case fails in a fresh instance
  original_alone,       // the shrunk case fails only after shrinking's earlier candidates; the original alone
  after_earlier_cases,  // only after earlier cases in the same process: `earlier_cases`, then `failing`
  not_reproduced,       // neither alone nor after the earlier cases replayed in a fresh instance
};

struct Counterexample {
  CaseSpec original;
  std::int64_t original_index = 0;  // the failing case's index in the seed's sequence
  CaseSpec shrunk;                  // in the instance that found it
  // The case the repro ends with: the shrunk one, or the original where only that reproduces.
  CaseSpec failing;
  bool failing_is_shrunk = true;
  // The failing case's outcome where it reproduced (a fresh instance, alone or at the end of the
  // sequence); not_reproduced: the original case's in the instance that found it.
  CheckOutcome outcome;
  std::int64_t shrink_steps = 0;
  std::int64_t shrink_candidates = 0;  // checked, length probes included
  std::int64_t shrink_length_probes = 0;
  bool shrink_budget_spent = false;
  bool shrink_stopped_by_time_limit = false;  // the shrunk case then depends on the machine
  double shrink_seconds = 0.0;
  Reproduction reproduction = Reproduction::alone;
  std::vector<std::int64_t> earlier_cases;  // after_earlier_cases: their indices, in the order they run
  std::int64_t sequence_cases_run = 0;      // the search for them
  bool sequence_budget_spent = false;
  std::int64_t sequence_longest_tried = 0;  // not_reproduced: the most earlier cases a replay ran first
  std::string repro_path;     // a repro file, or a sequence folder (after_earlier_cases); empty when not written
  std::string repro_problem;  // why it was not written (ReproNotWritten), when repro_path is empty
};

struct FuzzReport {
  std::int64_t cases = 0;                   // checked, including unsupported ones and the failing one
  std::optional<std::int64_t> case_budget;  // the cases asked for (absent: a time-bounded run)
  bool time_bounded = false;                // ran for a time, not a case budget: coverage depends on the machine
  bool stopped_by_time_limit = false;       // the runaway stop fired before the case budget: no verdict
  std::int64_t unsupported = 0;
  std::map<std::string, std::int64_t> unsupported_reasons;  // each reason given, with how many cases gave it
  // Cases checked on what they computed with some tensors declined (DeclinedParts): counted apart, and
  // each declined reason with how many cases gave it (once per case, however many tensors it covered).
  std::int64_t with_declined = 0;
  std::map<std::string, std::int64_t> declined_reasons;
  // Of the cases judged (not unsupported), how many exercised each feature (parts only where judged: decode
  // where decode/out was, tensor-parallel where the per-rank gradients were): what the campaign covered.
  std::map<Feature, std::int64_t> exercised;
  std::int64_t judged() const { return cases - unsupported; }
  // What the cases were drawn within: the implementation's capabilities (narrowed by --only / --without).
  Capabilities capabilities;
  double seconds = 0.0;  // until the failure (or the end), without shrinking
  std::int64_t largest_work = 0;
  std::string largest;  // describe() of the largest case checked (unsupported ones aside)
  std::optional<Counterexample> failure;
  double cases_per_second() const { return seconds > 0 ? static_cast<double>(cases) / seconds : 0.0; }
  // Cases were drawn and the implementation declined every one: nothing was checked. Never clean.
  bool ran_nothing() const { return cases > 0 && unsupported == cases; }
  // The `count` most frequent unsupported reasons, "N x reason", most frequent first, then "N x for K other
  // reasons" for the rest: every case is counted.
  std::vector<std::string> top_unsupported_reasons(std::size_t count) const;
  // The same for declined reasons.
  std::vector<std::string> top_declined_reasons(std::size_t count) const;
};

// Fuzzes `implementation` (which runs every case) with cases drawn within its capabilities
// (GenLimits::within); `open_fresh` opens another instance of it for the checks of a failure in a fresh
// instance (required). InputError when the profile and its capabilities leave no case.
FuzzReport fuzz(impl::Implementation& implementation, const ImplementationFactory& open_fresh,
                const FuzzOptions& options, std::ostream* progress);

// The (seed, index) -> spec mapping the fuzzer uses, for tests and replays.
CaseSpec fuzz_case(std::uint64_t seed, std::int64_t index, const GenLimits& limits);

// "cases [3, 17] then the failing one (case 25)": a sequence as fuzz and replay report it.
std::string describe_sequence(const std::vector<std::int64_t>& earlier, std::int64_t failing_index);

}  // namespace attncheck::properties
