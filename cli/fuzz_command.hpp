// `attncheck fuzz`, `attncheck mutants` and `attncheck replay` (properties/fuzz.hpp underneath).
//   fuzz --impl NAME [--seconds S | --cases N] [--seed N] [--shard i/n] [--profile short|long]
//     [--max-size F]: progress lines,
//     exit 1 on the first failure with the shrunk case's repro file and the command replaying it.
//   mutants [--mutant NAME]... [--seconds S]: fuzzes every mutant of the catalog until it is caught;
//     a table of mutant, killed?, by which property, cases needed, seconds, shrunk counterexample. Exit 1
//     if any survives.
//   replay FILE --impl NAME: a repro (or any golden) file checked against one implementation.
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
  std::string repro_dir = ".";
  double shrink_seconds = 60.0;
  // mutants
  std::vector<std::string> mutants;  // default: the whole catalog
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
