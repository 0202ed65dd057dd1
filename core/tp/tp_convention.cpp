#include "core/tp/tp_convention.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "core/errors/input_error.hpp"
#include "core/errors/nearby.hpp"

namespace attncheck {

std::string_view to_string(TpConvention convention) {
  switch (convention) {
    case TpConvention::replicated_kv:
      return "replicated-kv";
    case TpConvention::megatron_equal_block:
      return "megatron-equal-block";
  }
  return "?";
}

std::optional<TpConvention> parse_tp_convention(std::string_view name) {
  for (TpConvention convention : kAllTpConventions) {
    if (to_string(convention) == name) return convention;
  }
  return std::nullopt;
}

std::string tp_convention_names() {
  std::string names;
  for (TpConvention convention : kAllTpConventions) {
    if (!names.empty()) names += ", ";
    names += to_string(convention);
  }
  return names;
}

namespace {

std::int64_t fused_qkv_rows(const Geometry& geometry) {
  return (geometry.num_heads() + 2 * geometry.num_kv_heads()) * geometry.head_dim();
}

// Megatron's grouped fused order, per KV group: G*head_dim Q rows, head_dim K rows, head_dim V rows.
// How many rows of one kind (the segment [segment_begin, segment_begin + segment_rows) of every group's
// block) lie before fused row f: whole groups before f, plus the part of f's own group's segment.
std::int64_t rows_of_kind_before(std::int64_t fused_row, std::int64_t block_rows, std::int64_t segment_begin,
                                 std::int64_t segment_rows) {
  const std::int64_t group = fused_row / block_rows;
  const std::int64_t within = fused_row - group * block_rows;
  return group * segment_rows + std::clamp<std::int64_t>(within - segment_begin, 0, segment_rows);
}

std::vector<RankHoldings> replicated_kv_holdings(const TpPlan& plan) {
  std::vector<RankHoldings> holdings;
  for (const RankPlan& rank : plan.ranks) {
    holdings.push_back({.rank = rank.rank,
                        .q_heads = rank.q_heads,
                        .q_proj_rows = rank.q_proj_rows,
                        .k_proj_rows = rank.kv_proj_rows,
                        .v_proj_rows = rank.kv_proj_rows,
                        .o_proj_columns = rank.o_proj_columns,
                        .norms_by_channel = plan.geometry.qk_norm_full_width(),
                        .kv_b_proj_rows = rank.kv_b_proj_rows});
  }
  return holdings;
}

std::vector<RankHoldings> megatron_equal_block_holdings(const TpPlan& plan) {
  const Geometry& geometry = plan.geometry;
  const std::int64_t head_dim = geometry.head_dim();
  const std::int64_t q_rows_per_group = geometry.group_size() * head_dim;
  const std::int64_t block_rows = q_rows_per_group + 2 * head_dim;  // one KV group's [q ... | k | v]
  const std::int64_t rows_per_rank = fused_qkv_rows(geometry) / plan.tp_size;
  const auto rows = [&](std::int64_t first, std::int64_t end, std::int64_t segment_begin, std::int64_t segment_rows) {
    return IndexRange{rows_of_kind_before(first, block_rows, segment_begin, segment_rows),
                      rows_of_kind_before(end, block_rows, segment_begin, segment_rows)};
  };
  std::vector<RankHoldings> holdings;
  for (const RankPlan& rank : plan.ranks) {
    const std::int64_t first = rank.rank * rows_per_rank, end = first + rows_per_rank;
    holdings.push_back({.rank = rank.rank,
                        .q_heads = rank.q_heads,
                        .q_proj_rows = rows(first, end, 0, q_rows_per_group),
                        .k_proj_rows = rows(first, end, q_rows_per_group, head_dim),
                        .v_proj_rows = rows(first, end, q_rows_per_group + head_dim, head_dim),
                        .o_proj_columns = rank.o_proj_columns,
                        .norms_by_channel = plan.geometry.qk_norm_full_width()});
  }
  return holdings;
}

bool contains(const IndexRange& range, std::int64_t index) {
  return range.begin <= index && index < range.end;
}

const Tensor* find_parameter(const Parameters& parameters, std::string_view name) {
  const Tensor* found = nullptr;
  for_each_parameter(parameters, [&](std::string_view parameter, const Tensor& tensor) {
    if (parameter == name) found = &tensor;
  });
  return found;
}

}  // namespace

std::string partition_problem(const TpPlan& plan, TpConvention convention) {
  if (convention == TpConvention::replicated_kv) return {};  // make_tp_plan already required whole heads
  if (plan.geometry.is_latent()) {
    return "is a layout of fused QKV rows, and latent attention has none: q_b_proj and kv_b_proj split by head "
           "(replicated-kv holds them so)";
  }
  const std::int64_t rows = fused_qkv_rows(plan.geometry);
  if (rows % plan.tp_size == 0) return {};
  return fmt::format(
      "cuts the (num_heads + 2 * num_kv_heads) * head_dim = ({} + 2 * {}) * {} = {} fused QKV rows into tp_size "
      "equal blocks, and {} rows do not divide by tp_size {}",
      plan.geometry.num_heads(), plan.geometry.num_kv_heads(), plan.geometry.head_dim(), rows, rows, plan.tp_size);
}

std::vector<RankHoldings> rank_holdings(const TpPlan& plan, TpConvention convention) {
  if (std::string problem = partition_problem(plan, convention); !problem.empty()) {
    std::vector<std::int64_t> sizes;
    for (std::int64_t size : valid_tp_sizes(plan.geometry)) {
      if (partition_problem(make_tp_plan(plan.geometry, size), convention).empty()) sizes.push_back(size);
    }
    throw InputError(
        fmt::format("tp_size {} cannot be partitioned under TP convention {}", plan.tp_size, to_string(convention)),
        {{"tp_convention", std::string(to_string(convention)), std::move(problem),
          fmt::format("tp_size {} under {}, or the convention {}", join(sizes), to_string(convention),
                      to_string(TpConvention::replicated_kv))}});
  }
  return convention == TpConvention::replicated_kv ? replicated_kv_holdings(plan) : megatron_equal_block_holdings(plan);
}

std::optional<IndexRange> held_lines(const RankHoldings& holdings, std::string_view name) {
  if (name == "q_proj" || name == "q_bias" || name == "q_b_proj") return holdings.q_proj_rows;
  if (name == "kv_b_proj") return holdings.kv_b_proj_rows;
  if (name == "q_a_proj" || name == "q_a_layernorm" || name == "kv_a_proj_with_mqa" || name == "kv_a_layernorm") {
    return std::nullopt;  // latent attention's down-projections and norms: whole on every rank
  }
  if (name == "k_proj" || name == "k_bias") return holdings.k_proj_rows;
  if (name == "v_proj" || name == "v_bias") return holdings.v_proj_rows;
  if (name == "o_proj") return holdings.o_proj_columns;
  if (name == "sinks") return holdings.q_heads;  // a sink belongs to the rank that computes its query head
  if (holdings.norms_by_channel) {               // a whole-width norm's weight per channel follows its projection row
    if (name == "q_norm") return holdings.q_proj_rows;
    if (name == "k_norm") return holdings.k_proj_rows;
  }
  if (name == "o_bias" || name == "q_norm" || name == "k_norm") return std::nullopt;
  throw std::invalid_argument(fmt::format("held_lines: '{}' is no parameter", name));
}

Parameters held_parameter_shapes(const Geometry& geometry, const RankHoldings& holdings) {
  const std::int64_t hidden = geometry.hidden_size();
  if (geometry.is_latent()) {
    return parameter_shapes(geometry, {.query_width = holdings.q_proj_rows.size(),
                                       .kv_width = holdings.kv_b_proj_rows.size(),
                                       .num_heads = holdings.q_heads.size(),
                                       .value_width = holdings.o_proj_columns.size()});
  }
  // The geometry decides which tensors exist (and shapes the whole ones); each held one gets its lines.
  Parameters parameters = parameter_shapes(geometry, {.query_width = 0, .kv_width = 0});
  parameters.q_proj.shape = {holdings.q_proj_rows.size(), hidden};
  parameters.k_proj.shape = {holdings.k_proj_rows.size(), hidden};
  parameters.v_proj.shape = {holdings.v_proj_rows.size(), hidden};
  parameters.o_proj.shape = {hidden, holdings.o_proj_columns.size()};
  if (parameters.q_bias) parameters.q_bias->shape = {holdings.q_proj_rows.size()};
  if (parameters.k_bias) parameters.k_bias->shape = {holdings.k_proj_rows.size()};
  if (parameters.v_bias) parameters.v_bias->shape = {holdings.v_proj_rows.size()};
  if (parameters.sinks) parameters.sinks->shape = {holdings.q_heads.size()};
  if (parameters.q_norm && holdings.norms_by_channel) {
    parameters.q_norm->shape = {holdings.q_proj_rows.size()};
    parameters.k_norm->shape = {holdings.k_proj_rows.size()};
  }
  return parameters;
}

Parameters held_parameters(const Geometry& geometry, const RankHoldings& holdings) {
  return zero_filled(held_parameter_shapes(geometry, holdings));
}

std::vector<Tensor> regroup_lines(std::string_view name, const std::vector<const Tensor*>& from_tensors,
                                  const std::vector<RankHoldings>& from, const std::vector<RankHoldings>& to,
                                  LineAxis axis) {
  const auto problem = [&](const std::string& what) {
    return std::invalid_argument(fmt::format("regroup_lines({}): {}", name, what));
  };
  if (from_tensors.size() != from.size() || from.size() != to.size() || from.empty()) {
    throw problem("one tensor and one holding per rank, in both conventions, are needed");
  }
  const int ranks = static_cast<int>(from.size());
  std::vector<Tensor> regrouped;
  if (!held_lines(from.front(), name)) {  // held whole on every rank: each rank keeps its own
    for (int r = 0; r < ranks; ++r) {
      if (from_tensors[r] == nullptr) throw problem(fmt::format("rank {} lacks a tensor every rank holds", r));
      regrouped.push_back(*from_tensors[r]);
    }
    return regrouped;
  }
  const std::size_t line_axis = axis == LineAxis::rows ? 0 : 1;
  const Tensor* any = nullptr;
  for (int r = 0; r < ranks; ++r) {
    const IndexRange lines = *held_lines(from[r], name);
    const Tensor* tensor = from_tensors[r];
    if (tensor == nullptr) {
      if (lines.size() != 0) throw problem(fmt::format("rank {} holds {} lines but has no tensor", r, lines.size()));
      continue;
    }
    if (tensor->shape.size() <= line_axis || tensor->shape[line_axis] != lines.size() ||
        (any != nullptr && tensor->shape.size() != any->shape.size())) {
      throw problem(fmt::format("rank {}'s tensor {} does not have its {} lines along axis {}", r,
                                to_string(tensor->shape), lines.size(), line_axis));
    }
    any = tensor;
  }
  if (any == nullptr) throw problem("no rank holds any line");
  // Row-major: along rows a line is `line_size` consecutive values; along columns (o_proj, 2-D) a line
  // is one value per row, `row_count` of them, at stride = the tensor's column count.
  std::int64_t line_size = 1;
  for (std::size_t axis_index = 1; axis_index < any->shape.size(); ++axis_index) line_size *= any->shape[axis_index];
  const std::int64_t row_count = any->shape[0];
  for (int t = 0; t < ranks; ++t) {
    const IndexRange target_lines = *held_lines(to[t], name);
    Shape shape = any->shape;
    shape[line_axis] = target_lines.size();
    Tensor target(shape);
    for (std::int64_t line = target_lines.begin; line < target_lines.end; ++line) {
      int source = contains(*held_lines(from[t], name), line) ? t : -1;
      for (int r = 0; r < ranks && source < 0; ++r) {
        if (contains(*held_lines(from[r], name), line)) source = r;
      }
      if (source < 0) throw problem(fmt::format("no rank holds line {}", line));
      const Tensor& source_tensor = *from_tensors[source];
      const std::int64_t source_line = line - held_lines(from[source], name)->begin;
      const std::int64_t target_line = line - target_lines.begin;
      if (axis == LineAxis::rows) {
        std::copy_n(source_tensor.values.begin() + source_line * line_size, line_size,
                    target.values.begin() + target_line * line_size);
      } else {
        const std::int64_t source_columns = source_tensor.shape[1], target_columns = target_lines.size();
        for (std::int64_t row = 0; row < row_count; ++row) {
          target.values[row * target_columns + target_line] = source_tensor.values[row * source_columns + source_line];
        }
      }
    }
    regrouped.push_back(std::move(target));
  }
  return regrouped;
}

std::vector<Parameters> regroup_rank_gradients(const std::vector<Parameters>& rank_gradients, const TpPlan& plan,
                                               TpConvention from, TpConvention to) {
  if (static_cast<int>(rank_gradients.size()) != plan.tp_size) {
    throw std::invalid_argument("regroup_rank_gradients: one gradient set per rank is needed");
  }
  if (from == to) return rank_gradients;
  const std::vector<RankHoldings> from_holdings = rank_holdings(plan, from);
  const std::vector<RankHoldings> to_holdings = rank_holdings(plan, to);
  std::vector<Parameters> regrouped;
  for (const RankHoldings& holdings : to_holdings) regrouped.push_back(held_parameters(plan.geometry, holdings));
  // One parameter at a time across every rank (the names are the geometry's, the same on every rank).
  std::vector<std::string_view> names;
  for_each_parameter(regrouped.front(), [&](std::string_view name, const Tensor&) { names.push_back(name); });
  for (std::string_view name : names) {
    std::vector<const Tensor*> sources;
    for (const Parameters& rank : rank_gradients) {
      const Tensor* tensor = find_parameter(rank, name);
      if (tensor == nullptr) throw std::invalid_argument(fmt::format("regroup_rank_gradients: a rank lacks {}", name));
      sources.push_back(tensor);
    }
    std::vector<Tensor> tensors =
        regroup_lines(name, sources, from_holdings, to_holdings, name == "o_proj" ? LineAxis::columns : LineAxis::rows);
    for (int r = 0; r < plan.tp_size; ++r) {
      for_each_parameter(regrouped[r], [&](std::string_view parameter, Tensor& tensor) {
        if (parameter == name) tensor = std::move(tensors[r]);
      });
    }
  }
  return regrouped;
}

}  // namespace attncheck
