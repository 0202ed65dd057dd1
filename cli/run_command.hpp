// `attncheck run`: the main job. Checks every implementation of kind default (impl/registry.hpp), or those
// named, against every golden in a folder (default: the committed golden/data) and prints one summary table: per golden
// and implementation, pass or fail, the worst tensor and its error in ulps of the tensor's scale.
// `--junit FILE` also writes the verdicts as JUnit XML (one test case per golden x implementation).
// The goldens of the conformance ladder (ladder_NN_*.h5) run first and open the report with a support matrix
// (cli/support_matrix.hpp). A golden outside an implementation's capabilities is not run for it ("not stated",
// decided from its outline before it is read), and one that does not fit in memory is named ("not checked")
// while the others go on; `--json` prints one object instead of the tables.
// A golden's implementations run `--jobs` at a time (default 1), its rows printed in order as they are
// ready; on a terminal a live progress line shows what is running (cli/progress_line.hpp).
// Exit 0 when everything passes, 1 when something fails, 2 for bad input. `--list` prints every
// implementation name with its kind (default, device, mutant), one per line, for scripts (ci/gpu-check).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace attncheck::cli {

struct RunOptions {
  std::string golden_dir;                    // every *.h5 in it, sorted by name
  std::vector<std::string> implementations;  // default: all
  bool list = false;                         // print every registered implementation and its kind, run nothing
  std::string junit;                         // also write the verdicts as JUnit XML here (cli/junit_report.hpp)
  std::string html;                          // also write the HTML report here (cli/html_report.hpp)
  bool html_all = false;                     // with html: every compared tensor's map, not only failing ones
  int jobs = 1;                              // pairs of one golden run side by side (docs/REPORTS.md: more is faster, not the same digits)
  bool progress = false;                     // a live progress line on `err` (cli/progress_line.hpp)
  bool json = false;                         // one JSON object on `out` instead of the tables
};

CLI::App* add_run_command(CLI::App& app, RunOptions& options);
int run_run(const RunOptions& options, std::ostream& out, std::ostream& err);

}  // namespace attncheck::cli
