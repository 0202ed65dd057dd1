// Text rendering of `attncheck plan`, for people: the geometry with where head_dim came from, the
// widths, and the rank -> query heads -> KV heads -> replica group table.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include "cli/plan_context_parallel.hpp"
#include "cli/plan_format.hpp"
#include "cli/plan_latent.hpp"
#include "cli/plan_report.hpp"
#include "core/errors/nearby.hpp"
#include "core/model/rope_frequencies.hpp"
#include "core/tp/fused_qkv.hpp"

namespace attncheck::cli {

namespace {

std::string head_dim_line(const Geometry& geometry) {
  const std::int64_t head_dim = geometry.head_dim();
  const auto quotient = geometry.quotient_head_dim();
  if (geometry.head_dim_source() == HeadDimSource::derived) {
    return fmt::format("{} (derived: hidden_size / num_heads = {} / {})", head_dim, geometry.hidden_size(),
                       geometry.num_heads());
  }
  if (!quotient) return fmt::format("{} (explicit; hidden_size / num_heads does not divide)", head_dim);
  if (*quotient == head_dim) return fmt::format("{} (explicit; equals hidden_size / num_heads)", head_dim);
  return fmt::format("{} (explicit; hidden_size / num_heads = {} would be wrong)", head_dim, *quotient);
}

std::string rotary_line(const Geometry& geometry) {
  if (geometry.rotary_dim() == 0) return "none (rotary_dim 0)";
  return fmt::format("{} of {} channels, {}, theta {}", geometry.rotary_dim(), geometry.head_dim(),
                     to_string(geometry.rope_style()), format_number(geometry.rope_theta()));
}

// The scaling's parameters and what they give: the frequencies' range and the attention factor.
std::string rope_scaling_line(const Geometry& geometry) {
  const RopeScaling& scaling = geometry.rope_scaling();
  if (scaling.type == RopeScalingType::none) return "none";
  std::vector<std::string> parts;
  const auto add = [&](const char* name, std::optional<double> value) {
    if (value) parts.push_back(fmt::format("{} {}", name, format_number(*value)));
  };
  add("factor", scaling.factor);
  add("low_freq_factor", scaling.low_freq_factor);
  add("high_freq_factor", scaling.high_freq_factor);
  if (scaling.original_max_position_embeddings) {
    parts.push_back(fmt::format("original_max_position_embeddings {}", *scaling.original_max_position_embeddings));
  }
  add("beta_fast", scaling.beta_fast);
  add("beta_slow", scaling.beta_slow);
  add("mscale", scaling.mscale);
  add("mscale_all_dim", scaling.mscale_all_dim);
  add("attention_factor", scaling.attention_factor);
  if (scaling.type == RopeScalingType::yarn && !scaling.truncate) parts.push_back("truncate false");
  if (!scaling.short_factor.empty()) parts.push_back(fmt::format("{} short/long factors", scaling.short_factor.size()));
  std::string line = fmt::format("{} ({})", to_string(scaling.type), fmt::join(parts, ", "));
  const auto describe = [&](std::int64_t position, const std::string& when) {
    const RopeFrequencies f = rope_frequencies(geometry, position);
    return fmt::format("; {}inv_freq {:.6g} .. {:.6g}, attention factor {}", when, f.inv_freq.front(),
                       f.inv_freq.back(), format_number(f.attention_factor));
  };
  if (scaling.type == RopeScalingType::longrope) {
    const std::int64_t original = *scaling.original_max_position_embeddings;
    return line + describe(0, "short factors: ") +
           describe(original, fmt::format("long factors (a call whose positions reach {}): ", original).c_str());
  }
  return line + describe(0, "");
}

std::string qk_norm_line(const Geometry& geometry) {
  switch (geometry.qk_norm()) {
    case QkNorm::none:
      return "none";
    case QkNorm::rms:
      return fmt::format("RMSNorm over head_dim, x * w (eps {})", format_number(geometry.qk_norm_eps()));
    case QkNorm::rms_one_plus:
      return fmt::format("RMSNorm over head_dim, x * (1 + w) (eps {})", format_number(geometry.qk_norm_eps()));
    case QkNorm::rms_full_width:
      return fmt::format(
          "RMSNorm over the whole q ({}) and k ({}) width, x * w (eps {}); TP all-reduces the sums of squares",
          geometry.query_width(), geometry.kv_width(), format_number(geometry.qk_norm_eps()));
  }
  return "none";
}

std::string scale_line(const Geometry& geometry) {
  switch (geometry.scale_source()) {
    case ScaleSource::head_dim:
      return fmt::format("{} = head_dim^-0.5", format_number(geometry.scale()));
    case ScaleSource::query_pre_attn_scalar:
      return fmt::format("{} = query_pre_attn_scalar^-0.5 ({})", format_number(geometry.scale()),
                         format_number(*geometry.spec().query_pre_attn_scalar));
    case ScaleSource::attention_multiplier:
      return fmt::format("{} = attention_multiplier (head_dim^-0.5 would be {})", format_number(geometry.scale()),
                         format_number(std::pow(static_cast<double>(geometry.head_dim()), -0.5)));
    case ScaleSource::latent_qk_head_dim: {
      const double plain = std::pow(static_cast<double>(geometry.head_dim()), -0.5);
      if (geometry.scale() == plain) return fmt::format("{} = qk_head_dim^-0.5", format_number(geometry.scale()));
      return fmt::format("{} = qk_head_dim^-0.5 x mscale^2, mscale = yarn_get_mscale(factor {}, mscale_all_dim {}) "
                         "= {} (qk_head_dim^-0.5 alone: {}; v_head_dim^-0.5: {})",
                         format_number(geometry.scale()), format_number(*geometry.rope_scaling().factor),
                         format_number(*geometry.rope_scaling().mscale_all_dim),
                         format_number(std::sqrt(geometry.scale() / plain)), format_number(plain),
                         format_number(std::pow(static_cast<double>(geometry.v_head_dim()), -0.5)));
    }
  }
  return format_number(geometry.scale());
}

// Consecutive whole heads of one projection run together: "q0-7 k0-3 v0-3"; a partial head shows its
// rows within the head: "k0[64:128]".
std::string segments_line(const std::vector<FusedRowSegment>& segments, std::int64_t head_dim) {
  std::vector<std::string> tokens;
  for (std::size_t i = 0; i < segments.size();) {
    const FusedRowSegment& first = segments[i];
    const std::string name(to_string(first.projection));
    if (first.source_rows.size() != head_dim) {
      const std::int64_t offset = first.source_rows.begin - first.head * head_dim;
      tokens.push_back(fmt::format("{}{}[{}:{}]", name, first.head, offset, offset + first.source_rows.size()));
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    while (j < segments.size() && segments[j].projection == first.projection &&
           segments[j].source_rows.size() == head_dim && segments[j].head == segments[j - 1].head + 1) {
      ++j;
    }
    tokens.push_back(name + head_list({first.head, segments[j - 1].head + 1}));
    i = j;
  }
  return fmt::format("{}", fmt::join(tokens, " "));
}

void write_plain_widths(const PlanReport& report, std::ostream& out);
void write_layer_features(const PlanReport& report, std::ostream& out);

void write_geometry(const PlanReport& report, std::ostream& out) {
  const Geometry& geometry = report.source.geometry;
  const auto row = [&](std::string_view name, const std::string& value) {
    fmt::print(out, "  {:<16}{}\n", name, value);
  };
  fmt::print(out, "geometry: {}\n", report.source.title);
  row("hidden_size", std::to_string(geometry.hidden_size()));
  row("num_heads", fmt::format("{} query heads", geometry.num_heads()));
  if (geometry.is_latent()) write_latent_geometry_rows(report, out);
  if (!geometry.is_latent()) write_plain_widths(report, out);
  write_layer_features(report, out);
}

// A plain layer's head counts and the q/k/v/o projections' widths.
void write_plain_widths(const PlanReport& report, std::ostream& out) {
  const Geometry& geometry = report.source.geometry;
  const auto row = [&](std::string_view name, const std::string& value) {
    fmt::print(out, "  {:<16}{}\n", name, value);
  };
  row("num_kv_heads", geometry.group_size() == 1
                          ? fmt::format("{} (plain multi-head attention)", geometry.num_kv_heads())
                          : fmt::format("{} (group_size {}: query head h reads KV head h / {})",
                                        geometry.num_kv_heads(), geometry.group_size(), geometry.group_size()));
  row("head_dim", head_dim_line(geometry));
  row("query_width", fmt::format("{} = {} x {}", geometry.query_width(), geometry.num_heads(), geometry.head_dim()));
  row("kv_width", fmt::format("{} = {} x {}", geometry.kv_width(), geometry.num_kv_heads(), geometry.head_dim()));
  row("q_proj", fmt::format("{} -> {}", geometry.hidden_size(), geometry.query_width()));
  row("k_proj, v_proj", fmt::format("{} -> {} each", geometry.hidden_size(), geometry.kv_width()));
  row("fused qkv", fmt::format("{} -> {} + 2 x {} = {}", geometry.hidden_size(), geometry.query_width(),
                               geometry.kv_width(), geometry.qkv_width()));
  row("o_proj", fmt::format("{} -> {}", geometry.query_width(), geometry.hidden_size()));
}

// RoPE, norms, scale, masks and biases: every layer has these rows.
void write_layer_features(const PlanReport& report, std::ostream& out) {
  const Geometry& geometry = report.source.geometry;
  const auto row = [&](std::string_view name, const std::string& value) {
    fmt::print(out, "  {:<16}{}\n", name, value);
  };
  if (!report.source.layer_kind.empty()) row("layer", report.source.layer_kind);
  row("rotary", rotary_line(geometry));
  if (geometry.rotary_dim() > 0) row("rope_scaling", rope_scaling_line(geometry));
  if (!geometry.is_latent()) row("qk_norm", qk_norm_line(geometry));
  row("scale", scale_line(geometry));
  row("softcap", geometry.softcap() ? format_number(*geometry.softcap()) : "none");
  row("sinks", geometry.attention_sinks() ? "a learned sink logit per query head in each softmax (gpt-oss)" : "none");
  row("sliding_window", geometry.sliding_window() ? std::to_string(*geometry.sliding_window()) : "none");
  row("mask", geometry.causal() ? "causal, bottom-right aligned when seq_q != seq_k" : "none (bidirectional)");
  if (!geometry.is_latent()) {
    row("bias",
        fmt::format("q/k/v {}, o_proj {}", geometry.qkv_bias() ? "yes" : "no", geometry.out_bias() ? "yes" : "no"));
  }
  for (const std::string& note : report.source.notes) row("note", note);
  for (const std::string& feature : report.source.not_modelled) row("NOT MODELLED", feature);
}

void write_ranks(const PlanReport& report, std::ostream& out) {
  const TpPlan& plan = report.plan;
  const Geometry& geometry = plan.geometry;
  const std::int64_t cache_bytes = bytes_per_element(report.cache_precision);
  fmt::print(out, "\ntensor parallel: tp_size {}, kv_replicas {} ({})\n", plan.tp_size, plan.kv_replicas,
             plan.kv_replicas == 1 ? "each KV head lives on one rank"
                                   : fmt::format("each KV head is replicated on {} ranks", plan.kv_replicas));
  fmt::print(out, "  {:<5} {:<12} {:<9} {:<17} {:>8} {:>9} {:>9}  {:<13} {:>13} {:>15}\n", "rank", "query heads",
             "kv heads", "replica group", "q width", "kv width", "qkv rows", "o_proj cols", "params",
             fmt::format("kv {} B/token", to_string(report.cache_precision)));
  for (const RankPlan& rank : plan.ranks) {
    const ReplicaGroup& group = plan.replica_groups[static_cast<std::size_t>(rank.replica_group)];
    fmt::print(out, "  {:<5} {:<12} {:<9} {:<17} {:>8} {:>9} {:>9}  {:<13} {:>13} {:>15}\n", rank.rank,
               head_list(rank.q_heads), head_list(rank.kv_heads),
               fmt::format("{} (ranks {})", group.id, head_list(group.ranks)), rank.query_width, rank.kv_width,
               rank.qkv_rows, fmt::format("{}-{}", rank.o_proj_columns.begin, rank.o_proj_columns.end - 1),
               grouped_digits(rank.params.total()), grouped_digits(rank.kv_cache_elements_per_token * cache_bytes));
  }
  const RankPlan& first = plan.ranks.front();
  fmt::print(out, "  per rank: query width {} = 1/{} of {}; KV cache {} of {} B/token = {}/{} ({} of {} KV heads){}\n",
             first.query_width, plan.tp_size, geometry.query_width(),
             grouped_digits(first.kv_cache_elements_per_token * cache_bytes),
             grouped_digits(plan.unsharded_kv_cache_elements_per_token * cache_bytes), first.kv_heads.size(),
             geometry.num_kv_heads(), first.kv_heads.size(), geometry.num_kv_heads(),
             plan.kv_replicas > 1 ? "\n  replication: KV memory per rank shrinks slower than query memory" : "");
  const std::int64_t over_ranks = plan.total_params_over_ranks().total();
  const std::int64_t unsharded = plan.unsharded_params.total();
  fmt::print(out, "  parameters: {} unsharded, {} over all ranks ({} replicated)\n", grouped_digits(unsharded),
             grouped_digits(over_ranks),
             over_ranks == unsharded ? "none" : "+" + grouped_digits(over_ranks - unsharded));
}

// The rows of one projection a rank holds: "q4-7" (whole query heads 4-7), "k rows 2-3" (rows that
// are not whole heads), or empty when it holds none.
std::string held_rows(char projection, const IndexRange& rows, std::int64_t head_dim) {
  if (rows.size() == 0) return {};
  if (rows.begin % head_dim == 0 && rows.end % head_dim == 0) {
    return projection + head_list({rows.begin / head_dim, rows.end / head_dim});
  }
  return fmt::format("{} rows {}-{}", projection, rows.begin, rows.end - 1);
}

std::string holdings_line(const RankHoldings& holdings, std::int64_t head_dim) {
  std::vector<std::string> tokens;
  for (const auto& [projection, rows] : {std::pair{'q', holdings.q_proj_rows}, std::pair{'k', holdings.k_proj_rows},
                                         std::pair{'v', holdings.v_proj_rows}}) {
    if (std::string token = held_rows(projection, rows, head_dim); !token.empty()) tokens.push_back(std::move(token));
  }
  return fmt::format("{}", fmt::join(tokens, " "));
}

// Per rank, side by side for each convention shown: the query heads it computes and the q/k/v_proj rows
// it holds (core/tp/tp_convention.hpp); o_proj columns, the same under every convention.
void write_conventions(const PlanReport& report, std::ostream& out) {
  const TpPlan& plan = report.plan;
  const std::int64_t head_dim = plan.geometry.head_dim();
  fmt::print(out,
             "\nTP conventions: the rows of q_proj, k_proj, v_proj each rank holds\n  (q4-7: those of query heads "
             "4-7; k rows 2-3: rows that are not whole heads; a projection it holds no row of is left out)\n");
  std::vector<std::string> header = {"rank", "computes"};
  for (TpConvention convention : report.conventions) header.emplace_back(to_string(convention));
  header.emplace_back("o_proj columns");
  std::vector<std::vector<std::string>> rows = {header};
  for (const RankPlan& rank : plan.ranks) {
    std::vector<std::string> row = {std::to_string(rank.rank), "q" + head_list(rank.q_heads)};
    for (const std::vector<RankHoldings>& holdings : report.holdings) {
      row.push_back(holdings_line(holdings[rank.rank], head_dim));
    }
    row.push_back(fmt::format("{}-{}", rank.o_proj_columns.begin, rank.o_proj_columns.end - 1));
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> widths(header.size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = " ";
    for (std::size_t c = 0; c < row.size(); ++c) line += fmt::format(" {:<{}} ", row[c], widths[c]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print(out, "{}\n", line);
  }
}

void write_layouts(const PlanReport& report, std::ostream& out) {
  const TpPlan& plan = report.plan;
  fmt::print(
      out, "\nfused QKV rows per rank, in local row order (head ids global; k0[64:128] = rows 64-127 of KV head 0)\n");
  for (FusedQkvLayout layout : kAllFusedQkvLayouts) {
    if (auto reason = fused_layout_unsupported(plan, layout)) {
      fmt::print(out, "  {:<16} unavailable: {}\n", to_string(layout), *reason);
      continue;
    }
    for (const RankPlan& rank : plan.ranks) {
      fmt::print(out, "  {:<16} rank {}: {}\n", to_string(layout), rank.rank,
                 segments_line(fused_qkv_segments(plan, rank.rank, layout), plan.geometry.head_dim()));
    }
  }
}

}  // namespace

void write_plan_text(const PlanReport& report, std::ostream& out) {
  write_geometry(report, out);
  if (report.plan.geometry.is_latent()) {
    write_latent_ranks(report, out);
    if (report.layout) write_context_parallel(report, out);
    return;  // no q/k/v_proj rows: TP conventions and fused-QKV layouts do not apply (plan_command.cpp refuses them)
  }
  write_ranks(report, out);
  if (report.layout) write_context_parallel(report, out);
  if (!report.conventions.empty()) write_conventions(report, out);
  if (report.layouts) write_layouts(report, out);
}

}  // namespace attncheck::cli
