// `attncheck capabilities`: every feature a statement of capabilities may name (docs/CAPABILITIES.md), with its
// kind and meaning; `--impl NAME` prints what that implementation states (an exec: worker's `supports` line, or
// the statement of one of attncheck's own); `--json` the same as one object.
#pragma once

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

namespace attncheck::cli {

struct CapabilitiesOptions {
  std::string implementation;  // empty: the feature list
  bool json = false;
};

CLI::App* add_capabilities_command(CLI::App& app, CapabilitiesOptions& options);
int run_capabilities(const CapabilitiesOptions& options, std::ostream& out);

}  // namespace attncheck::cli
