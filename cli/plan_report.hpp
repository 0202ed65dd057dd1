// The result of `attncheck plan`: a validated geometry, its TP plan, and how to render them as text
// (for people) or JSON (for scripts; the keys are documented in docs/ARCHITECTURE.md).
#pragma once

#include <optional>
#include <ostream>

#include <nlohmann/json.hpp>

#include "cli/geometry_source.hpp"
#include "core/model/parallel_layout.hpp"
#include "core/model/precision.hpp"
#include "core/model/tp_plan.hpp"
#include "core/tp/tp_convention.hpp"

namespace attncheck::cli {

struct PlanReport {
  ResolvedGeometry source;
  TpPlan plan;
  Precision cache_precision = Precision::bf16;  // element type of the KV cache, for bytes per token
  bool layouts = false;                         // include the fused-QKV row maps
  // TP conventions whose holdings to show (none: the plan alone), and each one's per-rank holdings.
  std::vector<TpConvention> conventions;
  std::vector<std::vector<RankHoldings>> holdings;
  // With --cp: the context-parallel layout over the plan (plan_context_parallel.hpp), and with --seq the
  // sequence length whose chunks' token ranges to show.
  std::optional<ParallelLayout> layout;
  std::optional<std::int64_t> seq;
};

void write_plan_text(const PlanReport& report, std::ostream& out);
nlohmann::json plan_to_json(const PlanReport& report);

}  // namespace attncheck::cli
