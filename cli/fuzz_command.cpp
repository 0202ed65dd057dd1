#include "cli/fuzz_command.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>

#include "cli/exit_codes.hpp"
#include "cli/flag_validators.hpp"
#include "cli/golden_command.hpp"
#include "cli/html_report.hpp"
#include "cli/pair_verdict.hpp"
#include "core/capabilities/capabilities_json.hpp"
#include "core/errors/input_error.hpp"
#include "impl/narrowed_implementation.hpp"
#include "impl/registry.hpp"
#include "mutants/catalog.hpp"
#include "properties/fuzz.hpp"
#include "properties/mutant_budget.hpp"
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

// The repro folder is checked before any case runs: a fuzz that finds a failure after an hour must not then
// fail to write it (`--repro-dir /dev/null` used to end in an internal filesystem error). It is made only when
// a repro is written (properties/repro.cpp), so a clean run leaves no empty folder behind: here it must be a
// writable folder, or not exist yet under a writable one.
void check_repro_dir(const std::string& directory, ViolationList& violations) {
  if (directory.empty()) return;  // a fresh temporary folder, made when a repro is written
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path probe = fs::absolute(fs::path(directory), error);
  while (!error && !fs::exists(probe, error) && probe.has_parent_path() && probe.parent_path() != probe) {
    probe = probe.parent_path();
  }
  if (error || !fs::is_directory(probe, error) || access(probe.c_str(), W_OK | X_OK) != 0) {
    violations.add("--repro-dir", directory,
                   probe == fs::absolute(directory, error) ? "must be a folder attncheck can write"
                                                           : fmt::format("must be a folder attncheck can create, but "
                                                                         "{} is not a writable folder",
                                                                         probe.string()),
                   "a writable folder, e.g. ./attncheck-repros");
  }
}

properties::FuzzOptions fuzz_options(const FuzzCommandOptions& options) {
  ViolationList violations;
  check_repro_dir(options.repro_dir, violations);
  const std::optional<properties::SizeProfile> profile = properties::parse_size_profile(options.profile);
  if (!profile) {
    violations.add("--profile", options.profile, "must name a size profile",
                   "short (seq 3 .. 12, up to 16 heads), long (seq 48 .. 4096 around tile edges, up to 4 heads) or "
                   "latent (multi-head latent attention, seq 3 .. 12, up to 4 heads) or context-parallel (short cases "
                   "with a context-parallel layout)");
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
  if (options.shrink_candidates && *options.shrink_candidates < 0) {
    violations.add("--shrink-candidates", std::to_string(*options.shrink_candidates), "must be at least 0",
                   fmt::format("{} (0: no shrinking)", properties::kDefaultShrinkCandidates));
  }
  if (options.sequence_cases < 0) {
    violations.add("--sequence-cases", std::to_string(options.sequence_cases), "must be at least 0",
                   fmt::format("{} (0: no search for earlier cases)", properties::kDefaultSequenceCases));
  }
  violations.throw_if_any("invalid option");
  const auto [index, count] = parse_shard(options.shard);
  return {.seed = options.seed,
          .cases = options.cases,
          .seconds = options.seconds,
          .shard_index = index,
          .shard_count = count,
          .limits = properties::GenLimits::for_profile(*profile).scaled(options.max_size),
          .repro_dir = options.repro_dir,
          .shrink_candidates = options.shrink_candidates.value_or(properties::kDefaultShrinkCandidates),
          .shrink_time_limit_seconds = options.shrink_seconds,
          .sequence_cases = options.sequence_cases};
}

void add_shrink_options(CLI::App& command, FuzzCommandOptions& options, const std::string& default_note) {
  command
      .add_option("--shrink-candidates", options.shrink_candidates,
                  fmt::format("shrink candidates checked at most (default {}{})", properties::kDefaultShrinkCandidates,
                              default_note))
      ->check(integer_validator());
  command
      .add_option("--shrink-seconds", options.shrink_seconds,
                  "a runaway stop for shrinking (the output says when it fired)")
      ->check(seconds_validator())
      ->default_val(300);
}

// The lines after "shrunk in ...": what bounded the shrink, when something did.
std::string shrink_notes(const properties::Counterexample& failure, std::int64_t budget, const std::string& indent) {
  std::string text;
  if (failure.shrink_stopped_by_time_limit) {
    text += fmt::format(
        "{}shrinking stopped by the time limit after {} of {} candidates: this shrunk case depends on the "
        "machine\n",
        indent, failure.shrink_candidates, budget);
  } else if (failure.shrink_budget_spent) {
    text +=
        fmt::format("{}the shrink budget of {} candidates ran out: a smaller failing case may exist\n", indent, budget);
  }
  return text;
}

// A fuzz failure as `attncheck fuzz` prints it.
void print_failure(const properties::Counterexample& failure, const std::string& name,
                   const properties::FuzzOptions& fuzz, std::ostream& out) {
  using properties::Reproduction;
  const std::string shrunk_line =
      fmt::format("shrunk in {} steps ({} candidates, {} of them lengths by bisection; {:.1f} s)", failure.shrink_steps,
                  failure.shrink_candidates, failure.shrink_length_probes, failure.shrink_seconds);
  switch (failure.reproduction) {
    case Reproduction::alone:
      out << fmt::format("FAIL {}: {}\n  {} from: {}\n  to: {}\n", failure.outcome.property, failure.outcome.detail,
                         shrunk_line, properties::describe(failure.original), properties::describe(failure.shrunk));
      out << shrink_notes(failure, fuzz.shrink_candidates, "  ");
      out << "  it fails alone, in a fresh instance\n";
      break;
    case Reproduction::original_alone:
      out << fmt::format("FAIL {}: {}\n  case {} fails alone, in a fresh instance: {}\n", failure.outcome.property,
                         failure.outcome.detail, failure.original_index, properties::describe(failure.original));
      out << fmt::format(
          "  its shrunk form failed only after the shrink's earlier candidates in the same instance, so the repro "
          "is the case itself ({}: {})\n",
          shrunk_line, properties::describe(failure.shrunk));
      break;
    case Reproduction::after_earlier_cases:
      out << fmt::format("FAIL {}: fails only after earlier cases in the same process: {}\n", name,
                         properties::describe_sequence(failure.earlier_cases, failure.original_index));
      out << fmt::format("  alone, in a fresh instance, case {} passes{}\n", failure.original_index,
                         failure.shrunk == failure.original ? "" : ", and so does its shrunk form");
      out << fmt::format("  the failing case{}: {}\n", failure.failing_is_shrunk ? " (shrunk)" : "",
                         properties::describe(failure.failing));
      out << fmt::format("  after the earlier cases, in a fresh instance, it fails {}: {}\n", failure.outcome.property,
                         failure.outcome.detail);
      out << fmt::format(
          "  found by replaying {} cases{}\n", failure.sequence_cases_run,
          failure.sequence_budget_spent
              ? fmt::format(" (the budget of {} ran out: a shorter sequence may exist)", fuzz.sequence_cases)
              : "");
      break;
    case Reproduction::not_reproduced:
      out << fmt::format(
          "FAIL {}: case {} failed in the fuzzing instance ({}: {}), but neither alone nor after the last {} of its "
          "{} earlier cases replayed in a fresh instance{}: not reproducible from its cases\n",
          name, failure.original_index, failure.outcome.property, failure.outcome.detail,
          failure.sequence_longest_tried, failure.original_index,
          failure.sequence_budget_spent ? fmt::format(" (the budget of {} cases ran out)", fuzz.sequence_cases) : "");
      out << fmt::format("  the failing case: {}\n", properties::describe(failure.original));
      break;
  }
  // Where it fails, without having to run the replay first.
  if (failure.outcome.report) out << "  where:\n" << describe_failures(*failure.outcome.report, "    ");
  if (failure.repro_path.empty()) {
    out << fmt::format("  repro: not written: {}\n", failure.repro_problem);
    return;
  }
  if (failure.reproduction == Reproduction::after_earlier_cases) {
    out << fmt::format("  repro: {} ({} cases in order, listed in {})\n", failure.repro_path,
                       failure.earlier_cases.size() + 1, properties::kSequenceListing);
  } else {
    out << fmt::format("  repro: {}\n", failure.repro_path);
  }
  out << fmt::format("  replay: {}\n", properties::replay_command(failure.repro_path, name));
}

// The lines of a failure in the mutants table below its row.
std::string mutant_failure_lines(const properties::Counterexample& failure, bool long_profile,
                                 std::int64_t shrink_budget) {
  const std::string indent(53, ' ');
  std::string text;
  if (failure.reproduction == properties::Reproduction::after_earlier_cases) {
    text += fmt::format("{}fails only after earlier cases in the same process: {}\n", indent,
                        properties::describe_sequence(failure.earlier_cases, failure.original_index));
  }
  text += fmt::format("{}shrunk{}: {}\n", indent, long_profile ? " (long profile)" : "",
                      properties::describe(failure.failing));
  if (failure.repro_path.empty()) text += fmt::format("{}repro not written: {}\n", indent, failure.repro_problem);
  return text + shrink_notes(failure, shrink_budget, indent);
}

// "exercised (of N judged): gqa 512, explicit-head-dim 401, ...": how often each feature was judged.
std::string exercised_line(const properties::FuzzReport& report) {
  std::vector<std::string> counts;
  for (const auto& [feature, count] : report.exercised)
    counts.push_back(fmt::format("{} {}", to_string(feature), count));
  return fmt::format("exercised (of {} judged): {}", report.judged(),
                     counts.empty() ? "nothing" : fmt::format("{}", fmt::join(counts, ", ")));
}

}  // namespace

FuzzCommands add_fuzz_commands(CLI::App& app, FuzzCommandOptions& options) {
  FuzzCommands commands;
  commands.fuzz = app.add_subcommand("fuzz", "Fuzz an implementation against the reference; shrink the first failure");
  commands.fuzz->add_option("--impl", options.implementation, "implementation, or exec:COMMAND")->required();
  auto* seconds = commands.fuzz
                      ->add_option("--seconds", options.seconds,
                                   "explore for this long (default 60; what it covers depends on the machine)")
                      ->check(seconds_validator());
  commands.fuzz->add_option("--cases", options.cases, "run this many cases: a verdict the same on every machine")
      ->check(integer_validator())
      ->excludes(seconds);
  commands.fuzz->add_option("--seed", options.seed, "seed of the case sequence")
      ->check(unsigned_validator())
      ->default_val(1);
  commands.fuzz->add_option("--shard", options.shard, "run shard i of n of the seed's cases")->default_val("0/1");
  commands.fuzz
      ->add_option("--profile", options.profile,
                   "size profile: short (seq 3 .. 12), long (48 .. 4096), latent (multi-head latent attention, seq 3 .. "
                   "12) or context-parallel (short cases with a context-parallel layout, for reference-cp)")
      ->default_val("short");
  commands.fuzz->add_option("--max-size", options.max_size, "scale every size bound by this factor")
      ->check(finite_number_validator())
      ->default_val(1.0);
  commands.fuzz->add_option("--repro-dir", options.repro_dir,
                            "folder for the repro file (made when one is written; default: a fresh "
                            "$TMPDIR/attncheck-repro-XXXXXX, its path printed)");
  commands.fuzz
      ->add_option("--only", options.only,
                   "draw only cases within these features (the implementation's capabilities narrowed to them: list "
                   "every one a case may use, e.g. causal,rope-half-split,backward; docs/CAPABILITIES.md)")
      ->delimiter(',');
  commands.fuzz
      ->add_option("--without", options.without,
                   "draw no case that uses these features (taken from the implementation's capabilities)")
      ->delimiter(',');
  add_shrink_options(*commands.fuzz, options, "");
  commands.fuzz
      ->add_option("--sequence-cases", options.sequence_cases,
                   "cases replayed at most finding the earlier cases a failure needs")
      ->check(integer_validator())
      ->default_val(properties::kDefaultSequenceCases);
  add_html_options(*commands.fuzz, options.html, options.html_all);

  commands.mutants =
      app.add_subcommand("mutants", "Fuzz every mutant of the catalog for its case budget: the suite must catch it");
  commands.mutants->add_option("--mutant", options.mutants, "only these mutants (default: all)");
  commands.mutants
      ->add_option("--cases", options.cases,
                   fmt::format("cases per mutant (default: its profile's budget, short {}, long {})",
                               properties::mutant_case_budget(properties::SizeProfile::short_sequences),
                               properties::mutant_case_budget(properties::SizeProfile::long_sequences)))
      ->check(integer_validator());
  commands.mutants
      ->add_option("--time-limit", options.time_limit,
                   "a runaway stop per mutant, in seconds: a mutant it stops has no verdict")
      ->check(seconds_validator())
      ->default_val(600);
  commands.mutants->add_option("--seed", options.seed, "seed of the case sequence")
      ->check(unsigned_validator())
      ->default_val(1);
  commands.mutants
      ->add_option("--repro-dir", options.mutants_repro_dir,
                   "folder for the repro files (default: a fresh $TMPDIR/attncheck-repro-XXXXXX made at the start, "
                   "its path printed with each repro)");
  add_shrink_options(*commands.mutants, options, "; fewer for a few expensive mutants");
  commands.mutants->add_flag("--json", options.json, "one JSON object instead of the table");

  commands.replay = app.add_subcommand("replay", "Check one implementation on a repro (or golden) file or sequence");
  commands.replay->add_option("file", options.file, "repro file, or sequence folder, written by attncheck fuzz")
      ->required();
  commands.replay->add_option("--impl", options.implementation, "implementation, or exec:COMMAND")->required();
  add_html_options(*commands.replay, options.html, options.html_all);
  return commands;
}

int run_fuzz(const FuzzCommandOptions& options, std::ostream& out) {
  check_html_path(options.html);
  const properties::FuzzOptions fuzz = fuzz_options(options);
  const FeatureSet only = parse_feature_list(options.only, "--only");
  const FeatureSet without = parse_feature_list(options.without, "--without");
  // The implementation as itself, or seen through narrower capabilities (--only / --without), in the fuzzing
  // instance and in every fresh one alike.
  const auto open = [&options, only, without]() -> std::unique_ptr<impl::Implementation> {
    std::unique_ptr<impl::Implementation> opened = impl::open_implementation(options.implementation);
    if (only.empty() && without.empty()) return opened;
    Capabilities narrowed = opened->capabilities().narrowed(only, without);
    return impl::narrowed(std::move(opened), std::move(narrowed));
  };
  const auto implementation = open();
  const properties::ImplementationFactory open_fresh = open;
  const properties::FuzzReport report = properties::fuzz(*implementation, open_fresh, fuzz, &out);
  // What the cases covered, then the verdict's line.
  out << fmt::format("fuzz {}: drawn within {}\n", implementation->name(), describe(report.capabilities));
  out << fmt::format("fuzz {}: {}\n", implementation->name(), exercised_line(report));
  out << fmt::format("fuzz {}: {} cases ({} unsupported) in {:.1f} s, {:.1f} cases/s; largest: {}\n",
                     implementation->name(), report.cases, report.unsupported, report.seconds,
                     report.cases_per_second(), report.largest.empty() ? "none (no case ran)" : report.largest);
  if (report.time_bounded && !report.failure) {
    // Exploratory: fine by hand, never a gate's check.
    out << fmt::format(
        "  time-bounded: how many cases {:.0f} s covers depends on this machine and its load; for a verdict the "
        "same on every machine, give a case budget (these were --cases {})\n",
        fuzz.seconds.value_or(60.0), report.cases);
  }
  for (const std::string& reason : report.top_unsupported_reasons(10)) out << "  unsupported: " << reason << '\n';
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
  print_failure(failure, implementation->name(), fuzz, out);
  if (!options.html.empty() && failure.repro_path.empty()) {
    out << fmt::format("  html report: not written (it is the repro's replay, and there is no repro)\n");
  } else if (!options.html.empty()) {
    // The report of the repro: replayed (the table it prints is the one above).
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
  check_repro_dir(options.mutants_repro_dir, violations);
  violations.throw_if_any("invalid option");
  FuzzCommandOptions with_folder = options;
  with_folder.repro_dir = options.mutants_repro_dir;
  properties::FuzzOptions fuzz = fuzz_options(with_folder);
  // Every mutant that is killed writes its repro: one fresh temporary folder for the run when none is named,
  // made once the options are valid.
  if (fuzz.repro_dir.empty()) fuzz.repro_dir = properties::repro_folder("");
  fuzz.progress_seconds = 0;
  fuzz.time_limit_seconds = options.time_limit;
  std::vector<std::string> names = options.mutants.empty() ? mutants::mutant_names() : options.mutants;
  if (!options.json) {
    out << fmt::format("seed {}; cases per mutant: {}\n", options.seed,
                       options.cases
                           ? std::to_string(*options.cases)
                           : fmt::format("short profile {}, long profile {}",
                                         properties::mutant_case_budget(properties::SizeProfile::short_sequences),
                                         properties::mutant_case_budget(properties::SizeProfile::long_sequences)));
    out << fmt::format("{:<52} {:<10} {:<44} {:>6} {:>8}\n", "mutant", "killed", "by", "cases", "seconds");
  }
  nlohmann::json rows = nlohmann::json::array();
  int killed_count = 0;  // killed, with a shrunk case the same on every machine
  int survivors = 0;
  int without_verdict = 0;   // the time limit stopped its cases
  int shrink_timed_out = 0;  // killed, but the time limit stopped its shrink: the shrunk case depends on the machine
  for (const std::string& name : names) {
    const auto implementation = impl::open_implementation(name);
    const properties::ImplementationFactory open_fresh = [&name] { return impl::open_implementation(name); };
    // Each mutant with its catalog profile (the long one for bugs past a kernel's first tile), and its
    // own shrink budget where it has one and none was asked for.
    properties::FuzzOptions mutant_fuzz = fuzz;
    std::string source;  // the real bug it re-plants, if any
    if (const mutants::Mutant* mutant = mutants::find_mutant(name)) {
      mutant_fuzz.limits = properties::GenLimits::for_profile(properties::mutant_size_profile(*mutant));
      source = mutant->source;
      if (mutant->shrink_candidates > 0 && !options.shrink_candidates) {
        mutant_fuzz.shrink_candidates = mutant->shrink_candidates;
      }
    }
    const std::int64_t budget = options.cases.value_or(properties::mutant_case_budget(mutant_fuzz.limits.profile));
    mutant_fuzz.cases = budget;
    const properties::FuzzReport report = properties::fuzz(*implementation, open_fresh, mutant_fuzz, nullptr);
    const bool killed = report.failure.has_value();
    std::string verdict = killed ? "yes" : "NO";
    if (report.stopped_by_time_limit) {
      verdict = "no verdict";
      ++without_verdict;
    } else if (!killed) {
      ++survivors;
    } else if (report.failure->shrink_stopped_by_time_limit) {
      ++shrink_timed_out;
    } else {
      ++killed_count;
    }
    const std::string by = killed
                               ? fmt::format("{}: {}", report.failure->outcome.property, report.failure->outcome.detail)
                               : std::string("-");
    if (options.json) {
      nlohmann::json row{{"mutant", name},
                         {"profile", properties::to_string(mutant_fuzz.limits.profile)},
                         {"case_budget", budget},
                         {"killed", killed},
                         {"verdict", report.stopped_by_time_limit ? "no_verdict"
                                     : killed                     ? "killed"
                                                                  : "survived"},
                         {"stopped_by_time_limit", report.stopped_by_time_limit},
                         {"cases", report.cases},
                         {"seconds", report.seconds}};
      if (!source.empty()) row["source"] = source;
      if (killed) {
        const properties::Counterexample& failure = *report.failure;
        row["property"] = failure.outcome.property;
        row["detail"] = failure.outcome.detail;
        row["counterexample"] = properties::describe(failure.failing);
        row["shrink_steps"] = failure.shrink_steps;
        row["shrink_candidates"] = failure.shrink_candidates;
        row["shrink_stopped_by_time_limit"] = failure.shrink_stopped_by_time_limit;
        if (failure.reproduction == properties::Reproduction::after_earlier_cases) {
          row["earlier_cases"] = failure.earlier_cases;
        }
        if (failure.repro_path.empty()) {
          row["repro"] = nullptr;
          row["repro_problem"] = failure.repro_problem;
        } else {
          row["repro"] = failure.repro_path;
        }
      }
      rows.push_back(row);
    } else {
      out << fmt::format("{:<52} {:<10} {:<44} {:>6} {:>8.2f}\n", name, verdict,
                         by.size() > 44 ? by.substr(0, 41) + "..." : by, report.cases, report.seconds);
      if (report.stopped_by_time_limit) {
        out << fmt::format("{:<52} stopped by the time limit ({:g} s) after {} of {} cases: no verdict\n", "",
                           options.time_limit, report.cases, budget);
      }
      if (killed) {
        out << mutant_failure_lines(*report.failure,
                                    mutant_fuzz.limits.profile == properties::SizeProfile::long_sequences,
                                    mutant_fuzz.shrink_candidates);
      }
      if (!source.empty()) out << fmt::format("{:<52} source: {}\n", "", source);
    }
  }
  if (options.json) {
    out << nlohmann::json{{"killed", killed_count},
                          {"survivors", survivors},
                          {"without_verdict", without_verdict},
                          {"shrink_stopped_by_time_limit", shrink_timed_out},
                          {"mutants", rows}}
               .dump(2)
        << '\n';
  } else {
    out << fmt::format("{} of {} mutants killed", killed_count, names.size());
    if (without_verdict > 0) {
      out << fmt::format("; {} stopped by the time limit before their case budget's end: no verdict", without_verdict);
    }
    if (shrink_timed_out > 0) {
      out << fmt::format("; {} killed, but the time limit stopped their shrink: the shrunk case depends on the machine",
                         shrink_timed_out);
    }
    out << '\n';
  }
  return killed_count == static_cast<int>(names.size()) ? kExitOk : kExitCheckFailed;
}

namespace {

// One file's line in a sequence replay, from `golden check --json`'s entry.
std::string sequence_entry_line(std::size_t position, const std::string& file, const nlohmann::json& entry) {
  const std::string name = std::filesystem::path(file).filename().string();
  if (entry.value("passed", false)) return fmt::format("  {}. {}: pass\n", position, name);
  if (entry.contains("declined")) {
    return fmt::format("  {}. {}: declined (unsupported): {}\n", position, name, entry["declined"].get<std::string>());
  }
  for (const char* key : {"not_stated", "not_checked"}) {
    if (entry.contains(key)) {
      return fmt::format("  {}. {}: {}: {}\n", position, name, table_word(entry.value("verdict", key)),
                         entry[key].get<std::string>());
    }
  }
  if (entry.contains("error")) {
    return fmt::format("  {}. {}: {}: {}\n", position, name, table_word(entry.value("verdict", std::string("raised"))),
                       entry["error"].get<std::string>());
  }
  std::vector<std::string> tensors;
  for (const nlohmann::json& tensor : entry.value("tensors", nlohmann::json::array())) {
    // The JSON's word (docs/JSON.md) back to the table's ("mismatch" -> "MISMATCH").
    const std::optional<TensorStatus> parsed = tensor_status_from_json(tensor.value("status", ""));
    if (parsed == TensorStatus::ok || parsed == TensorStatus::declined) continue;
    const std::string status = parsed ? std::string(to_string(*parsed)) : tensor.value("status", "?");
    const nlohmann::json& ulps = tensor.value("error_ulps", nlohmann::json());
    tensors.push_back(ulps.is_number()
                          ? fmt::format("{} {} ({:.3g} ulps)", tensor.value("name", "?"), status, ulps.get<double>())
                          : fmt::format("{} {}", tensor.value("name", "?"), status));
  }
  return fmt::format("  {}. {}: FAIL: {}\n", position, name, fmt::join(tensors, ", "));
}

// A verdict of `golden check --json` that failed: neither passed nor left unjudged (declined, not stated, not
// checked: not run, or not judged).
bool entry_failed(const nlohmann::json& entry) {
  return !entry.value("passed", false) && !entry.contains("declined") && !entry.contains("not_stated") &&
         !entry.contains("not_checked");
}

// A verdict that was not judged at all.
bool entry_unjudged(const nlohmann::json& entry) {
  return entry.contains("declined") || entry.contains("not_stated") || entry.contains("not_checked");
}

// `golden check --json` of `golden`'s files: its per-file entries (its notes and heartbeat go to `out`).
nlohmann::json checked_entries(const GoldenOptions& golden, std::ostream& out) {
  std::ostringstream json_output;
  run_golden_check(golden, json_output, out);
  return nlohmann::json::parse(json_output.str()).at("files");
}

// A sequence folder: its cases in order in one instance, then the failing one alone in a fresh one.
int run_sequence_replay(const FuzzCommandOptions& options, std::ostream& out) {
  const std::vector<std::string> files = properties::read_sequence_repro(options.file);
  GoldenOptions golden;
  golden.files = files;
  golden.implementation = options.implementation;
  golden.json = true;  // each file's verdict, read below
  golden.html = options.html;
  golden.html_all = options.html_all;
  golden.html_command = "replay";
  // --json's stdout is the object alone (notes go to the other stream).
  const nlohmann::json entries = checked_entries(golden, out);
  out << fmt::format("{}: {} cases in order in one instance of {}:\n", options.file, files.size(),
                     options.implementation);
  bool earlier_failed = false;
  for (std::size_t i = 0; i < files.size(); ++i) {
    out << sequence_entry_line(i + 1, files[i], entries.at(i));
    if (i + 1 < files.size() && entry_failed(entries.at(i))) earlier_failed = true;
  }
  const nlohmann::json& last = entries.at(files.size() - 1);
  out << fmt::format("the last case alone, in a fresh instance of {}:\n", options.implementation);
  GoldenOptions alone = golden;
  alone.files = {files.back()};
  alone.html.clear();
  const nlohmann::json alone_entry = checked_entries(alone, out).at(0);
  out << sequence_entry_line(files.size(), files.back(), alone_entry);
  if (entry_unjudged(last) || entry_unjudged(alone_entry)) {
    out << fmt::format("FAIL {}: the last case is declined{}: nothing decides whether the failure reproduces\n",
                       options.implementation, entry_unjudged(last) ? " after the earlier ones" : " alone");
    return kExitCheckFailed;
  }
  const bool last_failed = entry_failed(last);
  const bool fails_alone = entry_failed(alone_entry);
  std::vector<std::string> earlier_names;
  for (std::size_t i = 0; i + 1 < files.size(); ++i) {
    earlier_names.push_back(std::filesystem::path(files[i]).stem().string());
  }
  const std::string sequence = fmt::format("{} then the failing one ({})", fmt::join(earlier_names, ", "),
                                           std::filesystem::path(files.back()).stem().string());
  if (last_failed && !fails_alone) {
    out << fmt::format(
        "FAIL {}: fails only after earlier cases in the same process: {}; alone, in a fresh instance, it passes\n",
        options.implementation, sequence);
  } else if (last_failed) {
    out << fmt::format("FAIL {}: the last case fails after the earlier ones and alone, in a fresh instance\n",
                       options.implementation);
  } else if (fails_alone) {
    out << fmt::format("FAIL {}: the last case passes after the earlier ones but fails alone\n",
                       options.implementation);
  } else if (earlier_failed) {
    out << fmt::format("FAIL {}: the last case passes, but an earlier case of the sequence fails\n",
                       options.implementation);
  } else {
    out << fmt::format("PASS {}: the sequence passes: the failure does not reproduce with this implementation\n",
                       options.implementation);
    return kExitOk;
  }
  return kExitCheckFailed;
}

}  // namespace

int run_replay(const FuzzCommandOptions& options, std::ostream& out) {
  if (std::filesystem::is_directory(options.file)) return run_sequence_replay(options, out);
  GoldenOptions golden;
  golden.files = {options.file};
  golden.implementation = options.implementation;
  golden.html = options.html;
  golden.html_all = options.html_all;
  golden.html_command = "replay";
  return run_golden_check(golden, out, out);  // no progress line: replay files are small
}

}  // namespace attncheck::cli
