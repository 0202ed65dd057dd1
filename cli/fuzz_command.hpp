// `attncheck fuzz`, `attncheck mutants` and `attncheck replay` (properties/fuzz.hpp underneath).
//   fuzz --impl NAME [--cases N | --seconds S] [--seed N] [--shard i/n] [--profile short|long]
//     [--max-size F] [--shrink-candidates N] [--shrink-seconds S] [--sequence-cases N]: progress lines;
//     exit 1 on the first failure with the shrunk case's repro file and the command replaying it. --cases
//     is a verdict, the same on every machine; --seconds (60 by default) is exploratory, and says that
//     what it covered depends on the machine. A failure that a fresh instance does not show is reported
//     as failing only after earlier cases in the same process, with the sequence that reproduces it.
//   mutants [--mutant NAME]... [--cases N] [--time-limit S]: fuzzes every mutant of the catalog for its
//     profile's case budget (properties/mutant_budget.hpp); a table of mutant, killed?, by which property, cases
//     needed, seconds, shrunk counterexample. Exit 1 if any survives, or if the time limit (a runaway
//     stop) ended a mutant's cases or shrink: such a row has no verdict.
//   replay FILE|FOLDER --impl NAME: a repro (or any golden) file checked against one implementation; a
//     sequence folder (properties/repro.hpp) runs its cases in order in one instance, then the failing
//     one alone in a fresh instance, and says which it needs.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace attncheck::cli {

struct FuzzCommandOptions {
  std::string implementation;
  std::optional<double> seconds;
  std::optional<std::int64_t> cases;
  std::uint64_t seed = 1;
  std::string shard = "0/1";
  std::string profile = "short";  // properties::SizeProfile by name
  double max_size = 1.0;
  std::string repro_dir;  // fuzz's; made only when a repro is written; empty: $TMPDIR/attncheck-repro-XXXXXX
  // fuzz: narrow the implementation's capabilities (core/capabilities): FEATURE names.
  std::vector<std::string> only;
  std::vector<std::string> without;
  // Absent: properties::kDefaultShrinkCandidates (mutants: the catalog's own for a few expensive ones).
  std::optional<std::int64_t> shrink_candidates;
  double shrink_seconds = 300.0;    // a runaway stop for shrinking
  std::int64_t sequence_cases = 0;  // set by the flag's default (properties::kDefaultSequenceCases)
  // mutants
  std::vector<std::string> mutants;  // default: the whole catalog
  // Its own variable: one shared with fuzz took mutants' default, and a clean `fuzz` made ./attncheck-mutants/.
  std::string mutants_repro_dir;  // empty: one fresh $TMPDIR/attncheck-repro-XXXXXX for the run
  double time_limit = 600.0;         // per mutant, a runaway stop
  bool json = false;
  // replay
  std::string file;
  // replay, fuzz: also write the HTML report (fuzz: of the shrunk failure, replayed) (cli/html_report.hpp)
  std::string html;
  bool html_all = false;
};

struct FuzzCommands {
  CLI::App* fuzz = nullptr;
  CLI::App* mutants = nullptr;
  CLI::App* replay = nullptr;
};

FuzzCommands add_fuzz_commands(CLI::App& app, FuzzCommandOptions& options);
int run_fuzz(const FuzzCommandOptions& options, std::ostream& out);
int run_mutants(const FuzzCommandOptions& options, std::ostream& out);
int run_replay(const FuzzCommandOptions& options, std::ostream& out);

}  // namespace attncheck::cli
