// `attncheck golden make|inspect|run|check` and `attncheck compare`: golden files (golden/SCHEMA.md).
//   golden make     generate a case, run the fp64 reference (reference-tp when --tp > 1), write a golden
//   golden inspect  print a golden's geometry, inputs and tensors
//   golden seal     write goldens' integrity digests (golden/integrity.hpp)
//   golden expand   rewrite a golden whose weights are named by the generator with stored weights
//   golden run      run an implementation on a golden's inputs and write a candidate file
//   golden check    run an implementation on goldens' inputs and compare with their expected values
//   golden yardstick  compute and store (or --verify) goldens' yardsticks for low-precision candidates
//   golden draw     write the cases `fuzz --seed S` draws for a statement of capabilities as goldens
//   golden admit    what each golden is for a statement of capabilities (JSON)
//   compare         compare a candidate file (any implementation, any language) with a golden
// Exit codes: 0 pass, 1 mismatch, 2 bad input.
#pragma once

#include "core/capabilities/capabilities.hpp"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/context_parallel_options.hpp"
#include "cli/geometry_source.hpp"
#include "core/tp/tp_convention.hpp"
#include "golden/golden_file.hpp"

namespace attncheck::cli {

struct GoldenOptions {
  // make
  GeometryOptions geometry;
  std::int64_t tp_size = 1;
  std::int64_t batch = 2;
  std::int64_t seq = 8;
  std::string decode;  // "PREFILL,STEP,STEP..." (empty: no decoding)
  std::uint64_t seed = 1;
  std::string activations = "uniform";
  bool pad_keys = false;
  bool position_gaps = false;                   // positions advance by 1 to 4 per token
  std::optional<std::int64_t> position_offset;  // every row's first position id (default: the generator's offsets)
  std::vector<std::int64_t> key_lengths;        // explicit, one per batch row (overrides --pad-keys)
  std::string weights = "stored";               // or "generated": /weights names the generator and seed
  std::string inputs = "stored";                // or "generated": /inputs names the generator for x and dout
  bool sketch_gradients = false;                // projection gradients as sketches
  bool sketch_activations = false;              // out, grads/x, decode/out as per-token sketches
  CpOptions cp;  // the context-parallel layout stored in a made golden (cli/context_parallel_options.hpp)
  std::string tp_convention = "replicated-kv";  // how the per-rank gradients written are held
  std::string output;
  // inspect, run, check, compare
  std::vector<std::string> files;  // check: goldens
  std::string golden_file;         // inspect, run, compare
  std::string implementation = "reference";
  std::string candidate;
  bool json = false;
  std::string html;                           // check, compare: also write the HTML report here (cli/html_report.hpp)
  bool html_all = false;                      // with html: every compared tensor's map
  std::string html_command = "golden check";  // the command named at the top of the report (replay, fuzz)
  bool require_all = false;                   // coverage: every feature of coverage_features() must bite somewhere
  // yardstick (cli/golden_yardstick_command.cpp)
  std::vector<std::string> yardstick_precisions = {"fp32"};
  std::vector<std::string> yardstick_angles = {"float32", "float64"};
  std::vector<std::string> yardstick_conventions;  // default: the golden's own
  bool verify = false;
  bool progress = false;  // check: a live progress line on stderr (cli/progress_line.hpp)
  // draw, admit (cli/golden_draw_command.cpp)
  std::int64_t draw_cases = 0;
  std::string draw_profile = "short";
  std::string supports_file;  // a statement of capabilities (JSON); draw, admit: empty for everything; compare
};

struct GoldenCommands {
  CLI::App* make = nullptr;
  CLI::App* inspect = nullptr;
  CLI::App* expand = nullptr;
  CLI::App* seal = nullptr;
  CLI::App* run = nullptr;
  CLI::App* check = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* coverage = nullptr;
  CLI::App* yardstick = nullptr;
  CLI::App* draw = nullptr;
  CLI::App* admit = nullptr;
};

GoldenCommands add_golden_commands(CLI::App& app, GoldenOptions& options);

// "" for a golden whose integrity digest was verified; else a note line saying it has none.
std::string integrity_note(const golden::Golden& golden, const std::string& path);

// A geometry in one line, as the check and compare reports head each golden.
std::string describe_geometry(const Geometry& geometry);

// Each returns the exit code; InputError propagates (exit 2).
// Progress of a long reference run (a line every 30 s) goes to err.
int run_golden_make(const GoldenOptions& options, std::ostream& out, std::ostream& err);
int run_golden_inspect(const GoldenOptions& options, std::ostream& out);
int run_golden_expand(const GoldenOptions& options, std::ostream& out);
int run_golden_seal(const GoldenOptions& options, std::ostream& out);
int run_golden_run(const GoldenOptions& options, std::ostream& out, std::ostream& err);
int run_golden_check(const GoldenOptions& options, std::ostream& out, std::ostream& err);
int run_compare(const GoldenOptions& options, std::ostream& out, std::ostream& err);
int run_golden_coverage(const GoldenOptions& options, std::ostream& out);  // cli/golden_coverage_command.cpp
// cli/golden_yardstick_command.cpp: `golden yardstick` (stored yardsticks, golden/stored_yardstick.hpp)
void add_golden_yardstick_command(CLI::App& golden, GoldenCommands& commands, GoldenOptions& options);
int run_golden_yardstick(const GoldenOptions& options, std::ostream& out, std::ostream& err);
// cli/golden_draw_command.cpp
// The statement in FILE (--supports; docs/CAPABILITIES.md), or everything a layer may be offered when none is given.
Capabilities stated_capabilities(const std::string& file);
void add_golden_draw_commands(CLI::App& golden, GoldenCommands& commands, GoldenOptions& options);
int run_golden_draw(const GoldenOptions& options, std::ostream& out);
int run_golden_admit(const GoldenOptions& options, std::ostream& out);

}  // namespace attncheck::cli
