// A statement of capabilities as JSON, the one form every statement takes: a worker's `supports` line
// (exec_worker/worker.hpp, protocol 2), the Python package's attncheck.Capabilities, `--json` reports.
//
//   {"features": ["gqa", "explicit-head-dim", "rope-half-split", "causal", "backward"] | "all",
//    "without": [...],                       optional: taken away from "features" (handy with "all")
//    "head_dim_multiple_of": 8,              optional, default 1
//    "max_head_dim": 256, "max_seq": 4096, "max_batch": 8, "max_num_heads": 64, "max_hidden_size": 8192,
//    "max_tp_size": 4,                       optional, each at least 1
//    "tp_convention": "megatron-equal-block", optional: how its per-rank gradients are held
//    "precisions": ["fp32", "bf16"]}         optional: the precisions its candidates may declare
//
// "features" is required (a statement that names none is refused, never read as "all"); an unknown key,
// an unknown feature or precision, a value of the wrong type or a statement under which no case exists
// (no mask: neither causal nor bidirectional; no RoPE form: neither pairing nor no-rope; no head_dim, or no
// hidden_size, that its limits allow) is bad input, every problem named at once.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/capabilities/capabilities.hpp"

namespace attncheck {

// A stated Capabilities. `source` names where it came from in messages ("worker 'exec:...' supports line").
Capabilities parse_capabilities(const nlohmann::json& statement, const std::string& source);
// The same from text (InputError when it is not one JSON object).
Capabilities parse_capabilities_text(std::string_view text, const std::string& source);

// {"stated": true, "features": [...], "head_dim_multiple_of": ..., ...}: what parse_capabilities reads back
// (less "stated", which it ignores), and what reports print.
nlohmann::json to_json(const Capabilities& capabilities);

// FEATURE[,FEATURE...] of `fuzz --only/--without`: InputError naming an unknown feature and the valid names.
FeatureSet parse_feature_list(const std::vector<std::string>& names, const std::string& option);

}  // namespace attncheck
