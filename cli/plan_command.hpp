// `attncheck plan`: shows a geometry (with where head_dim came from), its widths, and the TP plan
// (rank -> query heads -> KV heads -> replica group, local widths, parameters, KV-cache bytes); with
// --convention megatron-equal-block or both, also the rows each rank holds under those TP conventions
// (core/tp/tp_convention.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/context_parallel_options.hpp"
#include "cli/geometry_source.hpp"

namespace attncheck::cli {

struct PlanOptions {
  GeometryOptions geometry;
  std::optional<std::int64_t> tp_size;  // default: the config's model_parallel_size, else 1
  std::string cache_dtype = "bf16";
  bool json = false;
  bool layouts = false;
  // replicated-kv (today's plan), megatron-equal-block, or both: which TP conventions' holdings to show
  std::string convention = "replicated-kv";
  // Context parallelism (core/model/parallel_layout.hpp, cli/context_parallel_options.hpp); --seq for the
  // tokens each CP rank holds.
  CpOptions cp;
  std::optional<std::int64_t> seq;
};

CLI::App* add_plan_command(CLI::App& app, PlanOptions& options);

// Runs the command; throws InputError on bad input.
void run_plan(const PlanOptions& options, std::ostream& out);

}  // namespace attncheck::cli
