// `attncheck golden draw` and `attncheck golden admit`: what a test runner outside attncheck needs to hold a
// layer to fuzz cases and goldens the way `attncheck fuzz` and `attncheck run` do (the Python package's pytest
// plugin, python/attncheck/pytest_plugin.py, calls them).
//   golden draw   --seed S --cases N [--profile P] [--supports FILE] -o DIR: case i of the seed's sequence, as
//                 `attncheck fuzz --seed S` draws it for a layer stating FILE, written as DIR/case-<i>.h5, a
//                 golden holding the fp64 reference's answers (reference-tp for TP above 1)
//   golden admit  [--supports FILE] GOLDEN...: what each golden is for a layer stating FILE (admit(), from the
//                 golden's outline alone: nothing computed), as `run` would run it, and whether a pair on it
//                 fits in memory (the bound `run` holds a pair to, PairMemory, against memory_room())
#include <fmt/format.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/exit_codes.hpp"
#include "cli/flag_validators.hpp"
#include "cli/golden_command.hpp"
#include "cli/pair_verdict.hpp"
#include "core/capabilities/capabilities_json.hpp"
#include "core/config/text_file.hpp"
#include "core/errors/input_error.hpp"
#include "core/resources/memory_room.hpp"
#include "golden/golden_file.hpp"
#include "properties/fuzz.hpp"
#include "properties/generators.hpp"
#include "properties/repro.hpp"
#include "reference/memory_estimate.hpp"

namespace attncheck::cli {

Capabilities stated_capabilities(const std::string& file) {
  if (file.empty()) return Capabilities::everything();
  return parse_capabilities_text(read_text_file(file, "--supports"), file);
}

void add_golden_draw_commands(CLI::App& golden, GoldenCommands& commands, GoldenOptions& options) {
  commands.draw = golden.add_subcommand(
      "draw", "Write the cases `attncheck fuzz --seed S` draws (within a statement) as goldens, for a test runner");
  commands.draw->add_option("--seed", options.seed, "seed of the case sequence")
      ->check(unsigned_validator())
      ->capture_default_str();
  commands.draw->add_option("--cases", options.draw_cases, "how many cases: 0 .. N-1 of the sequence")
      ->check(integer_validator())
      ->required();
  commands.draw->add_option("--profile", options.draw_profile, "size profile: short, long, latent or context-parallel")
      ->capture_default_str();
  commands.draw->add_option("--supports", options.supports_file,
                            "a statement of capabilities (JSON, docs/CAPABILITIES.md): draw only within it");
  commands.draw->add_option("-o,--output-dir", options.output, "folder for case-<i>.h5 (made when missing)")
      ->required();

  commands.admit = golden.add_subcommand(
      "admit", "Say what each golden is for a layer stating given capabilities (from its outline: nothing computed)");
  commands.admit->add_option("files", options.files, "golden files")->required();
  commands.admit->add_option("--supports", options.supports_file,
                             "a statement of capabilities (JSON; default: a layer stating nothing)");
}

int run_golden_draw(const GoldenOptions& options, std::ostream& out) {
  const std::optional<properties::SizeProfile> profile = properties::parse_size_profile(options.draw_profile);
  ViolationList violations;
  if (!profile) {
    violations.add("--profile", options.draw_profile, "must name a size profile",
                   "short, long, latent or context-parallel");
  }
  if (options.draw_cases < 1 || options.draw_cases > 100000) {
    violations.add("--cases", std::to_string(options.draw_cases), "must lie in [1, 100000]", "50");
  }
  violations.throw_if_any("invalid option");
  const Capabilities capabilities = stated_capabilities(options.supports_file);
  const std::string stated_by = options.supports_file.empty() ? "a layer stating nothing" : options.supports_file;
  const properties::GenLimits limits = properties::GenLimits::for_profile(*profile).within(capabilities, stated_by);
  std::filesystem::create_directories(options.output);
  for (std::int64_t index = 0; index < options.draw_cases; ++index) {
    const std::string path = fmt::format("{}/case-{}.h5", options.output, index);
    properties::write_case_golden(properties::make_case(properties::fuzz_case(options.seed, index, limits)), path,
                                  fmt::format("attncheck golden draw --seed {} (case {}, {} profile)", options.seed,
                                              index, options.draw_profile));
    out << path << '\n';
  }
  return kExitOk;
}

int run_golden_admit(const GoldenOptions& options, std::ostream& out) {
  const Capabilities capabilities = stated_capabilities(options.supports_file);
  nlohmann::json goldens = nlohmann::json::array();
  for (const std::string& file : options.files) {
    const CaseOutline outline = golden::read_case_outline(file);
    const Admission admission = admit(capabilities, outline);
    // The room a pair on it is held to, as golden check and run ask it before running anything.
    const std::uint64_t needed = PairMemory{.layer_bytes = reference::layer_bytes(
                                                outline.geometry(), {.batch = outline.batch, .seq = outline.seq})}
                                     .bound_bytes();
    std::string memory_problem;
    try {
      require_memory(file, needed, [](std::uint64_t) { return std::string("a machine (or limit) with more memory"); });
    } catch (const NotEnoughMemory& error) {
      memory_problem = error.what();
    }
    goldens.push_back({{"golden", file},
                       {"admitted", admission.admitted()},
                       {"reason", admission.admitted() ? "" : admission.reason()},
                       {"parts_not_stated", admission.parts_not_stated},
                       {"per_rank_gradients", admission.per_rank_gradients},
                       {"memory_bound_bytes", needed},
                       {"fits", memory_problem.empty()},
                       {"memory_problem", memory_problem}});
  }
  out << nlohmann::json{{"goldens", goldens}}.dump(2) << '\n';
  return kExitOk;
}

}  // namespace attncheck::cli
