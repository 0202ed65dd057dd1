#include "cli/capabilities_command.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/exit_codes.hpp"
#include "core/capabilities/capabilities_json.hpp"
#include "impl/registry.hpp"

namespace attncheck::cli {

CLI::App* add_capabilities_command(CLI::App& app, CapabilitiesOptions& options) {
  CLI::App* command = app.add_subcommand(
      "capabilities", "List the features a statement of capabilities names, or what an implementation states");
  command->add_option("--impl", options.implementation, "print what this implementation (or exec:COMMAND) states");
  command->add_flag("--json", options.json, "print one JSON object");
  return command;
}

int run_capabilities(const CapabilitiesOptions& options, std::ostream& out) {
  if (options.implementation.empty()) {
    if (options.json) {
      nlohmann::json features = nlohmann::json::array();
      for (const FeatureInfo& feature : all_features()) {
        features.push_back({{"name", feature.name},
                            {"kind", feature.kind == FeatureKind::part ? "part" : "requirement"},
                            {"meaning", feature.meaning}});
      }
      out << nlohmann::json{{"features", features}}.dump(2) << '\n';
      return kExitOk;
    }
    for (const FeatureInfo& feature : all_features()) {
      out << fmt::format("{:<22} {:<12} {}\n", feature.name, feature.kind == FeatureKind::part ? "part" : "requirement",
                         feature.meaning);
    }
    return kExitOk;
  }
  const auto implementation = impl::open_implementation(options.implementation);
  const Capabilities& capabilities = implementation->capabilities();
  if (options.json) {
    out << nlohmann::json{{"implementation", implementation->name()}, {"capabilities", to_json(capabilities)}}.dump(2)
        << '\n';
  } else {
    out << fmt::format("{}: {}\n", implementation->name(), describe(capabilities));
  }
  return kExitOk;
}

}  // namespace attncheck::cli
