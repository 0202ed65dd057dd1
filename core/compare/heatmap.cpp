#include "core/compare/heatmap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>

#include "core/compare/rank_regroup.hpp"
#include "core/compare/sketch.hpp"
#include "core/tp/tp_convention.hpp"

namespace attncheck {

std::string HeatmapAxis::describe(std::int64_t element) const {
  if (group > 1) return fmt::format("{} {}, {} {}", group_name, element / group, unit, element % group);
  if (group == 1) return fmt::format("{} {}", group_name, element);
  if (extent <= 1 && unit.empty()) return "";
  return fmt::format("{} {}", unit, element);
}

std::int64_t aligned_bin(std::int64_t extent, std::int64_t group, std::int64_t max_cells) {
  max_cells = std::max<std::int64_t>(1, max_cells);
  if (extent <= max_cells) return 1;
  const std::int64_t needed = (extent + max_cells - 1) / max_cells;
  if (group <= 1) return needed;
  if (needed <= group) {
    for (std::int64_t bin = needed; bin < group; ++bin) {
      if (group % bin == 0) return bin;
    }
    return group;
  }
  return group * ((needed + group - 1) / group);
}

namespace {

// Where one element of a tensor goes: its natural row and column.
struct Placement {
  std::int64_t row = 0, column = 0;
};

struct Layout {
  HeatmapAxis rows, columns;
  std::function<Placement(std::int64_t flat)> place;
};

constexpr double kNoElement = std::numeric_limits<double>::quiet_NaN();

std::string without_sketch(const std::string& name) {
  return name.ends_with(kSketchSuffix) ? name.substr(0, name.size() - kSketchSuffix.size()) : name;
}

HeatmapAxis sketch_columns() {
  return {.title = "sketch entry (0: 2-norm, 1-3: projections on +-1 vectors)",
          .extent = 1 + kSketchProjections,
          .unit = "sketch entry"};
}

HeatmapAxis channel_columns(std::int64_t extent, std::string title = "hidden channel") {
  return {.title = title, .extent = extent, .unit = title};
}

// The head a parameter's lines belong to ("query head" or "KV head"); empty for one without lines.
std::string head_kind(const std::string& parameter) {
  if (parameter == "q_proj" || parameter == "o_proj" || parameter == "q_bias" || parameter == "sinks") {
    return "query head";
  }
  if (parameter == "k_proj" || parameter == "v_proj" || parameter == "k_bias" || parameter == "v_bias") {
    return "KV head";
  }
  return "";
}

// The natural axes of an unsharded tensor of this name and shape (header of heatmap.hpp).
Layout layout_of(const Case& test_case, const std::string& name, const Shape& shape) {
  const std::string base = without_sketch(name);
  const bool sketched = base != name;
  const std::int64_t head_dim = test_case.geometry().head_dim();
  const std::string parameter = base.starts_with("grads/") ? base.substr(6) : "";
  if ((base == "out" || base == "grads/x" || base == "decode/out") && shape.size() == 3) {
    const bool decode = base == "decode/out";
    const std::int64_t tokens = shape[1], width = shape[2];
    return {.rows = {.title = decode ? "decode token (batch row, row of the decode schedule)"
                                     : "token (batch row, position)",
                     .extent = shape[0] * tokens,
                     .group = tokens,
                     .group_name = "batch row",
                     .unit = decode ? "decode row" : "position"},
            .columns = sketched ? sketch_columns() : channel_columns(width),
            .place = [width](std::int64_t flat) {
              return Placement{flat / width, flat % width};
            }};
  }
  const std::string heads = head_kind(parameter);
  if (!heads.empty() && parameter.ends_with("_proj") && shape.size() == 2) {
    // o_proj's lines along the head axis are its columns; a sketch has one row per line either way.
    const bool transposed = parameter == "o_proj" && !sketched;
    const std::int64_t width = shape[1];
    return {.rows = {.title = heads + ", line",
                     .extent = transposed ? shape[1] : shape[0],
                     .group = head_dim,
                     .group_name = heads,
                     .unit = "line"},
            .columns = sketched ? sketch_columns() : channel_columns(transposed ? shape[0] : shape[1]),
            .place = [width, transposed](std::int64_t flat) {
              return transposed ? Placement{flat % width, flat / width} : Placement{flat / width, flat % width};
            }};
  }
  if (parameter == "sinks" && shape.size() == 1) {  // one logit per query head
    return {.rows = {.title = heads, .extent = shape[0], .group = 1, .group_name = heads, .unit = heads},
            .columns = channel_columns(1, "the head's sink logit"),
            .place = [](std::int64_t flat) {
              return Placement{flat, 0};
            }};
  }
  if (!heads.empty() && shape.size() == 1 && head_dim > 0 && shape[0] % head_dim == 0) {  // q/k/v_bias
    return {.rows = {.title = heads, .extent = shape[0] / head_dim, .group = 1, .group_name = heads, .unit = heads},
            .columns = channel_columns(head_dim, "channel within the head"),
            .place = [head_dim](std::int64_t flat) {
              return Placement{flat / head_dim, flat % head_dim};
            }};
  }
  if (shape.size() == 1) {  // o_bias, q_norm, k_norm
    return {.rows = {.extent = 1},
            .columns = channel_columns(shape[0], parameter == "o_bias" ? "hidden channel" : "channel within a head"),
            .place = [](std::int64_t flat) {
              return Placement{0, flat};
            }};
  }
  // Anything else: its first axis against the rest.
  const std::int64_t first = shape.empty() ? 1 : shape[0];
  const std::int64_t rest = std::max<std::int64_t>(1, element_count(shape) / std::max<std::int64_t>(1, first));
  return {.rows = {.title = "index 0", .extent = first, .unit = "index"},
          .columns = {.title = "remaining indices, flattened", .extent = rest, .unit = "flat index"},
          .place = [rest](std::int64_t flat) {
            return Placement{flat / rest, flat % rest};
          }};
}

double error_ratio(double expected, double actual, double tolerance) {
  if (!std::isfinite(actual) && std::isfinite(expected)) return std::numeric_limits<double>::infinity();
  const double difference = std::fabs(actual - expected);
  if (!(difference > 0.0)) return 0.0;  // equal, or both the same non-finite value
  return tolerance > 0.0 ? difference / tolerance : std::numeric_limits<double>::infinity();
}

bool failing(TensorStatus status) {
  return status == TensorStatus::mismatch || status == TensorStatus::non_finite;
}

bool drawable(TensorStatus status) {
  return status == TensorStatus::ok || failing(status);
}

// The candidate's tensor as compared with `expected_name`: sketched where the expected one is a sketch.
std::optional<Tensor> compared_actual(const std::string& expected_name, const Shape& expected_shape,
                                      const NamedTensors& actual) {
  const std::string base = without_sketch(expected_name);
  const auto found = actual.find(base);
  if (found == actual.end()) return std::nullopt;
  if (base == expected_name) {
    if (found->second.shape != expected_shape) return std::nullopt;
    return found->second;
  }
  try {
    if (sketch_shape(base, found->second.shape) != expected_shape) return std::nullopt;
  } catch (const std::logic_error&) {
    return std::nullopt;  // a shape no sketch comes from
  }
  return sketch(base, found->second);
}

// Fills a heatmap's cells, one tensor at a time.
class Painter {
 public:
  Painter(Heatmap& map, const HeatmapOptions& options) : map_(map) {
    map_.rows.bin = aligned_bin(map_.rows.extent, map_.rows.group, options.max_rows);
    map_.columns.bin = aligned_bin(map_.columns.extent, map_.columns.group, options.max_columns);
    map_.cells.assign(static_cast<std::size_t>(map_.rows.cells() * map_.columns.cells()), kNoElement);
  }

  // `where(flat)` names an element for the worst-cell note.
  void paint(const Tensor& expected, const Tensor& actual, double tolerance,
             const std::function<Placement(std::int64_t)>& place,
             const std::function<std::string(std::int64_t flat, Placement)>& where) {
    const std::int64_t columns = map_.columns.cells();
    std::int64_t worst_flat = -1;
    Placement worst_place;
    double worst = -1.0;
    for (std::int64_t flat = 0; flat < expected.numel(); ++flat) {
      const double ratio = error_ratio(expected.values[flat], actual.values[flat], tolerance);
      const Placement at = place(flat);
      if (at.row < 0 || at.row >= map_.rows.extent || at.column < 0 || at.column >= map_.columns.extent) continue;
      double& cell = map_.cells[(at.row / map_.rows.bin) * columns + at.column / map_.columns.bin];
      cell = std::isnan(cell) ? ratio : std::max(cell, ratio);
      if (ratio > worst) {
        worst = ratio;
        worst_flat = flat;
        worst_place = at;
      }
    }
    if (worst_flat >= 0 && (map_.worst_row < 0 || worst > map_.worst_ratio)) {
      map_.worst_ratio = worst;
      map_.worst_row = worst_place.row / map_.rows.bin;
      map_.worst_column = worst_place.column / map_.columns.bin;
      map_.worst_where = where(worst_flat, worst_place);
    }
  }

 private:
  Heatmap& map_;
};

std::string index_text(std::int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (std::size_t axis = shape.size(); axis-- > 0;) {
    index[axis] = flat % shape[axis];
    flat /= shape[axis];
  }
  return to_string(index);
}

std::string worse_status(const std::string& current, TensorStatus status) {
  if (status == TensorStatus::non_finite || current == to_string(TensorStatus::non_finite)) {
    return std::string(to_string(TensorStatus::non_finite));
  }
  if (status == TensorStatus::mismatch || current == to_string(TensorStatus::mismatch)) {
    return std::string(to_string(TensorStatus::mismatch));
  }
  return current.empty() ? std::string(to_string(status)) : current;
}

Heatmap tensor_heatmap(const Case& test_case, const TensorReport& report, const Tensor& expected, const Tensor& actual,
                       const HeatmapOptions& options) {
  Layout layout = layout_of(test_case, report.name, expected.shape);
  Heatmap map{.title = report.name,
              .status = std::string(to_string(report.status)),
              .rows = std::move(layout.rows),
              .columns = std::move(layout.columns)};
  Painter painter(map, options);
  painter.paint(expected, actual, report.tolerance, layout.place, [&](std::int64_t flat, Placement at) {
    const std::string row = map.rows.describe(at.row), column = map.columns.describe(at.column);
    return fmt::format("{}{}{}: index {}", row, row.empty() ? "" : ", ", column, index_text(flat, expected.shape));
  });
  return map;
}

// One parameter's per-rank gradients: head (or channel) x rank.
struct RankGroup {
  std::string parameter;  // "q_proj", "k_norm", ...
  bool sketched = false;
  std::vector<const TensorReport*> members;
};

Heatmap rank_heatmap(const Case& test_case, const RankGroup& group, const NamedTensors& expected,
                     const NamedTensors& actual, TpConvention convention, const HeatmapOptions& options) {
  const Geometry& g = test_case.geometry();
  const std::string heads = head_kind(group.parameter);
  const std::string suffix = group.sketched ? std::string(kSketchSuffix) : "";
  Heatmap map{.title = fmt::format("ranks/*/grads/{}{}", group.parameter, suffix)};
  map.columns = {.title = "rank", .extent = test_case.plan.tp_size, .group = 1, .group_name = "rank", .unit = "rank"};
  if (!heads.empty()) {
    map.rows = {.title = heads,
                .extent = heads == "query head" ? g.num_heads() : g.num_kv_heads(),
                .group = 1,
                .group_name = heads,
                .unit = heads};
  } else {
    const Tensor& first = expected.at(group.members.front()->name);
    map.rows = channel_columns(first.numel(), group.parameter == "o_bias" ? "hidden channel" : "channel within a head");
  }
  Painter painter(map, options);
  const std::vector<RankHoldings> holdings = rank_holdings(test_case.plan, convention);
  for (const TensorReport* member : group.members) {
    map.status = worse_status(map.status, member->status);
    if (!drawable(member->status)) continue;
    const std::optional<RankTensorName> parsed = parse_rank_tensor_name(member->name);
    if (!parsed || parsed->rank < 0 || parsed->rank >= static_cast<int>(holdings.size())) continue;
    const Tensor& expected_tensor = expected.at(member->name);
    const std::optional<Tensor> actual_tensor = compared_actual(member->name, expected_tensor.shape, actual);
    if (!actual_tensor) continue;
    const int rank = parsed->rank;
    const Shape& shape = expected_tensor.shape;
    const std::int64_t width = shape.size() == 2 ? shape[1] : 1;
    const bool columns_are_lines = group.parameter == "o_proj" && !group.sketched;
    std::function<Placement(std::int64_t)> place;
    if (heads.empty()) {
      place = [rank](std::int64_t flat) { return Placement{flat, rank}; };
    } else {
      const IndexRange lines = held_lines(holdings[rank], group.parameter).value();
      const std::int64_t head_dim = group.parameter == "sinks" ? 1 : g.head_dim();  // a sink line is a head
      place = [=](std::int64_t flat) {
        const std::int64_t line = columns_are_lines ? flat % width : flat / width;
        return Placement{(lines.begin + line) / head_dim, rank};
      };
    }
    painter.paint(expected_tensor, *actual_tensor, member->tolerance, place, [&](std::int64_t flat, Placement at) {
      return fmt::format("{}, rank {}: {} index {}", map.rows.describe(at.row), rank, member->name,
                         index_text(flat, shape));
    });
  }
  return map;
}

}  // namespace

std::vector<Heatmap> error_heatmaps(const Case& test_case, const NamedTensors& expected, const NamedTensors& actual,
                                    const CompareReport& report, const HeatmapOptions& options) {
  // Per-rank tensors gathered by parameter first, so that their map stands where the first of them is.
  std::map<std::string, RankGroup> rank_groups;
  for (const TensorReport& tensor : report.tensors) {
    if (const std::optional<RankTensorName> parsed = parse_rank_tensor_name(tensor.name)) {
      RankGroup& group = rank_groups[parsed->parameter + (parsed->sketched ? "#" : "")];
      group.parameter = parsed->parameter;
      group.sketched = parsed->sketched;
      group.members.push_back(&tensor);
    }
  }
  std::vector<Heatmap> maps;
  for (const TensorReport& tensor : report.tensors) {
    if (const std::optional<RankTensorName> parsed = parse_rank_tensor_name(tensor.name)) {
      const RankGroup& group = rank_groups.at(parsed->parameter + (parsed->sketched ? "#" : ""));
      if (group.members.front() != &tensor) continue;  // drawn with the group's first tensor
      const bool any_failing = std::any_of(group.members.begin(), group.members.end(),
                                           [](const TensorReport* member) { return failing(member->status); });
      const bool any_drawable = std::any_of(group.members.begin(), group.members.end(),
                                            [](const TensorReport* member) { return drawable(member->status); });
      if (any_failing || (options.all && any_drawable)) {
        maps.push_back(rank_heatmap(test_case, group, expected, actual, report.tp_convention, options));
      }
      continue;
    }
    if (!failing(tensor.status) && !(options.all && tensor.status == TensorStatus::ok)) continue;
    const auto expected_tensor = expected.find(tensor.name);
    if (expected_tensor == expected.end()) continue;
    const std::optional<Tensor> actual_tensor = compared_actual(tensor.name, expected_tensor->second.shape, actual);
    if (!actual_tensor) continue;
    maps.push_back(tensor_heatmap(test_case, tensor, expected_tensor->second, *actual_tensor, options));
  }
  return maps;
}

}  // namespace attncheck
