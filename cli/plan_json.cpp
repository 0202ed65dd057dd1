// JSON rendering of `attncheck plan --json`: one object, keys documented in docs/ARCHITECTURE.md.
#include "cli/plan_context_parallel.hpp"
#include "cli/plan_latent.hpp"
#include "cli/plan_report.hpp"
#include "core/model/rope_frequencies.hpp"
#include "core/tp/fused_qkv.hpp"

namespace attncheck::cli {

namespace {

using nlohmann::json;

json optional_value(const auto& value) {
  return value ? json(*value) : json(nullptr);
}

json range_json(const IndexRange& range) {
  return json::array({range.begin, range.end});
}

json id_list(const IndexRange& range) {
  json ids = json::array();
  for (std::int64_t id = range.begin; id < range.end; ++id) ids.push_back(id);
  return ids;
}

json params_json(const ParamCount& params) {
  return {{"qkv_weight", params.qkv_weight},
          {"qkv_bias", params.qkv_bias},
          {"o_proj_weight", params.o_proj_weight},
          {"o_proj_bias", params.o_proj_bias},
          {"qk_norm", params.qk_norm},
          {"sinks", params.sinks},
          {"latent_down", params.latent_down},
          {"latent_norms", params.latent_norms},
          {"latent_up", params.latent_up},
          {"total", params.total()}};
}

json holdings_json(const RankHoldings& holdings) {
  return {{"q_heads", range_json(holdings.q_heads)},
          {"q_proj_rows", range_json(holdings.q_proj_rows)},
          {"k_proj_rows", range_json(holdings.k_proj_rows)},
          {"v_proj_rows", range_json(holdings.v_proj_rows)},
          {"o_proj_columns", range_json(holdings.o_proj_columns)}};
}

json layouts_json(const TpPlan& plan, int rank) {
  json layouts = json::object();
  for (FusedQkvLayout layout : kAllFusedQkvLayouts) {
    const std::string name(to_string(layout));
    if (auto reason = fused_layout_unsupported(plan, layout)) {
      layouts[name] = {{"unsupported", *reason}};
      continue;
    }
    json segments = json::array();
    for (const FusedRowSegment& segment : fused_qkv_segments(plan, rank, layout)) {
      segments.push_back({{"projection", to_string(segment.projection)},
                          {"head", segment.head},
                          {"local_rows", range_json(segment.local_rows)},
                          {"source_rows", range_json(segment.source_rows)}});
    }
    layouts[name] = {{"segments", segments}};
  }
  return layouts;
}

}  // namespace

// The scaling's parameters and the frequencies they give, in full (float64, as SCHEMA.md forms them), so
// that a script can compare them with its own. longrope: both sets.
json rope_scaling_json(const Geometry& geometry) {
  const RopeScaling& scaling = geometry.rope_scaling();
  json out = {{"type", to_string(scaling.type)},
              {"factor", optional_value(scaling.factor)},
              {"low_freq_factor", optional_value(scaling.low_freq_factor)},
              {"high_freq_factor", optional_value(scaling.high_freq_factor)},
              {"original_max_position_embeddings", optional_value(scaling.original_max_position_embeddings)},
              {"beta_fast", optional_value(scaling.beta_fast)},
              {"beta_slow", optional_value(scaling.beta_slow)},
              {"mscale", optional_value(scaling.mscale)},
              {"mscale_all_dim", optional_value(scaling.mscale_all_dim)},
              {"truncate", scaling.truncate},
              {"attention_factor", optional_value(scaling.attention_factor)},
              {"short_factor", scaling.short_factor},
              {"long_factor", scaling.long_factor}};
  const RopeFrequencies first = rope_frequencies(geometry, 0);
  out["inv_freq"] = first.inv_freq;
  out["resolved_attention_factor"] = first.attention_factor;
  if (scaling.type == RopeScalingType::longrope) {
    const RopeFrequencies long_set = rope_frequencies(geometry, *scaling.original_max_position_embeddings);
    out["long_inv_freq"] = long_set.inv_freq;
  }
  return out;
}

json plan_to_json(const PlanReport& report) {
  const TpPlan& plan = report.plan;
  const Geometry& geometry = plan.geometry;
  const std::int64_t cache_bytes = bytes_per_element(report.cache_precision);
  json out = {
      {"source",
       {{"kind", report.source.source_kind},
        {"title", report.source.title},
        {"notes", report.source.notes},
        {"layer_kind", report.source.layer_kind},
        {"not_modelled", report.source.not_modelled}}},
      {"hidden_size", geometry.hidden_size()},
      {"num_attention_heads", geometry.num_heads()},
      {"num_kv_heads", geometry.num_kv_heads()},
      {"head_dim", geometry.head_dim()},
      {"head_dim_source", to_string(geometry.head_dim_source())},
      {"quotient_head_dim", optional_value(geometry.quotient_head_dim())},
      {"group_size", geometry.group_size()},
      {"query_width", geometry.query_width()},
      {"kv_width", geometry.kv_width()},
      {"qkv_width", geometry.qkv_width()},
      {"rotary_dim", geometry.rotary_dim()},
      {"rope_theta", geometry.rope_theta()},
      {"rope_style", to_string(geometry.rope_style())},
      {"rope_scaling", rope_scaling_json(geometry)},
      {"qk_norm", to_string(geometry.qk_norm())},
      {"qk_norm_eps", geometry.qk_norm_eps()},
      {"scale", geometry.scale()},
      {"scale_source", to_string(geometry.scale_source())},
      {"softcap", optional_value(geometry.softcap())},
      {"attention_sinks", geometry.attention_sinks()},
      {"sliding_window", optional_value(geometry.sliding_window())},
      {"causal", geometry.causal()},
      {"qkv_bias", geometry.qkv_bias()},
      {"out_bias", geometry.out_bias()},
      {"tp_size", plan.tp_size},
      {"kv_replicas", plan.kv_replicas},
      {"cache_dtype", to_string(report.cache_precision)},
      {"params",
       {{"unsharded", params_json(plan.unsharded_params)},
        {"over_ranks", params_json(plan.total_params_over_ranks())}}},
      {"kv_cache_bytes_per_token_unsharded", plan.unsharded_kv_cache_elements_per_token * cache_bytes},
  };
  json groups = json::array();
  for (const ReplicaGroup& group : plan.replica_groups) {
    groups.push_back({{"id", group.id}, {"kv_heads", id_list(group.kv_heads)}, {"ranks", id_list(group.ranks)}});
  }
  out["replica_groups"] = groups;
  json ranks = json::array();
  for (const RankPlan& rank : plan.ranks) {
    json entry = {{"rank", rank.rank},
                  {"q_heads", id_list(rank.q_heads)},
                  {"kv_heads", id_list(rank.kv_heads)},
                  {"replica_group", rank.replica_group},
                  {"query_width", rank.query_width},
                  {"kv_width", rank.kv_width},
                  {"qkv_rows", rank.qkv_rows},
                  {"q_proj_rows", range_json(rank.q_proj_rows)},
                  {"kv_proj_rows", range_json(rank.kv_proj_rows)},
                  {"o_proj_columns", range_json(rank.o_proj_columns)},
                  {"params", params_json(rank.params)},
                  {"kv_cache_bytes_per_token", rank.kv_cache_elements_per_token * cache_bytes}};
    if (geometry.is_latent()) {
      entry["value_width"] = rank.value_width;
      entry["kv_b_proj_rows"] = range_json(rank.kv_b_proj_rows);
      entry["absorbed_cache_bytes_per_token"] = rank.absorbed_cache_elements_per_token * cache_bytes;
    }
    if (report.layouts) entry["fused_qkv"] = layouts_json(plan, rank.rank);
    if (!report.conventions.empty()) {
      json holdings = json::object();
      for (std::size_t c = 0; c < report.conventions.size(); ++c) {
        holdings[std::string(to_string(report.conventions[c]))] = holdings_json(report.holdings[c][rank.rank]);
      }
      entry["holdings"] = holdings;
    }
    ranks.push_back(entry);
  }
  out["ranks"] = ranks;
  if (geometry.is_latent()) out["latent"] = latent_json(report);
  if (report.layout) out["context_parallel"] = context_parallel_json(report);
  if (!report.conventions.empty()) {
    json names = json::array();
    for (TpConvention convention : report.conventions) names.push_back(to_string(convention));
    out["tp_conventions"] = names;
  }
  return out;
}

}  // namespace attncheck::cli
