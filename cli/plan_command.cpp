#include "cli/plan_command.hpp"

#include "cli/flag_validators.hpp"
#include "cli/plan_report.hpp"
#include "core/errors/input_error.hpp"

namespace attncheck::cli {

CLI::App* add_plan_command(CLI::App& app, PlanOptions& options) {
  CLI::App* command = app.add_subcommand("plan", "Show a geometry, its widths and its tensor-parallel partition plan");
  add_geometry_options(*command, options.geometry);
  command->add_option("--tp", options.tp_size, "tensor-parallel size (default: the config's, else 1)")
      ->check(integer_validator());
  command->add_option("--cache-dtype", options.cache_dtype, "KV-cache element type for bytes per token")
      ->check(CLI::IsMember({"fp64", "fp32", "bf16", "fp16"}))
      ->capture_default_str();
  command->add_flag("--json", options.json, "print one JSON object instead of text");
  command->add_flag("--layouts", options.layouts,
                    "also show each rank's fused-QKV rows in the stacked, grouped and neox layouts");
  command
      ->add_option("--convention", options.convention,
                   "TP convention whose holdings to show: replicated-kv (the plan alone), megatron-equal-block, or "
                   "both side by side")
      ->check(CLI::IsMember({"replicated-kv", "megatron-equal-block", "both"}))
      ->capture_default_str();
  add_cp_options(*command, options.cp);
  command->add_option("--seq", options.seq, "a sequence length, to show the tokens each CP rank holds")
      ->check(integer_validator());
  return command;
}

void run_plan(const PlanOptions& options, std::ostream& out) {
  ResolvedGeometry source = resolve_geometry_source(options.geometry);
  const std::int64_t tp_size = options.tp_size.value_or(source.config_tp_size.value_or(1));
  PlanReport report{.source = source,
                    .plan = make_tp_plan(source.geometry, tp_size),
                    .cache_precision = parse_precision(options.cache_dtype).value_or(Precision::bf16),
                    .layouts = options.layouts};
  if (source.geometry.is_latent() && (options.layouts || options.convention != "replicated-kv")) {
    throw InputError("attncheck plan",
                     {{options.layouts ? "--layouts" : "--convention", options.layouts ? "set" : options.convention,
                       "fused-QKV layouts and TP conventions describe q_proj, k_proj and v_proj rows; a latent-attention "
                       "layer has q_b_proj and kv_b_proj instead, split by head as its TP table shows",
                       "omit it for this layer"}});
  }
  if (const std::optional<CpSpec> cp = parse_cp_options(options.cp)) {
    report.layout = make_parallel_layout(source.geometry, tp_size, *cp);
    if (options.seq && *options.seq < 1) {
      throw InputError("attncheck plan", {{"--seq", std::to_string(*options.seq), "must be >= 1", "a sequence length"}});
    }
    report.seq = options.seq;
  } else if (options.seq) {
    throw InputError("attncheck plan", {{"--seq", std::to_string(*options.seq),
                                         "shows the tokens of context-parallel chunks: it needs --cp and --cp-scheme",
                                         "add --cp N --cp-scheme ulysses|ring, or omit --seq"}});
  }
  // replicated-kv is the plan itself (its table says it all); the other convention, or both, add holdings.
  if (options.convention == "both") {
    report.conventions.assign(std::begin(kAllTpConventions), std::end(kAllTpConventions));
  } else if (options.convention != "replicated-kv") {
    report.conventions.push_back(parse_tp_convention(options.convention).value());  // CLI11 checked the name
  }
  for (TpConvention convention : report.conventions) {
    report.holdings.push_back(rank_holdings(report.plan, convention));  // InputError when it cannot partition
  }
  if (options.json) {
    // A config path may not be UTF-8; replace such bytes rather than fail after all the work.
    out << plan_to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    write_plan_text(report, out);
  }
}

}  // namespace attncheck::cli
