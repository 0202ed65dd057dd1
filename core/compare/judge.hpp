// The judge: one candidate held to one expectation, the one way `compare`, `golden check`, `run`,
// `replay`, `fuzz`, `mutants` and the property suite judge (and, through `attncheck compare --json`, the
// Python package's attncheck.judge and attncheck.check). The expected tensors are cut to what the
// candidate reports (no per-rank gradients from an unsharded one) and regrouped to how it holds them
// (rank_regroup.hpp), the yardstick of its precision contract is found, and compare() does the rest.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/compare/candidate.hpp"
#include "core/compare/compare.hpp"
#include "core/compare/sourced_yardstick.hpp"

namespace attncheck {

// The yardstick of `candidate`'s precision contract for `expected` (its tensors as the candidate is held to
// them): a golden's (stored or recomputed, cli/yardstick_source.hpp) or the fuzzer's (computed now).
// Called below fp64, and for an fp64 candidate when a tensor is beyond 2^16 ulps of its scale (its fp64 yardstick,
// always computed now, never stored: tolerance.hpp, kFp64YardstickFactor). May throw: a golden's finder InputError when
// a stored yardstick is refused (or the emulated layer cannot measure the case); the fuzzer's turns the latter into
// NoYardstick (properties/checks.cpp).
using YardstickFinder = std::function<SourcedYardstick(const NamedTensors& expected, const Candidate& candidate)>;

// A case the yardstick cannot measure (an emulated layer that cannot run it): the case is left unjudged,
// never passed or failed.
class NoYardstick : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a candidate is judged against.
struct Expectation {
  const Case& test_case;
  // The answers under golden-file names (a golden's /expected, sketches included, or the oracle's), every
  // per-rank gradient present and held under `held_as`.
  NamedTensors answers;
  TpConvention held_as = TpConvention::replicated_kv;
  YardstickFinder yardstick;
  // The answers are already answers_as_held(...) for this candidate (a reader that needed their names to read
  // the candidate's tensors, `attncheck compare`): nothing is cut or regrouped again; held_as still names how
  // the answers were held before, for the notes.
  bool already_held = false;
};

struct Judgement {
  CompareReport report;
  SourcedYardstick yardstick;  // fp64: source none unless a mismatch had the fp64 yardstick computed
  NamedTensors expected;       // the answers as the candidate was held to them (for heatmaps)
  // What was judged differently from the answers as they stand: per-rank gradients left out or regrouped.
  std::vector<std::string> notes;
};

// answers (every per-rank gradient, held under `from`) as a candidate is held to them: without the per-rank
// gradients when it reports none, else regrouped to `to`. InputError when `to` cannot partition the plan.
NamedTensors answers_as_held(NamedTensors answers, const TpPlan& plan, TpConvention from, bool sharded,
                             TpConvention to);

// Judges `candidate` (named `name` in notes) against `expectation`, whose answers it takes over. InputError
// when a declined part is malformed, `out`, or also supplied (the candidate disagrees with itself), when its TP
// convention cannot partition the plan (regrouping), or as the yardstick finder throws it; NoYardstick likewise.
Judgement judge(Expectation expectation, const Candidate& candidate, std::string_view name);

}  // namespace attncheck
