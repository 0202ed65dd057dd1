#include "cli/cli_app.hpp"

#include <H5Cpp.h>

#include <exception>
#include <iostream>
#include <limits>
#include <new>
#include <optional>

#include <CLI/CLI.hpp>

#include "cli/capabilities_command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/fuzz_command.hpp"
#include "cli/golden_command.hpp"
#include "cli/plan_command.hpp"
#include "cli/progress_line.hpp"
#include "cli/run_command.hpp"
#include "core/errors/input_error.hpp"
#include "core/resources/memory_room.hpp"

namespace attncheck::cli {

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "attncheck: holds attention implementations to an fp64 reference across head_dim, GQA and "
      "tensor-parallel geometries",
      "attncheck"};
  app.set_version_flag("--version", "attncheck " ATTNCHECK_VERSION);
  app.require_subcommand(1);
  // Global, and accepted after the subcommand too (fallthrough, set before the subcommands exist).
  app.fallthrough();
  std::optional<std::uint64_t> max_memory;
  app.add_option("--max-memory", max_memory,
                 "refuse work estimated to need more memory than this (e.g. 4G, 512M); default: what the machine, "
                 "its cgroup and ulimit -v leave")
      ->transform(CLI::AsSizeValue(false))
      ->check(
          CLI::Range(std::uint64_t{1} << 20, std::numeric_limits<std::uint64_t>::max()).description("at least 1 MiB"));
  PlanOptions plan_options;
  CLI::App* plan = add_plan_command(app, plan_options);
  GoldenOptions golden_options;
  const GoldenCommands golden = add_golden_commands(app, golden_options);
  RunOptions run_options;
  CLI::App* run = add_run_command(app, run_options);
  FuzzCommandOptions fuzz_options;
  const FuzzCommands fuzz = add_fuzz_commands(app, fuzz_options);
  CapabilitiesOptions capabilities_options;
  CLI::App* capabilities = add_capabilities_command(app, capabilities_options);

  try {
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 takes them reversed
  } catch (const CLI::ParseError& error) {
    return app.exit(error, out, err) == 0 ? kExitOk : kExitBadInput;  // help and version exit 0
  }

  set_max_memory(max_memory);
  std::string name = app.get_subcommands().front()->get_name();
  if (!app.get_subcommands().front()->get_subcommands().empty()) {
    name += " " + app.get_subcommands().front()->get_subcommands().front()->get_name();  // "golden make"
  }
  try {
    if (plan->parsed()) run_plan(plan_options, out);
    if (run->parsed()) {
      run_options.progress = terminal_progress() && &err == &std::cerr;  // a test's stream is no terminal
      return run_run(run_options, out, err);
    }
    if (golden.make->parsed()) return run_golden_make(golden_options, out, err);
    if (golden.inspect->parsed()) return run_golden_inspect(golden_options, out);
    if (golden.expand->parsed()) return run_golden_expand(golden_options, out);
    if (golden.seal->parsed()) return run_golden_seal(golden_options, out);
    if (golden.run->parsed()) return run_golden_run(golden_options, out, err);
    if (golden.check->parsed()) {
      golden_options.progress = terminal_progress() && &err == &std::cerr;
      return run_golden_check(golden_options, out, err);
    }
    if (golden.coverage->parsed()) return run_golden_coverage(golden_options, out);
    if (golden.yardstick->parsed()) return run_golden_yardstick(golden_options, out, err);
    if (golden.draw->parsed()) return run_golden_draw(golden_options, out);
    if (golden.admit->parsed()) return run_golden_admit(golden_options, out);
    if (golden.compare->parsed()) return run_compare(golden_options, out, err);
    if (fuzz.fuzz->parsed()) return run_fuzz(fuzz_options, out);
    if (fuzz.mutants->parsed()) return run_mutants(fuzz_options, out);
    if (fuzz.replay->parsed()) return run_replay(fuzz_options, out);
    if (capabilities->parsed()) return run_capabilities(capabilities_options, out);
    return kExitOk;
  } catch (const InputError& error) {
    err << "attncheck " << name << ": error: " << error.what() << '\n';
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    // What the estimates before each large allocation (core/resources/memory_room.hpp) did not foresee:
    // other processes took the memory meanwhile, or an estimate fell short (then please report it).
    const MemoryRoom room = memory_room();
    err << "attncheck " << name << ": error: out of memory: this request needed more memory than the process "
        << "could take (now " << describe_bytes(room.bytes) << ", limited by " << room.limited_by
        << "); ask for a smaller case, or free memory. If attncheck estimated that it would fit, please report it\n";
    return kExitBadInput;
  } catch (const std::exception& error) {
    err << "attncheck " << name << ": internal error (please report): " << error.what() << '\n';
    return kExitInternal;
  } catch (const H5::Exception& error) {
    // HDF5's C++ exceptions do not derive from std::exception; the golden readers turn those a file can
    // cause into InputError (exit 2), so one reaching here is attncheck's bug: reported, never an abort.
    err << "attncheck " << name << ": internal error (please report): HDF5: " << error.getFuncName() << ": "
        << error.getDetailMsg() << '\n';
    return kExitInternal;
  }
}

}  // namespace attncheck::cli
