// TP conventions: which rows and columns of the layer's parameters each tensor-parallel rank holds, as
// data, so that per-rank gradients written by one framework can be judged against those of another.
//
// replicated-kv (attncheck's own; golden/SCHEMA.md, "A rank's shard"; core/tp/tp_shard.hpp): rank r of P
//   holds the q_proj rows, q_bias slice and o_proj columns of the query heads it computes,
//   [r*H_q/P, (r+1)*H_q/P), and the k/v_proj rows and k/v_bias slices of its KV heads (H_kv/P of them,
//   or, when P > H_kv, the one KV head r/(P/H_kv), replicated on P/H_kv ranks).
// megatron-equal-block (Megatron-Core's linear_qkv weight cut into P equal blocks): the fused rows in
//   grouped order, per KV group g = 0 .. H_kv-1:
//       q_proj rows of query heads g*G .. (g+1)*G-1 (G = H_q/H_kv; head_dim rows each),
//       k_proj rows of KV head g, v_proj rows of KV head g,
//   (H_q + 2*H_kv)*head_dim rows in all, and rank r holds fused rows [r*R, (r+1)*R) with
//   R = (H_q + 2*H_kv)*head_dim / P (a P that does not divide that cannot be partitioned: InputError).
//   The Q rows of a contiguous fused range are contiguous in q_proj (the K and V rows between groups
//   drop out), likewise K and V, so the block is one row range (possibly empty, not necessarily whole
//   heads) of each of q_proj, k_proj, v_proj and of the matching biases. o_proj columns: those of the
//   query heads it computes, as replicated-kv. When P <= H_kv and P divides H_kv the blocks are whole
//   KV groups and the holdings equal replicated-kv's.
// Both: o_bias and per-head q_norm / k_norm whole on every rank; a whole-width (rms-full-width) norm's
// weights are held element by element with the q_proj / k_proj rows they scale.
//
// Values. Under both, a rank's gradient of a line it holds (a row of q/k/v_proj or an element of their
// biases, a column of o_proj) is the layer's full gradient of that line: replicated-kv sums a replicated
// KV head's gradient over its replica group; in Megatron the reduce-scatter that is the backward of the
// all-gather of the QKV output hands each row's full gradient to its holder. q_norm/k_norm are summed
// over all ranks, o_bias is the full gradient. So per-rank gradients in one convention are regrouped
// from those of the other line by line (regroup_lines), which works on sketches too: a projection's
// sketch (core/compare/sketch.hpp) has one row per line.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/parameters.hpp"
#include "core/model/tp_plan.hpp"

namespace attncheck {

enum class TpConvention { replicated_kv, megatron_equal_block };
inline constexpr TpConvention kAllTpConventions[] = {TpConvention::replicated_kv, TpConvention::megatron_equal_block};

std::string_view to_string(TpConvention convention);  // "replicated-kv", "megatron-equal-block"
std::optional<TpConvention> parse_tp_convention(std::string_view name);
std::string tp_convention_names();  // "replicated-kv, megatron-equal-block", for messages

// What one rank holds under a convention, as ranges of the HF-layout tensors (core/model/parameters.hpp).
struct RankHoldings {
  int rank = 0;
  IndexRange q_heads;             // the query heads it computes (attention, its o_proj partial)
  IndexRange q_proj_rows;         // rows of q_proj, elements of q_bias
  IndexRange k_proj_rows;         // rows of k_proj, elements of k_bias
  IndexRange v_proj_rows;         // rows of v_proj, elements of v_bias
  IndexRange o_proj_columns;      // columns of o_proj
  bool norms_by_channel = false;  // rms-full-width: q_norm / k_norm elements follow q_proj / k_proj rows
  // Latent attention (replicated-kv only): rows of kv_b_proj; q_proj_rows are then q_b_proj's (or q_proj's)
  // rows, and the down-projections and latent norms are whole on every rank.
  IndexRange kv_b_proj_rows;
  friend bool operator==(const RankHoldings&, const RankHoldings&) = default;
};

// The rule that keeps `convention` from partitioning `plan`, or empty when it can.
std::string partition_problem(const TpPlan& plan, TpConvention convention);

// Every rank's holdings, rank order. Throws InputError (field tp_convention, naming the TP sizes that
// work) when the convention cannot partition the plan.
std::vector<RankHoldings> rank_holdings(const TpPlan& plan, TpConvention convention);

// The lines of parameter `name` ("q_proj", "k_bias", "o_proj", ...) a rank holds: rows of q/k/v_proj,
// elements of their biases (and of whole-width norm weights), columns of o_proj. nullopt for o_bias and
// per-head q_norm / k_norm, which every rank holds whole; std::invalid_argument for a name that is no parameter.
std::optional<IndexRange> held_lines(const RankHoldings& holdings, std::string_view name);

// Zero-filled parameters with the shapes a rank's gradients have under its holdings (the geometry
// decides which tensors exist). A tensor it holds no line of has 0 rows: [0, hidden_size] or [0].
Parameters held_parameters(const Geometry& geometry, const RankHoldings& holdings);
// The same shapes alone, values empty (parameter_shapes, core/model/parameters.hpp): what a reader reads a
// rank's tensors against without allocating them first.
Parameters held_parameter_shapes(const Geometry& geometry, const RankHoldings& holdings);

// Where a tensor's lines lie: along axis 0 (q/k/v_proj and their biases; every sketch) or axis 1
// (o_proj stored in full, [hidden_size, query_width]).
enum class LineAxis { rows, columns };

// One parameter's per-rank tensors re-cut from the `from` holdings to the `to` holdings (both of one
// plan). from_tensors[r] is rank r's tensor, or nullptr where rank r holds none of its lines. Each line
// of target rank t is copied from rank t when it holds that line under `from`, else from the lowest
// rank that does (their values are the same full gradient). A parameter held whole (o_bias, q_norm,
// k_norm) is copied from the same rank. Returns one tensor per rank; one holding no line has 0 lines.
// std::invalid_argument when a tensor's line count disagrees with its holdings.
std::vector<Tensor> regroup_lines(std::string_view name, const std::vector<const Tensor*>& from_tensors,
                                  const std::vector<RankHoldings>& from, const std::vector<RankHoldings>& to,
                                  LineAxis axis);

// Per-rank gradients (Result::rank_gradients, each with its holdings' shapes) from one convention to
// the other; the identity when they are the same convention.
std::vector<Parameters> regroup_rank_gradients(const std::vector<Parameters>& rank_gradients, const TpPlan& plan,
                                               TpConvention from, TpConvention to);

}  // namespace attncheck
