#include "cli/fuzz_command.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>

#include "cli/exit_codes.hpp"
#include "cli/flag_validators.hpp"
#include "cli/golden_command.hpp"
#include "cli/html_report.hpp"
#include "core/errors/input_error.hpp"
#include "impl/registry.hpp"
#include "properties/fuzz.hpp"
#include "properties/mutants/catalog.hpp"
#include "properties/repro.hpp"

namespace attncheck::cli {

namespace {

// At most 2^20 shards: a case's index is i + k * n, and its size grows with the index, so a larger n
// would reach absurd sizes (and overflow) within a few cases.
constexpr std::int64_t kMostShards = std::int64_t{1} << 20;

// "i/n" with 0 <= i < n <= kMostShards.
std::pair<std::int64_t, std::int64_t> parse_shard(const std::string& text) {
  std::int64_t index = -1;
  std::int64_t count = 0;
  char slash = 0;
  std::istringstream stream(text);
  stream >> index >> slash >> count;
  if (!stream || !stream.eof() || slash != '/' || count < 1 || count > kMostShards || index < 0 || index >= count) {
    ViolationList violations;
    violations.add("--shard", text, "must be i/n with 0 <= i < n <= 1048576",
                   "0/1, or 3/8 for the fourth of eight shards");
    violations.throw_if_any("invalid option");
  }
  return {index, count};
}

// The repro folder is made (or found) and checked writable before any case runs: a fuzz that finds a
// failure after an hour must not then fail to write it (`--repro-dir /dev/null` used to end in an
// internal filesystem error).
void check_repro_dir(const std::string& directory, ViolationList& violations) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (!std::filesystem::is_directory(directory) || access(directory.c_str(), W_OK | X_OK) != 0) {
    violations.add("--repro-dir", directory,
                   error ? fmt::format("must be a folder attncheck can create and write ({})", error.message())
                         : "must be a folder attncheck can write",
                   "a writable folder, e.g. ./attncheck-repros");
  }
}

properties::FuzzOptions fuzz_options(const FuzzCommandOptions& options) {
  ViolationList violations;
  check_repro_dir(options.repro_dir, violations);
  const std::optional<properties::SizeProfile> profile = properties::parse_size_profile(options.profile);
  if (!profile) {
    violations.add("--profile", options.profile, "must name a size profile",
                   "short (seq 3 .. 12, up to 16 heads) or long (seq 48 .. 4096 around tile edges, up to 4 heads)");
  }
  if (options.max_size <= 0 || options.max_size > 64) {
    violations.add("--max-size", fmt::format("{}", options.max_size), "must lie in (0, 64]",
                   "1 (short: up to 4 KV heads x 4, head_dim 256, hidden 256, seq 12; long: 2 x 2, seq 4096)");
  }
  if (options.seconds && *options.seconds <= 0) {
    violations.add("--seconds", fmt::format("{}", *options.seconds), "must be positive", "60");
  }
  if (options.cases && *options.cases < 1) {
    violations.add("--cases", std::to_string(*options.cases), "must be at least 1", "1000");
  }
  violations.throw_if_any("invalid option");
  const auto [index, count] = parse_shard(options.shard);
  return {.seed = options.seed,
          .seconds = options.seconds,
          .cases = options.cases,
          .shard_index = index,
          .shard_count = count,
          .limits = properties::GenLimits::for_profile(*profile).scaled(options.max_size),
          .repro_dir = options.repro_dir,
          .shrink_seconds = options.shrink_seconds};
}

}  // namespace

FuzzCommands add_fuzz_commands(CLI::App& app, FuzzCommandOptions& options) {
  FuzzCommands commands;
  commands.fuzz = app.add_subcommand("fuzz", "Fuzz an implementation against the reference; shrink the first failure");
  commands.fuzz->add_option("--impl", options.implementation, "implementation, or exec:COMMAND")->required();
  auto* seconds = commands.fuzz->add_option("--seconds", options.seconds, "stop after this long (default 60)")
                      ->check(seconds_validator());
  commands.fuzz->add_option("--cases", options.cases, "stop after this many cases")
      ->check(integer_validator())
      ->excludes(seconds);
  commands.fuzz->add_option("--seed", options.seed, "seed of the case sequence")
      ->check(unsigned_validator())
      ->default_val(1);
  commands.fuzz->add_option("--shard", options.shard, "run shard i of n of the seed's cases")->default_val("0/1");
  commands.fuzz->add_option("--profile", options.profile, "size profile: short (seq 3 .. 12) or long (48 .. 4096)")
      ->default_val("short");
  commands.fuzz->add_option("--max-size", options.max_size, "scale every size bound by this factor")
      ->check(finite_number_validator())
      ->default_val(1.0);
  commands.fuzz->add_option("--repro-dir", options.repro_dir, "folder for the repro file")->default_val(".");
  commands.fuzz->add_option("--shrink-seconds", options.shrink_seconds, "time allowed for shrinking")
      ->check(seconds_validator())
      ->default_val(60);
  add_html_options(*commands.fuzz, options.html, options.html_all);

  commands.mutants = app.add_subcommand("mutants", "Fuzz every mutant of the catalog until the suite catches it");
  commands.mutants->add_option("--mutant", options.mutants, "only these mutants (default: all)");
  commands.mutants->add_option("--seconds", options.seconds, "time allowed per mutant (default 60)")
      ->check(seconds_validator());
  commands.mutants->add_option("--seed", options.seed, "seed of the case sequence")
      ->check(unsigned_validator())
      ->default_val(1);
  commands.mutants->add_option("--repro-dir", options.repro_dir, "folder for the repro files")
      ->default_val("attncheck-mutants");
  commands.mutants->add_option("--shrink-seconds", options.shrink_seconds, "time allowed for each shrink")
      ->check(seconds_validator())
      ->default_val(20);
  commands.mutants->add_flag("--json", options.json, "one JSON object instead of the table");

  commands.replay = app.add_subcommand("replay", "Check one implementation on a repro (or golden) file");
  commands.replay->add_option("file", options.file, "repro file written by attncheck fuzz")->required();
  commands.replay->add_option("--impl", options.implementation, "implementation, or exec:COMMAND")->required();
  add_html_options(*commands.replay, options.html, options.html_all);
  return commands;
}

int run_fuzz(const FuzzCommandOptions& options, std::ostream& out) {
  check_html_path(options.html);
  const properties::FuzzOptions fuzz = fuzz_options(options);
  const auto implementation = impl::open_implementation(options.implementation);
  const properties::FuzzReport report = properties::fuzz(*implementation, fuzz, &out);
  out << fmt::format("fuzz {}: {} cases ({} unsupported) in {:.1f} s, {:.1f} cases/s; largest: {}\n",
                     implementation->name(), report.cases, report.unsupported, report.seconds,
                     report.cases_per_second(), report.largest.empty() ? "none (no case ran)" : report.largest);
  for (const std::string& reason : report.top_unsupported_reasons(3)) out << "  unsupported: " << reason << '\n';
  if (report.with_declined > 0) {
    // Checked on the rest of their tensors, and counted apart: a declined part is never a pass.
    out << fmt::format("  {} of {} cases with declined parts (those tensors not judged)\n", report.with_declined,
                       report.cases);
    for (const std::string& reason : report.top_declined_reasons(3)) out << "  declined: " << reason << '\n';
  }
  if (report.ran_nothing()) {
    // Declining every case checks nothing: never reported as clean.
    out << fmt::format("FAIL {}: declined all {} cases; nothing was checked\n", implementation->name(), report.cases);
    return kExitCheckFailed;
  }
  if (!report.failure) return kExitOk;
  const properties::Counterexample& failure = *report.failure;
  out << fmt::format("FAIL {}: {}\n  shrunk in {} steps ({:.1f} s) from: {}\n  to: {}\n", failure.outcome.property,
                     failure.outcome.detail, failure.shrink_steps, failure.shrink_seconds,
                     properties::describe(failure.original), properties::describe(failure.shrunk));
  // Where it fails in the shrunk case, without having to run the replay first.
  if (failure.outcome.report) out << "  where:\n" << describe_failures(*failure.outcome.report, "    ");
  out << fmt::format("  repro: {}\n  replay: {}\n", failure.repro_path,
                     properties::replay_command(failure.repro_path, implementation->name()));
  if (!options.html.empty()) {
    // The report of the shrunk case: its repro replayed (the table it prints is the one above).
    FuzzCommandOptions replay = options;
    replay.file = failure.repro_path;
    std::ostringstream replay_output;
    run_replay(replay, replay_output);
    out << fmt::format("  html report: {}\n", options.html);
  }
  return kExitCheckFailed;
}

int run_mutants(const FuzzCommandOptions& options, std::ostream& out) {
  ViolationList violations;
  check_repro_dir(options.repro_dir, violations);
  violations.throw_if_any("invalid option");
  FuzzCommandOptions per_mutant = options;
  if (!per_mutant.seconds) per_mutant.seconds = 60.0;
  properties::FuzzOptions fuzz = fuzz_options(per_mutant);
  fuzz.progress_seconds = 0;
  std::vector<std::string> names = options.mutants.empty() ? properties::mutant_names() : options.mutants;
  if (!options.json) {
    out << fmt::format("{:<52} {:<7} {:<44} {:>6} {:>8}\n", "mutant", "killed", "by", "cases", "seconds");
  }
  nlohmann::json rows = nlohmann::json::array();
  int survivors = 0;
  for (const std::string& name : names) {
    const auto implementation = impl::open_implementation(name);
    // Each mutant with its catalog profile (the long one for bugs past a kernel's first tile).
    properties::FuzzOptions mutant_fuzz = fuzz;
    std::string source;  // the real bug it re-plants, if any
    if (const properties::Mutant* mutant = properties::find_mutant(name)) {
      mutant_fuzz.limits = properties::GenLimits::for_profile(mutant->profile);
      source = mutant->source;
    }
    const properties::FuzzReport report = properties::fuzz(*implementation, mutant_fuzz, nullptr);
    const bool killed = report.failure.has_value();
    if (!killed) ++survivors;
    const std::string by = killed
                               ? fmt::format("{}: {}", report.failure->outcome.property, report.failure->outcome.detail)
                               : std::string("-");
    if (options.json) {
      nlohmann::json row{{"mutant", name},
                         {"profile", properties::to_string(mutant_fuzz.limits.profile)},
                         {"killed", killed},
                         {"cases", report.cases},
                         {"seconds", report.seconds}};
      if (!source.empty()) row["source"] = source;
      if (killed) {
        row["property"] = report.failure->outcome.property;
        row["detail"] = report.failure->outcome.detail;
        row["counterexample"] = properties::describe(report.failure->shrunk);
        row["shrink_steps"] = report.failure->shrink_steps;
        row["repro"] = report.failure->repro_path;
      }
      rows.push_back(row);
    } else {
      out << fmt::format("{:<52} {:<7} {:<44} {:>6} {:>8.2f}\n", name, killed ? "yes" : "NO",
                         by.size() > 44 ? by.substr(0, 41) + "..." : by, report.cases, report.seconds);
      if (killed) {
        const bool long_profile = mutant_fuzz.limits.profile == properties::SizeProfile::long_sequences;
        out << fmt::format("{:<52} shrunk{}: {}\n", "", long_profile ? " (long profile)" : "",
                           properties::describe(report.failure->shrunk));
      }
      if (!source.empty()) out << fmt::format("{:<52} source: {}\n", "", source);
    }
  }
  if (options.json) {
    out << nlohmann::json{{"survivors", survivors}, {"mutants", rows}}.dump(2) << '\n';
  } else {
    out << fmt::format("{} of {} mutants killed\n", names.size() - survivors, names.size());
  }
  return survivors == 0 ? kExitOk : kExitCheckFailed;
}

int run_replay(const FuzzCommandOptions& options, std::ostream& out) {
  GoldenOptions golden;
  golden.files = {options.file};
  golden.implementation = options.implementation;
  golden.html = options.html;
  golden.html_all = options.html_all;
  golden.html_command = "replay";
  return run_golden_check(golden, out, out);  // no progress line: replay files are small
}

}  // namespace attncheck::cli
