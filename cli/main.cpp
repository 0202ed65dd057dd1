// attncheck: entry point; everything else is in cli_app.cpp.
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli_app.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return attncheck::cli::run_cli(args, std::cout, std::cerr);
}
