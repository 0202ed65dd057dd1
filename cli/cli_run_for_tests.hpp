// Tests only: `attncheck ARGS...` run in-process, its exit code and both streams captured.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_app.hpp"

namespace attncheck::cli {

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

inline CliRun run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int exit_code = run_cli(args, out, err);
  return {exit_code, out.str(), err.str()};
}

}  // namespace attncheck::cli
