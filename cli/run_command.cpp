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
#include "cli/golden_pair.hpp"
#include "cli/heartbeat.hpp"
#include "cli/html_report.hpp"
#include "cli/junit_report.hpp"
#include "cli/progress_line.hpp"
#include "cli/support_matrix.hpp"
#include "cli/yardstick_source.hpp"
#include "core/capabilities/capabilities_json.hpp"
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
  bool failed() const { return cli::failed(verdict); }
  std::int64_t declined_tensors() const { return verdict.report.declined_count(); }
};

// The table's row of a verdict: result, worst tensor, its ulps, declined tensors (judged); the reason (others).
std::string table_row(const std::string& golden_name, const PairVerdict& verdict) {
  const std::string& name = verdict.implementation;
  switch (verdict.kind) {
    case PairVerdict::Kind::judged:
      break;
    case PairVerdict::Kind::unsupported:
      return fmt::format("{:<34} {:<20} {:<9} {}\n", golden_name, name, "unsup.", verdict.message);
    case PairVerdict::Kind::not_stated:
      return fmt::format("{:<34} {:<20} {:<9} {}\n", golden_name, name, "unstated", verdict.message);
    case PairVerdict::Kind::not_checked:
      return fmt::format("{:<34} {:<20} {:<9} not checked: {}\n", golden_name, name, "UNCHECKED", verdict.message);
    case PairVerdict::Kind::broken_promise:
      return fmt::format("{:<34} {:<20} {:<9} broken promise: {}\n", golden_name, name, "FAIL", verdict.message);
    case PairVerdict::Kind::no_answer:
      return fmt::format("{:<34} {:<20} {:<9} no answer: {}\n", golden_name, name, "FAIL", verdict.message);
    case PairVerdict::Kind::raised:
      return fmt::format("{:<34} {:<20} {:<9} raised: {}\n", golden_name, name, "FAIL", verdict.message);
  }
  const CompareReport& report = verdict.report;
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
  return fmt::format("{:<34} {:<20} {:<9} {:<34} {:>10.3g} {:>9}\n", golden_name, name, result_cell, worst->name,
                     worst->error_ulps, declined_tensors);
}

// A pair judged by judge_golden_pair (cli/golden_pair.hpp), as the run reports it. drawing: --html's options,
// or nullptr for no maps.
PairOutcome judge_pair(const std::string& path, const golden::Golden& golden, impl::Implementation& implementation,
                       const Admission& admission, const HeatmapOptions* drawing) {
  const std::string golden_name = std::filesystem::path(path).filename().string();
  GoldenPair pair = judge_golden_pair(path, golden, implementation, admission, nullptr, drawing);
  PairOutcome outcome;
  outcome.verdict = std::move(pair.verdict);
  outcome.verdict.golden = golden_name;
  // The yardsticks line counts the low-precision ones a golden can store; an fp64 one (a mismatch held a second
  // time) is never stored, and its report says so.
  outcome.yardstick = pair.yardstick.contract == "fp64" ? YardstickSource::none : pair.yardstick.source;
  outcome.row = table_row(golden_name, outcome.verdict);
  if (drawing != nullptr) {
    outcome.maps = std::move(pair.maps);
    outcome.notes = std::move(pair.notes);
  }
  return outcome;
}

// A rung's cell: the pair's verdict, except where the rung's own part was not judged though the rest passed (a
// decode rung run without its schedule, a TP rung run as one process): that rung was not climbed, so the cell says
// why, never "pass": "declined" where the implementation itself declined the part, "not stated" where it never
// ran it (its capabilities left it out, or it runs no TP plan).
PairVerdict rung_verdict(PairVerdict verdict, const FeatureSet& uses) {
  if (verdict.kind != PairVerdict::Kind::judged || !verdict.report.passed()) return verdict;
  const auto tensors = [&](std::string_view prefix, auto&& which) {
    return std::any_of(verdict.report.tensors.begin(), verdict.report.tensors.end(),
                       [&](const TensorReport& t) { return t.name.starts_with(prefix) && which(t); });
  };
  for (const auto& [feature, prefix] :
       {std::pair{Feature::decode, "decode/"}, std::pair{Feature::tensor_parallel, "ranks/"}}) {
    if (!uses.contains(feature) ||
        tensors(prefix, [](const TensorReport& t) { return t.status != TensorStatus::declined; })) {
      continue;
    }
    const bool declined_itself = tensors(prefix, [](const TensorReport& t) {
      return t.status == TensorStatus::declined && !t.declined_reason.ends_with(kNotStatedPart);
    });
    verdict.kind = declined_itself ? PairVerdict::Kind::unsupported : PairVerdict::Kind::not_stated;
    verdict.message = fmt::format("{} {}; the rest of the rung passed", to_string(feature),
                                  declined_itself ? "was declined" : "was not run (not among what it states or runs)");
    verdict.report = {};
    break;
  }
  return verdict;
}

// A pair that was not run (not stated, or not checked), as the run reports it.
PairOutcome not_run(PairVerdict verdict) {
  PairOutcome outcome;
  outcome.verdict = std::move(verdict);
  outcome.row = table_row(outcome.verdict.golden, outcome.verdict);
  return outcome;
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
  command->add_flag(
      "--json", options.json,
      "print one JSON object (docs/JSON.md: the support matrix, every pair's verdict, each implementation's "
      "capabilities) instead of the tables");
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

  // The ladder's rungs run first: the support matrix opens the report (cli/support_matrix.hpp).
  std::stable_partition(goldens.begin(), goldens.end(), [](const std::string& path) {
    return is_ladder_golden(std::filesystem::path(path).filename().string());
  });
  const std::size_t ladder_goldens =
      static_cast<std::size_t>(std::count_if(goldens.begin(), goldens.end(), [](const std::string& path) {
        return is_ladder_golden(std::filesystem::path(path).filename().string());
      }));
  // A live line on a terminal (stderr); each pair's row is printed and flushed as it ends either way.
  ProgressLine progress(err, options.progress, static_cast<int>(goldens.size() * opened.size()), "pairs");
  int failures = 0;
  int unsupported = 0;
  int not_stated_pairs = 0;
  int unchecked_pairs = 0;
  int pairs_with_declined = 0;          // pairs judged on what they computed, with some tensors declined
  std::int64_t declined_tensors = 0;    // over all pairs; each is listed by `attncheck compare`, never passed
  std::map<std::string, int> declined;  // per implementation: goldens it declined or did not state
  std::vector<PairVerdict> verdicts;    // for --junit and --json
  std::vector<std::string> unchecked;   // "golden: implementation: why", for the summary
  SupportMatrix matrix{.implementations = implementations};
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
  // One golden's pairs, in implementation order: those outside an implementation's capabilities are not run (its
  // outline decides, before the golden is read); a golden that does not fit in memory is named, not run.
  const auto judge_golden = [&](const std::string& path, std::string& description, FeatureSet& uses) {
    const std::string golden_name = std::filesystem::path(path).filename().string();
    progress.status(fmt::format("reading {}", golden_name));
    const CaseOutline outline = golden::read_case_outline(path);
    description = describe_geometry(outline.geometry());
    uses = features_of(outline);
    std::vector<Admission> admissions;
    for (const auto& implementation : opened) admissions.push_back(admit(implementation->capabilities(), outline));
    std::vector<PairOutcome> outcomes(opened.size());
    const bool any_admitted =
        std::any_of(admissions.begin(), admissions.end(), [](const Admission& a) { return a.admitted(); });
    std::optional<golden::Golden> golden;
    std::string memory_refusal;
    if (any_admitted) {
      try {
        golden = golden::read_golden(path);
      } catch (const NotEnoughMemory& refusal) {  // named, and the goldens after it still run
        memory_refusal = refusal.what();
      }
    }
    for (std::size_t i = 0; i < opened.size(); ++i) {
      if (!admissions[i].admitted()) {
        outcomes[i] = not_run(not_stated(golden_name, opened[i]->name(), admissions[i]));
      } else if (!golden) {
        outcomes[i] = not_run(not_checked(golden_name, opened[i]->name(), memory_refusal));
      }
    }
    if (!golden) return outcomes;
    const std::uint64_t layer = reference::layer_bytes(
        golden->test_case.geometry(), {.batch = golden->test_case.inputs.batch, .seq = golden->test_case.inputs.seq});
    const int admitted = static_cast<int>(
        std::count_if(admissions.begin(), admissions.end(), [](const Admission& a) { return a.admitted(); }));
    const int jobs = jobs_that_fit(most_jobs, admitted, layer, golden_name, err);
    // Plain lines on stderr while a long golden runs, where no live progress line shows it (a CI log, a pipe):
    // its implementations, `jobs` at a time, each about as long as the reference.
    std::optional<Heartbeat> heartbeat;
    if (!options.progress) {
      const double rounds = std::ceil(static_cast<double>(admitted) / jobs);
      heartbeat.emplace(err, fmt::format("run: {}", golden_name),
                        rounds * reference::estimated_reference_seconds(golden->test_case));
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
    std::vector<std::pair<std::size_t, std::future<PairOutcome>>> pairs;
    for (std::size_t i = 0; i < opened.size(); ++i) {
      if (!admissions[i].admitted()) continue;
      pairs.emplace_back(i, std::async(std::launch::async, [&, i, implementation = opened[i].get()] {
                           slots.acquire();
                           {
                             const std::lock_guard lock(running_mutex);
                             running.push_back(implementation->name());
                             show_running();
                           }
                           // Each pair's OpenMP loops get their share of the cores (a team per pair would oversubscribe
                           // them).
                           omp_set_num_threads(std::max(1, threads_to_share / jobs));
                           std::exception_ptr problem;
                           PairOutcome outcome;
                           try {
                             const std::optional<ResidentMemory> start =
                                 measure_each_pair ? measure_from() : std::nullopt;
                             outcome = judge_pair(path, *golden, *implementation, admissions[i],
                                                  options.html.empty() ? nullptr : &drawing);
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
      for (auto& [index, pair] : pairs) pair.wait();
      shared_memory = measured_since(golden_start, admitted);
    }
    for (auto& [index, pair] : pairs) {
      try {
        outcomes[index] = pair.get();
        if (measure_golden) outcomes[index].verdict.memory = shared_memory;
      } catch (...) {
        if (!first_problem) first_problem = std::current_exception();
      }
    }
    if (first_problem) std::rethrow_exception(first_problem);
    return outcomes;
  };
  // Prints and counts one pair.
  const auto record = [&](PairOutcome outcome, const std::string& description) {
    if (!options.json) progress.print(out, outcome.row);
    progress.step_done();
    const PairVerdict& verdict = outcome.verdict;
    failures += outcome.failed() ? 1 : 0;
    if (verdict.kind == PairVerdict::Kind::unsupported || verdict.kind == PairVerdict::Kind::not_stated) {
      ++(verdict.kind == PairVerdict::Kind::unsupported ? unsupported : not_stated_pairs);
      ++declined[verdict.implementation];
    }
    if (verdict.kind == PairVerdict::Kind::not_checked) {
      ++unchecked_pairs;
      unchecked.push_back(fmt::format("{}: {}: {}", verdict.golden, verdict.implementation, verdict.message));
    }
    if (outcome.declined_tensors() > 0) ++pairs_with_declined;
    declined_tensors += outcome.declined_tensors();
    if (outcome.yardstick != YardstickSource::none) ++yardsticks[outcome.yardstick];
    if (!options.html.empty()) {
      html.sections.push_back({.verdict = outcome.verdict,
                               .description = description,
                               .notes = std::move(outcome.notes),
                               .maps = std::move(outcome.maps)});
    }
    verdicts.push_back(std::move(outcome.verdict));
  };
  const auto print_header = [&] {
    if (options.json) return;
    out << fmt::format("{:<34} {:<20} {:<9} {:<34} {:>10} {:>9}\n", "golden", "implementation", "result",
                       "worst tensor", "ulps", "declined")
        << std::flush;
  };
  // The ladder first, its rows held until the matrix is printed.
  std::vector<std::pair<std::vector<PairOutcome>, std::string>> ladder_outcomes;
  for (std::size_t g = 0; g < ladder_goldens; ++g) {
    std::string description;
    FeatureSet uses;
    std::vector<PairOutcome> outcomes = judge_golden(goldens[g], description, uses);
    SupportMatrix::Rung rung = ladder_rung(std::filesystem::path(goldens[g]).filename().string(), to_string(uses));
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
      rung.verdicts.push_back(rung_verdict(outcomes[i].verdict, uses));
    }
    matrix.rungs.push_back(std::move(rung));
    ladder_outcomes.emplace_back(std::move(outcomes), description);
  }
  if (!matrix.rungs.empty() && !options.json) progress.print(out, render_text(matrix));
  print_header();
  for (auto& [outcomes, description] : ladder_outcomes) {
    for (PairOutcome& outcome : outcomes) record(std::move(outcome), description);
  }
  for (std::size_t g = ladder_goldens; g < goldens.size(); ++g) {
    std::string description;
    FeatureSet uses;
    for (PairOutcome& outcome : judge_golden(goldens[g], description, uses)) record(std::move(outcome), description);
  }
  progress.stop();
  const std::size_t runs = goldens.size() * implementations.size();
  const int passing = static_cast<int>(runs) - failures - unsupported - not_stated_pairs - unchecked_pairs;
  // An implementation that declined (or stated none of) every golden checked nothing: that is never a pass.
  std::vector<std::string> ran_nothing;
  for (const auto& [name, count] : declined) {
    if (count == static_cast<int>(goldens.size())) ran_nothing.push_back(name);
  }
  const bool passed = failures == 0 && ran_nothing.empty() && unchecked_pairs == 0;
  if (options.json) {
    nlohmann::json pairs = nlohmann::json::array();
    for (const PairVerdict& verdict : verdicts) pairs.push_back(verdict_json(verdict));
    nlohmann::json json{{"passed", passed},
                        {"pairs_total", runs},
                        {"pairs_passed", passing},
                        {"pairs_failed", failures},
                        {"pairs_declined", unsupported},
                        {"pairs_not_stated", not_stated_pairs},
                        {"pairs_not_checked", unchecked_pairs},
                        {"pairs", pairs}};
    if (!matrix.rungs.empty()) json["support_matrix"] = render_json(matrix);
    nlohmann::json capabilities = nlohmann::json::object();
    for (const auto& implementation : opened)
      capabilities[implementation->name()] = to_json(implementation->capabilities());
    json["capabilities"] = capabilities;
    out << json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    out << fmt::format(
        "{} of {} (golden, implementation) pairs pass, {} unsupported{}{}{}; tolerance: {} ulps of each tensor's scale "
        "in fp64 (where terms cancel, {} x the fp64 yardstick); below fp64, {} x (outputs) / {} x (gradients) the "
        "error of a naive implementation of the layer in "
        "the same precision, + {} ulps\n",
        passing, runs, unsupported,
        not_stated_pairs == 0
            ? ""
            : fmt::format(", {} not stated (outside the implementation's capabilities: not run)", not_stated_pairs),
        unchecked_pairs == 0 ? "" : fmt::format(", {} NOT CHECKED (not enough memory: not a pass)", unchecked_pairs),
        pairs_with_declined == 0
            ? ""
            : fmt::format("; {} declined tensor{} in {} of the pairs run (pass*: all it computed passed; declined "
                          "tensors are not judged, `attncheck compare` lists them)",
                          declined_tensors, declined_tensors == 1 ? "" : "s", pairs_with_declined),
        kFp64ToleranceUlps, kFp64YardstickFactor, kYardstickFactorOutputs, kYardstickFactorGradients,
        kYardstickFloorUlps);
    for (const std::string& line : unchecked) out << "not checked: " << line << '\n';
    if (!yardsticks.empty()) {
      out << fmt::format(
          "yardsticks: {} stored in the goldens (bound to their integrity digests), {} stored but not bound and so "
          "recomputed (equal), {} computed (`attncheck golden yardstick` stores them)\n",
          yardsticks[YardstickSource::stored], yardsticks[YardstickSource::recomputed],
          yardsticks[YardstickSource::computed]);
    }
    for (const std::string& name : ran_nothing) {
      out << fmt::format("FAIL {}: declined or did not state all {} goldens; nothing was checked\n", name,
                         goldens.size());
    }
  }
  if (!options.junit.empty()) write_junit(options.junit, verdicts, matrix);
  if (!options.html.empty()) {
    html.matrix = matrix;
    write_html_report(options.html, html);
  }
  return passed ? kExitOk : kExitCheckFailed;
}

}  // namespace attncheck::cli
