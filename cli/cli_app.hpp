// The attncheck command: its subcommands and the mapping of failures to exit codes (exit_codes.hpp).
// Kept apart from main() so tests run it in-process with their own streams.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace attncheck::cli {

// args: the command line without the program name.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace attncheck::cli
