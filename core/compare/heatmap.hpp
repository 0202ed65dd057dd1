// Pictures of where a comparison fails: for each tensor (per-rank gradients: for each parameter over all
// ranks) a grid of error / tolerance over the tensor's natural axes, for `--html` (cli/html_report.hpp).
//
// A cell holds the largest |actual - expected| / tolerance over the elements it covers (the tolerance
// of the tensor the element belongs to, as compare() judged it): <= 1 within tolerance, > 1 beyond.
// +inf where the candidate is non-finite and the expected value finite; NaN where no element lies
// (a rank that holds no line of a head).
//
// Natural axes, rows x columns:
//   out, grads/x              token (batch row, position) x hidden channel
//   decode/out                decode token (batch row, row of the schedule) x hidden channel
//   grads/q_proj, o_proj      query-head line x hidden channel (o_proj's lines are its columns)
//   grads/k_proj, v_proj      KV-head line x hidden channel
//   grads/q_bias, k/v_bias    head x channel within the head
//   grads/o_bias, q/k_norm    one row x channel
//   ranks/*/grads/<p>         head x rank (query heads for q_proj, o_proj, q_bias; KV heads for k_proj,
//                             v_proj and their biases; channel x rank for o_bias, q_norm, k_norm), a
//                             rank's lines placed by what it holds under the report's TP convention
// A "#sketch" tensor keeps its lines (rows) and has the sketch's entries as columns.
//
// out and grads/x have no head axis, by the layer's arithmetic: o_proj sums every head's context into
// each hidden channel (and dx sums every head's dq, dk, dv through q/k/v_proj). When num_heads *
// head_dim > hidden_size (Qwen3, Gemma 3) an out error does not even determine which head's context
// produced it. So the picture of out is where in the sequence it fails; which heads fail shows in the
// projection gradients, whose lines belong to exactly one head each.
//
// Large axes are binned (a cell is the max over a bin); a bin never straddles a head or a batch row:
// it divides the group's extent or is a whole number of groups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/compare/compare.hpp"

namespace attncheck {

struct HeatmapAxis {
  std::string title;        // "query head, line", "hidden channel", "rank", ...
  std::int64_t extent = 0;  // natural elements along the axis (lines, tokens, channels, heads, ranks)
  std::int64_t bin = 1;     // natural elements per cell
  std::int64_t group = 0;   // elements per labelled group (a head's lines, a batch row's tokens); 0: none
  std::string group_name;   // "query head", "batch row", "rank", ... (group > 0)
  std::string unit;         // one element: "line", "position", "hidden channel", ...
  std::int64_t cells() const { return (extent + bin - 1) / bin; }
  // "query head 3, line 17" (group > 1), "rank 2" (group 1), "hidden channel 300" (no group).
  std::string describe(std::int64_t element) const;
};

struct Heatmap {
  std::string title;   // the tensor's name, or "ranks/*/grads/<parameter>" for a per-rank map
  std::string status;  // the worst status of the tensors drawn: "MISMATCH", "NON-FINITE", "ok"
  HeatmapAxis rows, columns;
  // rows.cells() x columns.cells(), row-major.
  std::vector<double> cells;
  std::int64_t worst_row = -1, worst_column = -1;  // the cell with the largest ratio (-1: no element)
  double worst_ratio = 0.0;
  std::string worst_where;  // the worst element in natural terms and as a tensor index
  double at(std::int64_t row, std::int64_t column) const { return cells[row * columns.cells() + column]; }
};

struct HeatmapOptions {
  bool all = false;  // every compared tensor, not only the failing ones
  std::int64_t max_rows = 256, max_columns = 256;
};

// The pictures of `report`, in its tensor order (a per-rank map where its parameter's first rank tensor
// is). `expected` and `actual` are the tensors compare() judged (expected regrouped to the report's TP
// convention, actual as the candidate gave them: full gradients where expected holds sketches). Tensors
// that were missing, wrongly shaped or declined have no values to draw and get no map.
std::vector<Heatmap> error_heatmaps(const Case& test_case, const NamedTensors& expected, const NamedTensors& actual,
                                    const CompareReport& report, const HeatmapOptions& options = {});

// A bin for an axis of `extent` elements in groups of `group` (0: none) giving at most `max_cells` cells
// and never straddling a group: a divisor of group, or a multiple of it.
std::int64_t aligned_bin(std::int64_t extent, std::int64_t group, std::int64_t max_cells);

}  // namespace attncheck
