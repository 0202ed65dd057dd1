// `attncheck run`: the main job. Checks every implementation of kind default (impl/registry.hpp), or those
// named, against every golden in a folder (default: the committed golden/data) and prints one summary table: per golden and
// implementation, pass or fail, the worst tensor and its error in ulps of the tensor's scale.
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
};

CLI::App* add_run_command(CLI::App& app, RunOptions& options);
int run_run(const RunOptions& options, std::ostream& out);

}  // namespace attncheck::cli
