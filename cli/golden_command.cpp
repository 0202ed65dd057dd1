#include "cli/golden_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>

#include "cli/exit_codes.hpp"
#include "cli/flag_validators.hpp"
#include "cli/golden_pair.hpp"
#include "cli/heartbeat.hpp"
#include "cli/html_report.hpp"
#include "cli/progress_line.hpp"
#include "cli/yardstick_source.hpp"
#include "core/compare/compare.hpp"
#include "core/compare/heatmap.hpp"
#include "core/compare/judge.hpp"
#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "core/resources/memory_room.hpp"
#include "core/tp/tp_convention.hpp"
#include "golden/golden_file.hpp"
#include "golden/integrity.hpp"
#include "impl/candidate_run.hpp"
#include "impl/registry.hpp"
#include "reference/context_parallel.hpp"
#include "reference/memory_estimate.hpp"
#include "reference/reference.hpp"
#include "reference/run_time_estimate.hpp"
#include "reference/yardstick.hpp"

namespace attncheck::cli {

namespace {

// "PREFILL,STEP,STEP,..." -> DecodeSchedule (checked further by validate_case).
DecodeSchedule parse_decode(const std::string& text) {
  DecodeSchedule schedule;
  if (text.empty()) return schedule;
  std::vector<std::int64_t> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    std::int64_t value = 0;
    const auto [last, error] = std::from_chars(text.data() + start, text.data() + end, value);
    if (error != std::errc() || last != text.data() + end || end == start) {
      ViolationList violations;
      violations.add("--decode", text, "must be comma-separated integers: PREFILL,STEP,STEP,...", "4,1,1,2");
      violations.throw_if_any("invalid option");
    }
    values.push_back(value);
    start = end + 1;
  }
  schedule.prefill = values.front();
  schedule.steps.assign(values.begin() + 1, values.end());
  return schedule;
}

}  // namespace

std::string describe_geometry(const Geometry& g) {
  if (const auto& latent = g.latent()) {
    return fmt::format(
        "latent attention: hidden {}, heads {}, q/k {} = {} + {} rope, v {}, q_lora_rank {}, kv_lora_rank {}, {} "
        "theta {}, scale {:.6g}{}{}{}, {}",
        g.hidden_size(), g.num_heads(), g.head_dim(), latent->qk_nope_head_dim, latent->qk_rope_head_dim,
        latent->v_head_dim, latent->q_lora_rank ? std::to_string(*latent->q_lora_rank) : "none (q_proj)",
        latent->kv_lora_rank, to_string(g.rope_style()), g.rope_theta(), g.scale(),
        g.softcap() ? fmt::format(", softcap {}", *g.softcap()) : "",
        g.sliding_window() ? fmt::format(", window {}", *g.sliding_window()) : "",
        g.attention_sinks() ? ", attention sinks" : "", g.causal() ? "causal" : "bidirectional");
  }
  return fmt::format(
      "hidden {}, heads {}/{}, head_dim {} ({}), rotary_dim {} {} theta {}, qk_norm {}, bias {}/{}, scale "
      "{:.6g}{}{}{}, "
      "{}",
      g.hidden_size(), g.num_heads(), g.num_kv_heads(), g.head_dim(), to_string(g.head_dim_source()), g.rotary_dim(),
      to_string(g.rope_style()), g.rope_theta(), to_string(g.qk_norm()), g.qkv_bias(), g.out_bias(), g.scale(),
      g.softcap() ? fmt::format(", softcap {}", *g.softcap()) : "",
      g.sliding_window() ? fmt::format(", window {}", *g.sliding_window()) : "",
      g.attention_sinks() ? ", attention sinks" : "", g.causal() ? "causal" : "bidirectional");
}

// {"source": "stored" | "recomputed" | "computed" | "none", "contract": "fp32.float32.replicated-kv"}.
nlohmann::json yardstick_json(const SourcedYardstick& yardstick) {
  nlohmann::json json{{"source", std::string(source_name(yardstick.source))}};
  if (!yardstick.contract.empty()) json["contract"] = yardstick.contract;
  return json;
}

std::string integrity_note(const golden::Golden& golden, const std::string& path) {
  if (golden.integrity == golden::Integrity::verified) return "";
  return fmt::format(
      "note: {} carries no integrity digest (written before {}, or by another writer): a damaged "
      "copy cannot be told from the original; `attncheck golden seal {}` adds one\n",
      path, golden::kIntegrityVersion, path);
}

GoldenCommands add_golden_commands(CLI::App& app, GoldenOptions& options) {
  GoldenCommands commands;
  CLI::App* golden = app.add_subcommand("golden", "Make, inspect, run and check HDF5 golden files");
  golden->require_subcommand(1);

  commands.make = golden->add_subcommand("make", "Generate a case, run the fp64 reference, write a golden file");
  add_geometry_options(*commands.make, options.geometry);
  commands.make->add_option("--tp", options.tp_size, "tensor-parallel size (rank gradients stored when > 1)")
      ->check(integer_validator())
      ->capture_default_str();
  commands.make->add_option("--batch", options.batch, "batch rows")->check(integer_validator())->capture_default_str();
  commands.make->add_option("--seq", options.seq, "tokens per row")->check(integer_validator())->capture_default_str();
  commands.make->add_option("--decode", options.decode, "KV-cache schedule PREFILL,STEP,STEP,...");
  commands.make->add_option("--seed", options.seed, "input and weight seed")
      ->check(unsigned_validator())
      ->capture_default_str();
  commands.make->add_option("--activations", options.activations, "x and dout distribution")
      ->check(CLI::IsMember({"uniform", "heavy-tailed", "outliers"}))
      ->capture_default_str();
  commands.make->add_flag("--pad-keys", options.pad_keys, "random key lengths for batch rows >= 1");
  commands.make
      ->add_option("--position-offset", options.position_offset,
                   "position id of every row's first token (default: row 0 in [0, 16), later rows past 2^16, from the "
                   "seed); 0 for a layer that numbers positions from 0")
      ->check(integer_validator());
  commands.make->add_flag("--position-gaps", options.position_gaps,
                          "positions advance by 1 to 4 per token (dropped or packed tokens)");
  commands.make
      ->add_option("--key-lengths", options.key_lengths,
                   "key length of each batch row, in [0, seq] (0: its queries see no key); overrides --pad-keys")
      ->delimiter(',');
  commands.make->add_flag("--sketch-gradients", options.sketch_gradients,
                          "store q/k/v/o_proj gradients as per-line sketches (SCHEMA.md) instead of in full");
  commands.make
      ->add_option("--weights", options.weights,
                   "store the weights, or name the generator and seed (SCHEMA.md) instead")
      ->check(CLI::IsMember({"stored", "generated"}))
      ->capture_default_str();
  commands.make
      ->add_option("--inputs", options.inputs,
                   "store x and dout, or name the generator, seed and distribution (SCHEMA.md) instead")
      ->check(CLI::IsMember({"stored", "generated"}))
      ->capture_default_str();
  commands.make->add_flag("--sketch-activations", options.sketch_activations,
                          "store out, grads/x and decode/out as per-token sketches (SCHEMA.md) instead of in full");
  std::vector<std::string> convention_names;
  for (TpConvention convention : kAllTpConventions) convention_names.emplace_back(to_string(convention));
  commands.make
      ->add_option("--tp-convention", options.tp_convention,
                   "how each rank's gradients are held: replicated-kv (attncheck's shard) or megatron-equal-block "
                   "(Megatron-Core's fused QKV cut into equal blocks); SCHEMA.md, \"TP conventions\"")
      ->check(CLI::IsMember(convention_names))
      ->capture_default_str();
  add_cp_options(*commands.make, options.cp);
  commands.make->add_option("-o,--output", options.output, "golden file to write")->required();

  commands.inspect = golden->add_subcommand("inspect", "Print a golden file's geometry, inputs and tensors");
  commands.inspect->add_option("file", options.golden_file, "golden file")->required();

  commands.seal = golden->add_subcommand(
      "seal", "Write goldens' integrity digests (after a deliberate edit, or into files written before them)");
  commands.seal->add_option("files", options.files, "golden files")->required();

  commands.expand = golden->add_subcommand("expand", "Rewrite a golden with its generated weights and inputs stored");
  commands.expand->add_option("file", options.golden_file, "golden file")->required();
  commands.expand->add_option("-o,--output", options.output, "golden file to write")->required();

  commands.run = golden->add_subcommand("run", "Run an implementation on a golden's inputs; write a candidate file");
  commands.run->add_option("file", options.golden_file, "golden file, or a case file (one without /expected)")
      ->required();
  commands.run->add_option("--impl", options.implementation, "implementation")->capture_default_str();
  commands.run->add_option("-o,--output", options.output, "candidate file to write")->required();

  commands.check = golden->add_subcommand("check", "Run an implementation on goldens' inputs and compare");
  commands.check->add_option("files", options.files, "golden files")->required();
  commands.check->add_option("--impl", options.implementation, "implementation")->capture_default_str();
  commands.check->add_flag("--json", options.json, "print one JSON object instead of tables");
  add_html_options(*commands.check, options.html, options.html_all);

  commands.coverage = golden->add_subcommand(
      "coverage", "Show that each feature a golden claims changes its answer (switched off, beyond tolerance)");
  commands.coverage->add_option("files", options.files, "golden files")->required();
  commands.coverage->add_flag("--require-all", options.require_all,
                              "also fail unless every feature attncheck knows bites in some golden given");

  add_golden_yardstick_command(*golden, commands, options);
  add_golden_draw_commands(*golden, commands, options);

  commands.compare = app.add_subcommand("compare", "Compare a candidate file with a golden file");
  commands.compare->add_option("golden", options.golden_file, "golden file")->required();
  commands.compare->add_option("candidate", options.candidate, "candidate file (/result)")->required();
  commands.compare->add_flag("--json", options.json, "print one JSON object instead of a table");
  commands.compare->add_option("--supports", options.supports_file,
                               "the statement of capabilities (JSON) of the layer that wrote the candidate: held to it "
                               "as `run` holds a worker (not stated, parts declined on its behalf, broken promises)");
  add_html_options(*commands.compare, options.html, options.html_all);
  return commands;
}

namespace {

// Refuses, before anything is generated, a golden this process could not hold: the estimate of the
// case and its reference run (reference/memory_estimate.hpp) against memory_room(). The suggestion is
// the longest --seq (or, failing that, the largest --batch at seq 1) that would fit.
void require_golden_make_memory(const Geometry& geometry, const GoldenOptions& options) {
  if (options.batch < 1 || options.seq < 1) return;  // generate_case names those
  const auto estimate = [&](std::int64_t batch, std::int64_t seq) {
    return reference::golden_make_peak_bytes(geometry, {.batch = batch, .seq = seq, .tp_size = options.tp_size});
  };
  // The largest n in [1, limit] with fits(n), or 0 when even 1 does not fit (fits is monotone in n).
  const auto largest = [](std::int64_t limit, const auto& fits) {
    std::int64_t low = 0, high = limit;
    while (low < high) {
      const std::int64_t middle = low + (high - low + 1) / 2;
      if (fits(middle)) {
        low = middle;
      } else {
        high = middle - 1;
      }
    }
    return low;
  };
  require_memory("golden make", estimate(options.batch, options.seq), [&](std::uint64_t room) -> std::string {
    const std::int64_t seq = largest(options.seq, [&](std::int64_t n) { return estimate(options.batch, n) <= room; });
    if (seq > 0) return fmt::format("--seq {} fits with --batch {}", seq, options.batch);
    const std::int64_t batch = largest(options.batch, [&](std::int64_t n) { return estimate(n, 1) <= room; });
    if (batch > 0) return fmt::format("--batch {} fits with --seq 1", batch);
    return fmt::format(
        "even --batch 1 --seq 1 needs {}: the layer's weights alone are too large for this "
        "machine; fewer heads, a smaller head_dim or hidden_size, or a larger --max-memory",
        describe_bytes(estimate(1, 1)));
  });
}

}  // namespace

int run_golden_make(const GoldenOptions& options, std::ostream& out, std::ostream& err) {
  const ResolvedGeometry source = resolve_geometry_source(options.geometry);
  if (!source.not_modelled.empty()) {
    ViolationList violations;
    for (const std::string& feature : source.not_modelled) {
      violations.add("layer", source.title, "does what attncheck cannot check yet: " + feature,
                     "`attncheck plan` shows the layer; choose another model or layer");
    }
    violations.throw_if_any("cannot make a golden of this layer");
  }
  if (source.geometry.is_latent() && options.sketch_gradients) {
    // Sketches are defined for a plain layer's q/k/v/o_proj (SCHEMA.md); a latent layer's gradients are stored whole.
    throw InputError("cannot make a golden of this layer",
                     {{"--sketch-gradients", "set",
                       "projection sketches are defined for q_proj, k_proj, v_proj and o_proj together; a latent-"
                       "attention layer has no k_proj or v_proj, so its gradients are stored in full",
                       "omit --sketch-gradients (--sketch-activations still applies)"}});
  }
  const auto activations = parse_activation_distribution(options.activations);
  require_golden_make_memory(source.geometry, options);
  const Heartbeat heartbeat(err, "golden make: generating the case, running the fp64 reference, writing the file",
                            reference::estimated_reference_seconds(make_tp_plan(source.geometry, options.tp_size),
                                                                   options.batch, options.seq,
                                                                   parse_decode(options.decode)));
  const Case test_case = generate_case(source.geometry, {.seed = options.seed,
                                                         .batch = options.batch,
                                                         .seq = options.seq,
                                                         .activations = activations.value(),
                                                         .position_offset = options.position_offset,
                                                         .position_gaps = options.position_gaps,
                                                         .pad_keys = options.pad_keys,
                                                         .key_lengths = options.key_lengths,
                                                         .decode = parse_decode(options.decode),
                                                         .tp_size = options.tp_size,
                                                         .context_parallel = parse_cp_options(options.cp)});
  const TpConvention convention = parse_tp_convention(options.tp_convention).value();  // CLI11 checked the name
  rank_holdings(test_case.plan, convention);  // InputError now, before the reference runs, if it cannot partition
  // A CP layout the context-parallel reference cannot run (latent attention, beyond its work bound): refused now,
  // not written as a golden that reference-cp then refuses.
  if (test_case.context_parallel) reference::check_context_parallel_case(test_case, *test_case.context_parallel);
  Result expected = options.tp_size > 1 ? reference::run_reference_tp(test_case) : reference::run_reference(test_case);
  // The reference's sharded run holds its per-rank gradients as replicated-kv; every held line is the
  // layer's full gradient of that line, so another convention's are the same lines regrouped.
  if (options.tp_size > 1) {
    expected.rank_gradients =
        regroup_rank_gradients(expected.rank_gradients, test_case.plan, TpConvention::replicated_kv, convention);
  }
  golden::write_golden(options.output, {.test_case = test_case,
                                        .expected = std::move(expected),
                                        .seed = options.seed,
                                        .generator = "attncheck " ATTNCHECK_VERSION,
                                        .weights_by_generator = options.weights == "generated",
                                        .inputs_by_generator = options.inputs == "generated",
                                        .activations = activations.value(),
                                        .gradients_sketched = options.sketch_gradients,
                                        .activations_sketched = options.sketch_activations,
                                        .tp_convention = convention});
  out << fmt::format("wrote {} ({} bytes): {}, tp {}, batch {}, seq {}{}\n", options.output,
                     std::filesystem::file_size(options.output), source.title, options.tp_size, options.batch,
                     options.seq,
                     options.tp_size > 1 ? fmt::format("; per-rank gradients held as {}", to_string(convention)) : "");
  return kExitOk;
}

int run_golden_inspect(const GoldenOptions& options, std::ostream& out) {
  const golden::Golden golden = golden::read_golden(options.golden_file);
  const Case& test_case = golden.test_case;
  const Inputs& inputs = test_case.inputs;
  out << fmt::format("{}: schema v{}, written by {}, seed {}, weights {}\n", options.golden_file, golden.schema_version,
                     golden.generator, golden.seed,
                     golden.weights_by_generator ? fmt::format("named ({})", golden::kWeightGenerator) : "stored");
  if (golden.inputs_by_generator) {
    out << fmt::format("inputs x, dout: named ({}, {})\n", golden::kInputGenerator, to_string(golden.activations));
  }
  if (golden.gradients_sketched) out << "projection gradients: sketched (attncheck-sketch-v1)\n";
  if (golden.activations_sketched) out << "out, grads/x, decode/out: sketched per token (attncheck-sketch-v1)\n";
  if (golden.test_case.plan.tp_size > 1) {
    out << fmt::format("per-rank gradients held as {} (TP convention)\n", to_string(golden.tp_convention));
  }
  if (golden.integrity == golden::Integrity::verified) {
    out << fmt::format("integrity: {} digest verified\n", golden::kIntegrityVersion);
  } else {
    out << integrity_note(golden, options.golden_file);
  }
  out << "geometry: " << describe_geometry(test_case.geometry()) << '\n';
  out << fmt::format("tp_size {}, batch {}, seq {}, key_lengths [{}], positions from {}", test_case.plan.tp_size,
                     inputs.batch, inputs.seq, fmt::join(inputs.key_lengths, ", "), inputs.positions.front());
  if (!inputs.decode.empty()) {
    out << fmt::format(", decode prefill {} steps [{}]", inputs.decode.prefill, fmt::join(inputs.decode.steps, ", "));
  }
  if (const auto& cp = test_case.context_parallel) {
    out << fmt::format("\ncontext parallel: {}, cp_size {}{}", to_string(cp->scheme), cp->cp_size,
                       cp->scheme == CpScheme::ring ? (cp->load_balanced ? ", load-balanced" : ", contiguous") : "");
  }
  out << "\nweights:\n";
  for_each_parameter(test_case.weights, [&](std::string_view name, const Tensor& tensor) {
    out << fmt::format("  {:<8} {}\n", name, to_string(tensor.shape));
  });
  out << "expected:\n";
  for (const auto& [name, shape] : golden::expected_shapes(golden)) {
    out << fmt::format("  {:<28} {}\n", name, to_string(shape));
  }
  return kExitOk;
}

namespace {

// An output path that names the input file (the same file under any path or link) is refused before
// anything is read or written: `golden run G -o G` used to replace the golden by a candidate.
void refuse_overwriting_input(const std::string& output, const std::string& input) {
  std::error_code error;
  if (!std::filesystem::equivalent(output, input, error) || error) return;
  ViolationList violations;
  violations.add("--output", output, fmt::format("is the input file {}: writing it would destroy the input", input),
                 "another path, e.g. candidate.h5");
  violations.throw_if_any("invalid option");
}

}  // namespace

int run_golden_expand(const GoldenOptions& options, std::ostream& out) {
  refuse_overwriting_input(options.output, options.golden_file);
  golden::Golden golden = golden::read_golden(options.golden_file);  // regenerates named weights
  golden.weights_by_generator = false;
  golden.inputs_by_generator = false;
  golden::write_golden(options.output, golden);
  out << fmt::format("wrote {} ({} bytes): {} with its weights and inputs stored\n", options.output,
                     std::filesystem::file_size(options.output), options.golden_file);
  return kExitOk;
}

int run_golden_seal(const GoldenOptions& options, std::ostream& out) {
  for (const std::string& file : options.files) {
    // Every check of the schema first (a file that is not a valid golden is not sealed), but not the
    // digest being replaced.
    golden::read_golden(file, golden::IntegrityCheck::skip);
    out << fmt::format("sealed {}: {}\n", file, golden::seal_integrity(file));
  }
  return kExitOk;
}

int run_golden_run(const GoldenOptions& options, std::ostream& out, std::ostream& err) {
  refuse_overwriting_input(options.output, options.golden_file);
  const Case test_case = golden::read_case(options.golden_file);  // a golden or a case file
  const auto implementation = impl::open_implementation(options.implementation);
  // The one run step (impl/candidate_run.hpp): the parts its capabilities lack are declined in the candidate on its
  // behalf, as `golden check` judges them, so that `compare` of this candidate says what `golden check` says.
  const Admission admission = admit(implementation->capabilities(), outline_of(test_case));
  impl::CandidateRun run;
  {
    const Heartbeat heartbeat(err, fmt::format("golden run: {} on {}", options.implementation, options.golden_file),
                              reference::estimated_reference_seconds(test_case));
    run = impl::run_candidate(*implementation, test_case, admission);
  }
  using Kind = impl::CandidateRun::Kind;
  if (run.kind == Kind::not_stated || run.kind == Kind::declined) {
    throw impl::Unsupported(options.implementation, run.reason);  // bad input for this command: exit 2
  }
  if (run.kind != Kind::answered) throw std::runtime_error(run.message);
  const Candidate& candidate = run.candidate;
  golden::write_candidate(options.output, candidate.tensors,
                          {.precision = candidate.precision,
                           .tp_size = candidate.sharded ? test_case.plan.tp_size : 1,
                           .rope_angles = candidate.rope_angles,
                           .tp_convention = candidate.tp_convention,
                           .declined = candidate.declined},
                          options.implementation);
  out << fmt::format("wrote {}: {} on {}\n", options.output, options.implementation, options.golden_file);
  return kExitOk;
}

int run_golden_check(const GoldenOptions& options, std::ostream& out, std::ostream& err) {
  int failed_count = 0;
  std::vector<std::string> declined;   // goldens the implementation declined (impl::Unsupported), with why
  std::vector<std::string> outside;    // goldens outside its stated capabilities: never run
  std::vector<std::string> unchecked;  // goldens that did not fit in memory: never run
  nlohmann::json files = nlohmann::json::array();
  check_html_path(options.html);
  const auto implementation = impl::open_implementation(options.implementation);
  HtmlReport html{.command = fmt::format("attncheck {} --impl {} {}", options.html_command, options.implementation,
                                         fmt::join(options.files, " ")),
                  .all = options.html_all};
  const HeatmapOptions drawing{.all = options.html_all};
  // A live line on a terminal while a big golden runs (cli/progress_line.hpp).
  ProgressLine progress(err, options.progress, static_cast<int>(options.files.size()), "goldens");
  for (const std::string& file : options.files) {
    progress.status(fmt::format("reading {}", file));
    // The outline first (a damaged golden is bad input: exit 2): a golden outside the implementation's
    // capabilities costs no more than that.
    const CaseOutline outline = golden::read_case_outline(file);
    const Admission admission = admit(implementation->capabilities(), outline);
    std::optional<golden::Golden> golden;
    GoldenPair pair;
    if (!admission.admitted()) {
      pair.verdict = not_stated(file, options.implementation, admission);
    } else {
      try {
        golden = golden::read_golden(file);
      } catch (const NotEnoughMemory& error) {  // this golden is named and left; the others are still checked
        pair.verdict = not_checked(file, options.implementation, error.what());
      }
    }
    std::string integrity = "absent";
    if (golden) {
      // With --json, stdout holds the JSON object alone: the note goes to stderr, the object says it too.
      (options.json ? err : out) << integrity_note(*golden, file);
      integrity = golden->integrity == golden::Integrity::verified ? "verified" : "absent";
      progress.status(fmt::format("{} on {}: running", options.implementation, file));
      // Plain lines on stderr for a long golden when no live progress line shows it (a CI log, a pipe).
      std::optional<Heartbeat> heartbeat;
      if (!options.progress) {
        heartbeat.emplace(err, fmt::format("golden check: {} on {}", options.implementation, file),
                          reference::estimated_reference_seconds(golden->test_case));
      }
      pair = judge_golden_pair(file, *golden, *implementation, admission, options.progress ? nullptr : &err,
                               options.html.empty() ? nullptr : &drawing);
    }
    PairVerdict& verdict = pair.verdict;
    const std::string description = describe_geometry(outline.geometry());
    if (verdict.kind != PairVerdict::Kind::judged) {
      const std::string line = fmt::format("{}: {}", file, verdict.message);
      switch (verdict.kind) {
        case PairVerdict::Kind::unsupported:
          declined.push_back(line);
          break;
        case PairVerdict::Kind::not_stated:
          outside.push_back(line);
          break;
        case PairVerdict::Kind::not_checked:
          unchecked.push_back(line);
          break;
        default:
          ++failed_count;
      }
      if (options.json) {
        nlohmann::json entry{{"golden", file},
                             {"implementation", options.implementation},
                             {"passed", false},
                             {"integrity", integrity},
                             {"verdict", json_verdict(verdict)}};
        const char* key = verdict.kind == PairVerdict::Kind::unsupported   ? "declined"
                          : verdict.kind == PairVerdict::Kind::not_stated  ? "not_stated"
                          : verdict.kind == PairVerdict::Kind::not_checked ? "not_checked"
                                                                           : "error";
        entry[key] = verdict.message;
        files.push_back(std::move(entry));
      } else {
        const std::string word = verdict.kind == PairVerdict::Kind::unsupported ? "DECLINED (unsupported)"
                                 : verdict.kind == PairVerdict::Kind::raised
                                     ? fmt::format("FAIL: {} raised", options.implementation)
                                     : verdict_word(verdict.kind);
        progress.print(out, fmt::format("== {} vs {}: {}: {}\n", file, options.implementation, word, verdict.message));
      }
      html.sections.push_back({.verdict = std::move(verdict), .description = description});
      progress.step_done();
      continue;
    }
    const CompareReport& report = verdict.report;
    if (!report.passed()) ++failed_count;
    if (!options.html.empty()) {
      html.sections.push_back(
          {.verdict = verdict, .description = description, .notes = pair.notes, .maps = std::move(pair.maps)});
    }
    if (options.json) {
      nlohmann::json entry = render_json(report);
      entry["verdict"] = json_verdict(report);
      entry["golden"] = file;
      entry["implementation"] = options.implementation;
      entry["integrity"] = integrity;
      entry["yardstick"] = yardstick_json(pair.yardstick);
      files.push_back(entry);
    } else {
      std::string text = fmt::format("== {} vs {}: {}\n", file, options.implementation, description);
      for (const std::string& note : pair.notes) text += fmt::format("   ({})\n", note);
      progress.print(out, text + render_text(report));
    }
    progress.step_done();
  }
  progress.stop();
  if (!options.html.empty()) write_html_report(options.html, html);
  const std::size_t total = options.files.size();
  const std::size_t not_run = declined.size() + outside.size() + unchecked.size();
  // An implementation that declined (or stated none of) every golden checked nothing: that is never a pass (as
  // `run` and `fuzz`); nor is a golden left unchecked for memory.
  const bool checked_nothing = declined.size() + outside.size() == total;
  const bool passed = failed_count == 0 && !checked_nothing && unchecked.empty();
  if (options.json) {
    out << nlohmann::json{{"passed", passed},
                          {"declined", declined.size()},
                          {"not_stated", outside.size()},
                          {"not_checked", unchecked.size()},
                          {"files", files}}
               .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
        << '\n';
  } else {
    std::vector<std::string> apart;
    if (!declined.empty()) apart.push_back(fmt::format("{} declined (unsupported: not a pass)", declined.size()));
    if (!outside.empty())
      apart.push_back(fmt::format("{} not stated (outside its capabilities: not run)", outside.size()));
    if (!unchecked.empty()) {
      apart.push_back(fmt::format("{} NOT CHECKED (not enough memory: not a pass)", unchecked.size()));
    }
    out << fmt::format("{} of {} golden files pass with {}{}{}\n", total - failed_count - not_run, total,
                       options.implementation, apart.empty() ? "" : ", ", fmt::join(apart, ", "));
    for (const std::string& line : unchecked) out << "not checked: " << line << '\n';
    if (checked_nothing) {
      out << fmt::format("FAIL {}: {} all {} golden files; nothing was checked\n", options.implementation,
                         outside.empty()    ? "declined"
                         : declined.empty() ? "does not state"
                                            : "declined or does not state",
                         total);
    }
  }
  return passed ? kExitOk : kExitCheckFailed;
}

namespace {

// A candidate file as the implementation that wrote it, stating `statement`: `compare --supports` runs it
// through impl::run_candidate, the one run step, for the promises a statement makes.
class CandidateFile : public impl::Implementation {
 public:
  CandidateFile(Candidate candidate, Capabilities statement)
      : candidate_(std::move(candidate)), statement_(std::move(statement)) {}
  const std::string& name() const override { return name_; }
  const Capabilities& capabilities() const override { return statement_; }
  Candidate run(const Case& /*test_case*/) override { return std::move(candidate_); }

 private:
  Candidate candidate_;
  Capabilities statement_;
  std::string name_ = "the candidate";
};

// `compare` of a pair it does not judge (outside the statement, or a broken promise): exit 1, nothing was
// checked (docs/JSON.md: {"verdict", "passed": false, "message"}).
int report_unjudged(const GoldenOptions& options, PairVerdict::Kind kind, const std::string& message,
                    std::ostream& out) {
  const PairVerdict verdict{.golden = options.golden_file, .implementation = options.candidate, .kind = kind,
                            .message = message};
  if (options.json) {
    out << nlohmann::json{{"verdict", json_verdict(verdict)}, {"passed", false}, {"message", message}}.dump(2)
        << '\n';
  } else {
    out << fmt::format("== {} vs {}: {}: {}\n", options.golden_file, options.candidate, verdict_word(kind), message);
  }
  return kExitCheckFailed;
}

}  // namespace

int run_compare(const GoldenOptions& options, std::ostream& out, std::ostream& err) {
  check_html_path(options.html);
  // Generated weights left out: a candidate's answers are judged against the golden's, and a yardstick computed
  // below (golden_yardstick) generates them then. A wide golden's weights were most of `compare`'s own memory.
  const golden::Golden golden = golden::read_golden(options.golden_file, golden::IntegrityCheck::verify,
                                                    golden::GeneratedWeights::left_out);
  // With --json, stdout holds the JSON object alone: the note goes to stderr, the object says it too.
  (options.json ? err : out) << integrity_note(golden, options.golden_file);
  // --supports: the candidate is held to the statement of the layer that wrote it as `run` holds a worker to
  // its own (impl/candidate_run.hpp): a golden outside it is not stated, its parts not stated are declined on
  // the candidate's behalf, and declining what it states is a broken promise.
  std::optional<Capabilities> statement;
  std::optional<Admission> admission;
  if (!options.supports_file.empty()) {
    statement = stated_capabilities(options.supports_file);
    admission = admit(*statement, outline_of(golden.test_case));
    if (!admission->admitted()) {
      return report_unjudged(options, PairVerdict::Kind::not_stated, admission->reason(), out);
    }
  }
  const golden::CandidateDeclaration declared = golden::read_candidate_declaration(options.candidate);
  // Only a candidate that declares itself unsharded (/result@tp_size = 1) is excused from the per-rank
  // gradients; leaving them out without saying so is a failure, not a way around the check.
  const bool declares_ranks = !(declared.tp_size && *declared.tp_size == 1);
  const bool sharded = declares_ranks && (!admission || admission->per_rank_gradients);
  // The golden's answers as the candidate declares it holds its own (SCHEMA.md, "TP conventions"): its
  // tensors are read by these names.
  NamedTensors answers;
  try {
    answers = answers_as_held(golden::expected_tensors(golden), golden.test_case.plan, golden.tp_convention, sharded,
                              declared.tp_convention);
  } catch (const InputError& error) {
    throw InputError(fmt::format("candidate '{}': /result@tp_convention: {}", options.candidate, error.context()),
                     error.violations());
  }
  golden::Candidate read = golden::read_candidate(options.candidate, answers);
  Candidate candidate{.tensors = std::move(read.tensors),
                      .precision = read.precision,
                      .rope_angles = read.rope_angles,
                      .tp_convention = read.tp_convention,
                      .sharded = sharded,
                      .declined = std::move(read.declined)};
  if (admission) {
    candidate.sharded = declares_ranks;  // as the layer reported it: run_candidate holds it to the statement
    CandidateFile file(std::move(candidate), *statement);
    impl::CandidateRun run = impl::run_candidate(file, golden.test_case, *admission);
    if (run.kind != impl::CandidateRun::Kind::answered) {
      return report_unjudged(options, PairVerdict::Kind::broken_promise, run.message, out);
    }
    candidate = std::move(run.candidate);
  }
  Judgement judgement =
      judge({.test_case = golden.test_case,
             .answers = std::move(answers),
             .held_as = golden.tp_convention,
             .yardstick =
                 [&](const NamedTensors& expected, const Candidate& judged) {
                   return golden_yardstick(options.golden_file, golden, expected, judged.precision,
                                           judged.rope_angles, judged.tp_convention, &err);
                 },
             .already_held = true},
            candidate, "the candidate");
  const CompareReport& report = judgement.report;
  const SourcedYardstick& yardstick = judgement.yardstick;
  const NamedTensors& expected = judgement.expected;
  std::vector<std::string> notes = judgement.notes;
  if (const std::string line = describe(yardstick); !line.empty()) notes.push_back(line);
  if (!options.html.empty()) {
    write_html_report(
        options.html,
        {.command = fmt::format("attncheck compare {} {}", options.golden_file, options.candidate),
         .all = options.html_all,
         .sections = {
             {.verdict = {.golden = options.golden_file, .implementation = options.candidate, .report = report},
              .description = describe_geometry(golden.test_case.geometry()),
              .notes = notes,
              .maps =
                  error_heatmaps(golden.test_case, expected, candidate.tensors, report, {.all = options.html_all})}}});
  }
  if (options.json) {
    nlohmann::json json = render_json(report);
    json["verdict"] = json_verdict(report);
    json["notes"] = notes;
    json["rank_gradients_compared"] = sharded || golden.test_case.plan.tp_size == 1;
    json["golden_tp_convention"] = to_string(golden.tp_convention);
    json["yardstick"] = yardstick_json(yardstick);
    json["integrity"] = golden.integrity == golden::Integrity::verified ? "verified" : "absent";
    out << json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    out << fmt::format("== {} vs {}: {}\n", options.golden_file, options.candidate,
                       describe_geometry(golden.test_case.geometry()));
    for (const std::string& note : notes) out << fmt::format("   ({})\n", note);
    out << render_text(report);
  }
  return report.passed() ? kExitOk : kExitCheckFailed;
}

}  // namespace attncheck::cli
