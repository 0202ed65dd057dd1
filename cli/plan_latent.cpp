#include "cli/plan_latent.hpp"

#include "cli/plan_format.hpp"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "core/errors/nearby.hpp"
#include "core/model/rope_frequencies.hpp"

namespace attncheck::cli {

namespace {

void row(std::ostream& out, std::string_view name, const std::string& value) {
  fmt::print(out, "  {:<16}{}\n", name, value);
}

}  // namespace

void write_latent_geometry_rows(const PlanReport& report, std::ostream& out) {
  const Geometry& geometry = report.source.geometry;
  const LatentAttentionSpec& latent = *geometry.latent();
  const std::int64_t hidden = geometry.hidden_size(), num_heads = geometry.num_heads();
  row(out, "attention", "multi-head latent attention (DeepSeek-V2/V3, Kimi K2)");
  const auto quotient = geometry.quotient_head_dim();
  row(out, "q/k head width",
      fmt::format("{} = qk_nope_head_dim {} + qk_rope_head_dim {}{}", geometry.head_dim(), latent.qk_nope_head_dim,
                  latent.qk_rope_head_dim,
                  quotient ? fmt::format(" (hidden_size / num_heads = {} would be wrong)", *quotient) : ""));
  row(out, "v head width", fmt::format("{} = v_head_dim (not the q/k width)", latent.v_head_dim));
  row(out, "latent", fmt::format("kv_lora_rank {} + shared k_pe {} (kv_a_proj_with_mqa {} -> {}); q {}",
                                 latent.kv_lora_rank, latent.qk_rope_head_dim, hidden, latent.kv_a_rows(),
                                 latent.q_lora_rank ? fmt::format("q_lora_rank {}", *latent.q_lora_rank)
                                                    : std::string("straight from the hidden state (no q_lora_rank)")));
  if (latent.q_lora_rank) {
    row(out, "q_a_proj", fmt::format("{} -> {}, then q_a_layernorm", hidden, *latent.q_lora_rank));
    row(out, "q_b_proj", fmt::format("{} -> {} = {} x {}", *latent.q_lora_rank, geometry.query_width(), num_heads,
                                     geometry.head_dim()));
  } else {
    row(out, "q_proj", fmt::format("{} -> {} = {} x {}", hidden, geometry.query_width(), num_heads, geometry.head_dim()));
  }
  row(out, "kv_b_proj", fmt::format("{} -> {} = {} x ({} k_nope + {} v), after kv_a_layernorm", latent.kv_lora_rank,
                                    num_heads * latent.kv_b_rows_per_head(), num_heads, latent.qk_nope_head_dim,
                                    latent.v_head_dim));
  row(out, "o_proj", fmt::format("{} = {} x {} -> {}", geometry.value_width(), num_heads, latent.v_head_dim, hidden));
  row(out, "latent norms", fmt::format("RMSNorm over the whole latent, x * w (eps {})",
                                       format_number(latent.latent_norm_eps)));
  const std::int64_t bytes = bytes_per_element(report.cache_precision);
  row(out, "cache/token",
      fmt::format("expanded {} B ({} x ({} + {}) {}), absorbed {} B ({} + {} {}): {:.1f}x smaller",
                  grouped_digits(latent.expanded_cache_elements(num_heads) * bytes), num_heads, geometry.head_dim(),
                  latent.v_head_dim, to_string(report.cache_precision),
                  grouped_digits(latent.absorbed_cache_elements() * bytes), latent.kv_lora_rank, latent.qk_rope_head_dim,
                  to_string(report.cache_precision),
                  static_cast<double>(latent.expanded_cache_elements(num_heads)) /
                      static_cast<double>(latent.absorbed_cache_elements())));
}

void write_latent_ranks(const PlanReport& report, std::ostream& out) {
  const TpPlan& plan = report.plan;
  const LatentAttentionSpec& latent = *plan.geometry.latent();
  const std::int64_t bytes = bytes_per_element(report.cache_precision);
  fmt::print(out,
             "\ntensor parallel: tp_size {} (heads split; q_a_proj, kv_a_proj_with_mqa and the latent norms whole on "
             "every rank, their gradients summed over all ranks)\n",
             plan.tp_size);
  const std::string cache = fmt::format("{} B/token", to_string(report.cache_precision));
  fmt::print(out, "  {:<5} {:<12} {:>8} {:>8}  {:<15} {:<15} {:<13} {:>13} {:>17} {:>17}\n", "rank", "heads",
             "q width", "v width", "q_b_proj rows", "kv_b_proj rows", "o_proj cols", "params",
             "expanded " + cache, "absorbed " + cache);
  for (const RankPlan& rank : plan.ranks) {
    fmt::print(out, "  {:<5} {:<12} {:>8} {:>8}  {:<15} {:<15} {:<13} {:>13} {:>17} {:>17}\n", rank.rank,
               head_list(rank.q_heads), rank.query_width, rank.value_width,
               fmt::format("{}-{}", rank.q_proj_rows.begin, rank.q_proj_rows.end - 1),
               fmt::format("{}-{}", rank.kv_b_proj_rows.begin, rank.kv_b_proj_rows.end - 1),
               fmt::format("{}-{}", rank.o_proj_columns.begin, rank.o_proj_columns.end - 1),
               grouped_digits(rank.params.total()), grouped_digits(rank.kv_cache_elements_per_token * bytes),
               grouped_digits(rank.absorbed_cache_elements_per_token * bytes));
  }
  const std::int64_t over_ranks = plan.total_params_over_ranks().total();
  const std::int64_t unsharded = plan.unsharded_params.total();
  fmt::print(out, "  absorbed cache: {} + {} per token on every rank (the latent is not split by head)\n",
             latent.kv_lora_rank, latent.qk_rope_head_dim);
  fmt::print(out, "  parameters: {} unsharded, {} over all ranks ({} replicated)\n", grouped_digits(unsharded),
             grouped_digits(over_ranks), over_ranks == unsharded ? "none" : "+" + grouped_digits(over_ranks - unsharded));
}

nlohmann::json latent_json(const PlanReport& report) {
  const Geometry& geometry = report.plan.geometry;
  const LatentAttentionSpec& latent = *geometry.latent();
  const std::int64_t bytes = bytes_per_element(report.cache_precision);
  return {{"q_lora_rank", latent.q_lora_rank ? nlohmann::json(*latent.q_lora_rank) : nlohmann::json(nullptr)},
          {"kv_lora_rank", latent.kv_lora_rank},
          {"qk_nope_head_dim", latent.qk_nope_head_dim},
          {"qk_rope_head_dim", latent.qk_rope_head_dim},
          {"qk_head_dim", latent.qk_head_dim()},
          {"v_head_dim", latent.v_head_dim},
          {"value_width", geometry.value_width()},
          {"latent_norm_eps", latent.latent_norm_eps},
          {"cache_bytes_per_token",
           {{"expanded", latent.expanded_cache_elements(geometry.num_heads()) * bytes},
            {"absorbed", latent.absorbed_cache_elements() * bytes}}}};
}

}  // namespace attncheck::cli
