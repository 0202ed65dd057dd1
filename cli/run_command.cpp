#include "cli/run_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <semaphore>

#include <omp.h>

#include "cli/exit_codes.hpp"
#include "cli/golden_command.hpp"
#include "cli/heartbeat.hpp"
#include "cli/html_report.hpp"
#include "cli/junit_report.hpp"
#include "cli/progress_line.hpp"
#include "cli/yardstick_source.hpp"
#include "core/compare/compare.hpp"
#include "core/compare/heatmap.hpp"
#include "core/compare/tolerance.hpp"
#include "core/errors/input_error.hpp"
#include "core/resources/memory_room.hpp"
#include "core/resources/resident_memory.hpp"
#include "golden/golden_file.hpp"
#include "impl/registry.hpp"
#include "reference/memory_estimate.hpp"
#include "reference/run_time_estimate.hpp"

namespace attncheck::cli {

namespace {

// One (golden, implementation) pair judged: its table row and verdict, computed on a worker thread and
// printed by the main thread in table order.
struct PairOutcome {
  std::string row;
  PairVerdict verdict;
  YardstickSource yardstick = YardstickSource::none;
  std::vector<Heatmap> maps;       // --html only
  std::vector<std::string> notes;  // --html only: on the per-rank gradients
  bool failed() const {
    return verdict.kind == PairVerdict::Kind::raised || verdict.kind == PairVerdict::Kind::no_answer ||
           (verdict.kind == PairVerdict::Kind::judged && !verdict.report.passed());
  }
  std::int64_t declined_tensors() const { return verdict.report.declined_count(); }
};

// drawing: --html's options, or nullptr for no maps.
PairOutcome judge_pair(const std::string& path, const golden::Golden& golden, impl::Implementation& implementation,
                       const HeatmapOptions* drawing) {
  const std::string golden_name = std::filesystem::path(path).filename().string();
  const auto started = std::chrono::steady_clock::now();
  PairOutcome outcome;
  outcome.verdict = PairVerdict{golden_name, implementation.name()};
  const auto finish = [&] {
    outcome.verdict.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return std::move(outcome);
  };
  NamedTensors actual;
  try {
    actual = implementation.run(golden.test_case);
  } catch (const impl::Unsupported& refusal) {
    outcome.row = fmt::format("{:<34} {:<20} {:<6} {}\n", golden_name, implementation.name(), "unsup.", refusal.what());
    outcome.verdict.kind = PairVerdict::Kind::unsupported;
    outcome.verdict.message = refusal.what();
    return finish();
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& crash) {
    // A crash, a worker's error or invalid candidate (raised), or no answer in time: the implementation's
    // failure on this golden, never bad input of the user's.
    outcome.verdict.kind = failure_kind(crash);
    outcome.verdict.message = crash.what();
    outcome.row = outcome.verdict.kind == PairVerdict::Kind::no_answer
                      ? fmt::format("{:<34} {:<20} {:<6} no answer: {}\n", golden_name, implementation.name(), "FAIL",
                                    crash.what())
                      : fmt::format("{:<34} {:<20} {:<6} raised: {}\n", golden_name, implementation.name(), "FAIL",
                                    crash.what());
    return finish();
  }
  const Precision precision = implementation.precision();
  const TpConvention convention = implementation.tp_convention();  // asked after the run, like sharded()
  const NamedTensors expected = golden::expected_tensors(golden, implementation.sharded(), convention);
  const RopeAngles angles = implementation.rope_angles();
  const SourcedYardstick sourced = golden_yardstick(path, golden, expected, precision, angles, convention);
  outcome.yardstick = sourced.source;
  outcome.verdict.yardstick = describe(sourced);
  const CompareReport report = compare(golden.test_case, expected, actual, precision, &sourced.errors, angles,
                                       convention, implementation.declined());
  // The worst of the tensors judged (out always is: it cannot be declined).
  const auto worst =
      std::max_element(report.tensors.begin(), report.tensors.end(), [](const TensorReport& a, const TensorReport& b) {
        const auto judged_ulps = [](const TensorReport& t) {
          return t.status == TensorStatus::declined ? -1.0 : t.error_ulps;
        };
        return judged_ulps(a) < judged_ulps(b);
      });
  // "pass*": everything it computed passed, and it declined some tensors, which are not a pass.
  const std::int64_t declined_tensors = report.declined_count();
  const char* result_cell = !report.passed() ? "FAIL" : declined_tensors > 0 ? "pass*" : "pass";
  outcome.row = fmt::format("{:<34} {:<20} {:<6} {:<34} {:>10.3g} {:>9}\n", golden_name, implementation.name(),
                            result_cell, worst->name, worst->error_ulps, declined_tensors);
  outcome.verdict.report = report;
  // Drawn now, while the tensors are at hand; only the small grids are kept.
  if (drawing != nullptr) {
    outcome.maps = error_heatmaps(golden.test_case, expected, actual, report, *drawing);
    outcome.notes = rank_gradient_notes(golden, implementation.name(), implementation.sharded(), convention);
    if (!outcome.verdict.yardstick.empty()) outcome.notes.push_back(outcome.verdict.yardstick);
  }
  return finish();
}

// --jobs N is an upper bound: a golden runs as many of its pairs side by side as fit in the memory available
// now (memory_room(), the golden itself already held), each pair counted at the bound every implementation
// is held to (PairMemory::bound_bytes: 3 x its layer's bytes + 64 MiB). One pair always runs; a lowered count is said on
// stderr, so that the user sees why a run was slower than asked.
int jobs_that_fit(int most_jobs, int pairs, std::uint64_t layer, const std::string& golden_name, std::ostream& err) {
  const int wanted = std::min(most_jobs, std::max(pairs, 1));
  if (wanted == 1) return 1;
  const MemoryRoom room = memory_room();
  const double per_pair = static_cast<double>(PairMemory{.layer_bytes = layer}.bound_bytes());
  const int fit = per_pair <= 0 ? wanted : static_cast<int>(std::min<double>(wanted, room.bytes / per_pair));
  if (fit >= wanted) return wanted;
  const int jobs = std::max(fit, 1);
  err << fmt::format(
             "run: {}: {} pair{} side by side, not {}: each may take {} ({} x its layer's {}, + {}) and {} has {}\n",
             golden_name, jobs, jobs == 1 ? "" : "s", wanted, describe_bytes(static_cast<std::uint64_t>(per_pair)),
             reference::kPeakLayerBytesFactor, describe_bytes(layer), describe_bytes(reference::kPeakFixedAllowanceBytes),
             room.limited_by, describe_bytes(room.bytes))
      << std::flush;
  return jobs;
}

}  // namespace

constexpr std::string_view kDefaultGoldenDir = "golden/data";

CLI::App* add_run_command(CLI::App& app, RunOptions& options) {
  CLI::App* command = app.add_subcommand(
      "run",
      "Check every default implementation (or those named by --impl) against every golden file; print one "
      "summary table");
  command->add_option("--goldens", options.golden_dir,
                      "folder of golden files (*.h5); default golden/data of the current folder (the repository's "
                      "committed goldens, from its root)");
  command->add_option("--impl", options.implementations,
                      "implementations (default: every one of kind default; see --list)");
  command->add_option(
      "--junit", options.junit,
      "also write the verdicts as JUnit XML to this file (one test case per golden and implementation)");
  add_html_options(*command, options.html, options.html_all);
  command
      ->add_option("--jobs", options.jobs,
                   "at most this many (golden, implementation) pairs run side by side: fewer on a golden where this "
                   "many would not fit in the memory available (each pair is held to 3x its layer's bytes + 64 MiB)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command->add_flag("--list", options.list,
                    "print every implementation and its kind (default, device, mutant); run nothing");
  return command;
}

int run_run(const RunOptions& options, std::ostream& out, std::ostream& err) {
  if (options.list) {
    for (const impl::RegisteredImplementation& registered : impl::registered_implementations()) {
      out << registered.name << '\t' << impl::to_string(registered.kind) << '\n';
    }
    return 0;
  }
  check_html_path(options.html);
  // No path of the machine that built the binary is compiled in: the default is relative to where it runs.
  const std::string directory = options.golden_dir.empty() ? std::string(kDefaultGoldenDir) : options.golden_dir;
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) {
    ViolationList violations;
    violations.add("--goldens", directory, "must be a folder of golden files",
                   options.golden_dir.empty() ? "run from the attncheck repository's root (golden/data), or name a "
                                                "folder with --goldens"
                                              : "golden/data");
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
                     "ulps", "declined")
      << std::flush;
  // A live line on a terminal (stderr); each pair's row is printed and flushed as it ends either way.
  ProgressLine progress(err, options.progress, static_cast<int>(goldens.size() * opened.size()), "pairs");
  int failures = 0;
  int unsupported = 0;
  int pairs_with_declined = 0;          // pairs judged on what they computed, with some tensors declined
  std::int64_t declined_tensors = 0;    // over all pairs; each is listed by `attncheck compare`, never passed
  std::map<std::string, int> declined;  // per implementation: goldens it answered "unsupported"
  std::vector<PairVerdict> verdicts;    // for --junit
  HtmlReport html{
      .command = fmt::format("attncheck run --goldens {} --impl {}", directory, fmt::join(implementations, " ")),
      .all = options.html_all};
  const HeatmapOptions drawing{.all = options.html_all};
  std::map<YardstickSource, int> yardsticks;  // below fp64: where each pair's yardstick came from
  // A golden's implementations run side by side, `jobs` at a time (each object on one thread at a time);
  // rows are printed in table order as they become ready.
  const int most_jobs = std::max(1, options.jobs);
  // The threads the pairs share: OpenMP's own count (OMP_NUM_THREADS when set, else the cores), read once
  // before any pair sets its share. omp_get_num_procs() here ignored OMP_NUM_THREADS=1: two threads a pair
  // beside another busy process on 2 cores waited at every barrier (a golden check 40 s alone took 119 s).
  const int threads_to_share = omp_get_max_threads();
  for (const std::string& path : goldens) {
    const std::string golden_name = std::filesystem::path(path).filename().string();
    progress.status(fmt::format("reading {}", golden_name));
    const golden::Golden golden = golden::read_golden(path);
    const std::uint64_t layer = reference::layer_bytes(
        golden.test_case.geometry(), {.batch = golden.test_case.inputs.batch, .seq = golden.test_case.inputs.seq});
    const int jobs = jobs_that_fit(most_jobs, static_cast<int>(opened.size()), layer, golden_name, err);
    // Plain lines on stderr while a long golden runs, where no live progress line shows it (a CI log, a pipe):
    // its implementations, `jobs` at a time, each about as long as the reference.
    std::optional<Heartbeat> heartbeat;
    if (!options.progress) {
      const double rounds = std::ceil(static_cast<double>(opened.size()) / jobs);
      heartbeat.emplace(err, fmt::format("run: {}", golden_name),
                        rounds * reference::estimated_reference_seconds(golden.test_case));
    }
    // Memory (PairMemory), with --junit only, where it is reported: measuring hands freed memory back to the
    // kernel before each pair, whose pages are then faulted in afresh (about a third more time over the
    // committed goldens). One pair at a time is measured alone; pairs side by side share their golden's peak.
    const bool measure_memory = !options.junit.empty();
    const auto measure_from = [] {
      reset_peak_resident();
      return resident_memory();
    };
    const auto measured_since = [&](const std::optional<ResidentMemory>& start, int pairs) -> std::optional<PairMemory> {
      const std::optional<ResidentMemory> now = resident_memory();
      if (!start || !now) return std::nullopt;
      return PairMemory{.peak_added_bytes = now->peak > start->current ? now->peak - start->current : 0,
                        .layer_bytes = layer,
                        .pairs_measured_together = pairs,
                        .pairs_at_a_time = jobs};
    };
    const bool measure_each_pair = measure_memory && jobs == 1;
    const bool measure_golden = measure_memory && jobs > 1;
    const std::optional<ResidentMemory> golden_start = measure_golden ? measure_from() : std::nullopt;
    std::counting_semaphore<> slots(jobs);
    std::mutex running_mutex;
    std::vector<std::string> running;
    const auto show_running = [&] {  // under running_mutex
      progress.status(running.empty() ? golden_name : fmt::format("{}: {}", golden_name, fmt::join(running, ", ")));
    };
    std::vector<std::future<PairOutcome>> pairs;
    for (const auto& implementation : opened) {
      pairs.push_back(std::async(std::launch::async, [&, implementation = implementation.get()] {
        slots.acquire();
        {
          const std::lock_guard lock(running_mutex);
          running.push_back(implementation->name());
          show_running();
        }
        // Each pair's OpenMP loops get their share of the cores (a team per pair would oversubscribe them).
        omp_set_num_threads(std::max(1, threads_to_share / jobs));
        std::exception_ptr problem;
        PairOutcome outcome;
        try {
          const std::optional<ResidentMemory> start = measure_each_pair ? measure_from() : std::nullopt;
          outcome = judge_pair(path, golden, *implementation, options.html.empty() ? nullptr : &drawing);
          if (measure_each_pair) outcome.verdict.memory = measured_since(start, 1);
        } catch (...) {
          problem = std::current_exception();
        }
        {
          const std::lock_guard lock(running_mutex);
          running.erase(std::find(running.begin(), running.end(), implementation->name()));
          show_running();
        }
        slots.release();
        if (problem) std::rethrow_exception(problem);
        return outcome;
      }));
    }
    std::exception_ptr first_problem;  // bad input (exit 2): raised once every pair of this golden is done
    std::optional<PairMemory> shared_memory;  // their rows wait for the batch's peak
    if (measure_golden) {
      for (auto& pair : pairs) pair.wait();
      shared_memory = measured_since(golden_start, static_cast<int>(opened.size()));
    }
    for (auto& pair : pairs) {
      try {
        PairOutcome outcome = pair.get();
        if (measure_golden) outcome.verdict.memory = shared_memory;
        progress.print(out, outcome.row);
        progress.step_done();
        failures += outcome.failed() ? 1 : 0;
        if (outcome.verdict.kind == PairVerdict::Kind::unsupported) {
          ++unsupported;
          ++declined[outcome.verdict.implementation];
        }
        if (outcome.declined_tensors() > 0) ++pairs_with_declined;
        declined_tensors += outcome.declined_tensors();
        if (outcome.yardstick != YardstickSource::none) ++yardsticks[outcome.yardstick];
        if (!options.html.empty()) {
          html.sections.push_back({.verdict = outcome.verdict,
                                   .description = describe_geometry(golden.test_case.geometry()),
                                   .notes = std::move(outcome.notes),
                                   .maps = std::move(outcome.maps)});
        }
        verdicts.push_back(std::move(outcome.verdict));
      } catch (...) {
        if (!first_problem) first_problem = std::current_exception();
      }
    }
    if (first_problem) std::rethrow_exception(first_problem);
  }
  progress.stop();
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
  if (!yardsticks.empty()) {
    out << fmt::format(
        "yardsticks: {} stored in the goldens (bound to their integrity digests), {} stored but not bound and so "
        "recomputed (equal), {} computed (`attncheck golden yardstick` stores them)\n",
        yardsticks[YardstickSource::stored], yardsticks[YardstickSource::recomputed],
        yardsticks[YardstickSource::computed]);
  }
  if (!options.junit.empty()) write_junit(options.junit, verdicts);
  if (!options.html.empty()) write_html_report(options.html, html);
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
