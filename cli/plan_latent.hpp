// `attncheck plan` for a multi-head latent attention layer (core/model/latent_attention.hpp): the widths
// (q/k and v heads, the latents), the cache per token in the expanded and absorbed forms, and the TP table
// (heads split, down-projections and latent norms on every rank). plan_text.cpp and plan_json.cpp call
// these for a latent geometry in place of the q/k/v_proj rows that layer does not have.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "cli/plan_report.hpp"

namespace attncheck::cli {

void write_latent_geometry_rows(const PlanReport& report, std::ostream& out);
void write_latent_ranks(const PlanReport& report, std::ostream& out);
// {"qk_head_dim", "v_head_dim", "q_lora_rank", ..., "cache_bytes_per_token": {"expanded", "absorbed"}}.
nlohmann::json latent_json(const PlanReport& report);

}  // namespace attncheck::cli
