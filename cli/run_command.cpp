#include "cli/run_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "cli/exit_codes.hpp"
#include "core/compare/compare.hpp"
#include "core/compare/tolerance.hpp"
#include "core/errors/input_error.hpp"
#include "golden/golden_file.hpp"
#include "impl/registry.hpp"
#include "reference/yardstick.hpp"

namespace attncheck::cli {

CLI::App* add_run_command(CLI::App& app, RunOptions& options) {
  CLI::App* command = app.add_subcommand(
      "run",
      "Check every default implementation (or those named by --impl) against every golden file; print one "
      "summary table");
  command->add_option("--goldens", options.golden_dir, "folder of golden files (*.h5)")
      ->default_str(ATTNCHECK_GOLDEN_DIR);
  command->add_option("--impl", options.implementations,
                      "implementations (default: every one of kind default; see --list)");
  command->add_flag("--list", options.list,
                    "print every implementation and its kind (default, device, mutant); run nothing");
  return command;
}

int run_run(const RunOptions& options, std::ostream& out) {
  if (options.list) {
    for (const impl::RegisteredImplementation& registered : impl::registered_implementations()) {
      out << registered.name << '\t' << impl::to_string(registered.kind) << '\n';
    }
    return 0;
  }
  const std::string directory = options.golden_dir.empty() ? std::string(ATTNCHECK_GOLDEN_DIR) : options.golden_dir;
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) {
    ViolationList violations;
    violations.add("--goldens", directory, "must be a folder of golden files", "golden/data");
    violations.throw_if_any("invalid option");
  }
  std::vector<std::string> goldens;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (entry.is_regular_file() && entry.path().extension() == ".h5") goldens.push_back(entry.path().string());
  }
  std::sort(goldens.begin(), goldens.end());
  if (goldens.empty()) {
    ViolationList violations;
    violations.add("--goldens", directory, "must hold at least one *.h5 golden file", "golden/data");
    violations.throw_if_any("invalid option");
  }
  const std::vector<std::string> implementations =
      options.implementations.empty() ? impl::implementation_names() : options.implementations;
  std::vector<std::unique_ptr<impl::Implementation>> opened;
  for (const std::string& name : implementations) opened.push_back(impl::open_implementation(name));

  out << fmt::format("{:<34} {:<20} {:<6} {:<34} {:>10} {:>9}\n", "golden", "implementation", "result", "worst tensor",
                     "ulps", "declined");
  int failures = 0;
  int unsupported = 0;
  int pairs_with_declined = 0;          // pairs judged on what they computed, with some tensors declined
  std::int64_t declined_tensors = 0;    // over all pairs; each is listed by `attncheck compare`, never passed
  std::map<std::string, int> declined;  // per implementation: goldens it answered "unsupported"
  for (const std::string& path : goldens) {
    const golden::Golden golden = golden::read_golden(path);
    const std::string golden_name = std::filesystem::path(path).filename().string();
    for (const auto& implementation : opened) {
      NamedTensors actual;
      try {
        actual = implementation->run(golden.test_case);
      } catch (const impl::Unsupported& refusal) {
        out << fmt::format("{:<34} {:<20} {:<6} {}\n", golden_name, implementation->name(), "unsup.", refusal.what());
        ++unsupported;
        ++declined[implementation->name()];
        continue;
      } catch (const InputError&) {
        throw;
      } catch (const std::exception& crash) {
        ++failures;
        out << fmt::format("{:<34} {:<20} {:<6} raised: {}\n", golden_name, implementation->name(), "FAIL",
                           crash.what());
        continue;
      }
      const Precision precision = implementation->precision();
      const TpConvention convention = implementation->tp_convention();  // asked after the run, like sharded()
      const NamedTensors expected = golden::expected_tensors(golden, implementation->sharded(), convention);
      const RopeAngles angles = implementation->rope_angles();
      const YardstickErrors yardstick =
          reference::yardstick_errors(golden.test_case, expected, precision, angles, convention);
      const CompareReport report = compare(golden.test_case, expected, actual, precision, &yardstick, angles,
                                           convention, implementation->declined());
      // The worst of the tensors judged (out always is: it cannot be declined).
      const auto worst = std::max_element(report.tensors.begin(), report.tensors.end(),
                                          [](const TensorReport& a, const TensorReport& b) {
                                            const auto judged_ulps = [](const TensorReport& t) {
                                              return t.status == TensorStatus::declined ? -1.0 : t.error_ulps;
                                            };
                                            return judged_ulps(a) < judged_ulps(b);
                                          });
      if (!report.passed()) ++failures;
      const std::int64_t declined_here = report.declined_count();
      if (declined_here > 0) ++pairs_with_declined;
      declined_tensors += declined_here;
      // "pass*": everything it computed passed, and it declined some tensors, which are not a pass.
      const char* verdict = !report.passed() ? "FAIL" : declined_here > 0 ? "pass*" : "pass";
      out << fmt::format("{:<34} {:<20} {:<6} {:<34} {:>10.3g} {:>9}\n", golden_name, implementation->name(), verdict,
                         worst->name, worst->error_ulps, declined_here);
    }
  }
  const std::size_t runs = goldens.size() * implementations.size();
  out << fmt::format(
      "{} of {} (golden, implementation) pairs pass, {} unsupported{}; tolerance: {} ulps of each tensor's scale in "
      "fp64; below fp64, {} x (outputs) / {} x (gradients) the error of a naive implementation of the layer in the "
      "same precision, + {} ulps\n",
      runs - failures - unsupported, runs, unsupported,
      pairs_with_declined == 0
          ? ""
          : fmt::format("; {} declined tensor{} in {} of the pairs run (pass*: all it computed passed; declined "
                        "tensors are not judged, `attncheck compare` lists them)",
                        declined_tensors, declined_tensors == 1 ? "" : "s", pairs_with_declined),
      kFp64ToleranceUlps, kYardstickFactorOutputs, kYardstickFactorGradients, kYardstickFloorUlps);
  // An implementation that declined every golden checked nothing: that is never a pass.
  bool ran_nothing = false;
  for (const auto& [name, count] : declined) {
    if (count == static_cast<int>(goldens.size())) {
      out << fmt::format("FAIL {}: declined all {} goldens; nothing was checked\n", name, goldens.size());
      ran_nothing = true;
    }
  }
  return failures == 0 && !ran_nothing ? kExitOk : kExitCheckFailed;
}

}  // namespace attncheck::cli
