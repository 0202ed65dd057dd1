// One (golden, implementation) pair, judged the one way `golden check`, `run` and `replay` judge it: admitted by
// the implementation's capabilities on the golden's outline (golden::read_case_outline: nothing read or computed
// for a golden it does not state), held to the room its run needs, run (impl::run_candidate: declines, broken
// promises and failures told apart), then its tensors compared with the golden's expected ones, regrouped to
// its TP convention, with the yardstick of its precision contract.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/pair_verdict.hpp"
#include "cli/yardstick_source.hpp"
#include "core/compare/heatmap.hpp"
#include "golden/golden_file.hpp"
#include "impl/implementation.hpp"

namespace attncheck::cli {

struct GoldenPair {
  PairVerdict verdict;             // judged: its report; otherwise why not
  SourcedYardstick yardstick;      // judged below fp64: which yardstick set the tolerance
  std::vector<std::string> notes;  // on its per-rank gradients and its yardstick, for reports
  std::vector<Heatmap> maps;       // with drawing only
};

// The verdict of a pair that was not run because the golden is outside the implementation's capabilities.
PairVerdict not_stated(const std::string& golden, const std::string& implementation, const Admission& admission);
// The verdict of a pair that was not checked because it did not fit in memory (`why`: NotEnoughMemory's message).
PairVerdict not_checked(const std::string& golden, const std::string& implementation, const std::string& why);

// The pair for a golden read in full whose outline `admission` admitted. yardstick_log: where a yardstick being
// computed prints its progress lines, or nullptr; drawing: --html's heatmap options, or nullptr.
GoldenPair judge_golden_pair(const std::string& path, const golden::Golden& golden,
                             impl::Implementation& implementation, const Admission& admission,
                             std::ostream* yardstick_log, const HeatmapOptions* drawing);

}  // namespace attncheck::cli
