// Cutting HF-layout parameters into per-rank shards by a TpPlan, and putting per-rank gradients back
// together.
//
// A rank's shard (a Parameters with the rank's local widths):
//   q_proj [rank.query_width, hidden]  = full q_proj rows rank.q_proj_rows   (its query heads)
//   k_proj, v_proj [rank.kv_width, hidden] = rows rank.kv_proj_rows          (its KV heads; a replicated
//                                                                              head is copied to each rank)
//   o_proj [hidden, rank.query_width]  = full o_proj columns rank.o_proj_columns
//   q_bias / k_bias / v_bias           = the same slices of the biases
//   o_bias, q_norm, k_norm             = whole, on every rank; but rms-full-width's q_norm / k_norm
//                                        (a weight per channel) = elements q_proj_rows / kv_proj_rows
//
// Rank partial gradients are the gradients of sum(out * dout) with respect to one rank's copy of its
// shard, with out = sum over ranks of the o_proj partials + o_bias. Reductions:
//   q_proj, o_proj, q_bias            owned by one rank: nothing to reduce
//   k_proj, v_proj, k_bias, v_bias    summed over the KV head's replica group, and only there
//   q_norm, k_norm                    per-head norms: summed over all ranks (every rank normalises its
//                                     own heads); rms-full-width: as q_proj / k_proj (owned; k_norm
//                                     summed over the replica group)
//   o_bias                            identical on every rank (sum of dout), taken as is
// Latent attention (core/model/tp_plan.hpp): q_b_proj by rows rank.q_proj_rows and kv_b_proj by rows
// rank.kv_b_proj_rows (owned), o_proj by columns; q_a_proj, q_a_layernorm, kv_a_proj_with_mqa and
// kv_a_layernorm whole on every rank, their gradients summed over all ranks.
#pragma once

#include <vector>

#include "core/model/parameters.hpp"
#include "core/model/tp_plan.hpp"

namespace attncheck {

ParameterWidths rank_widths(const RankPlan& rank);

// The shard of `full` (unsharded, HF layout) that `rank` holds.
Parameters shard_parameters(const Parameters& full, const TpPlan& plan, int rank);

// Full-layer gradients from every rank's partial gradients (rank_partials[r] has rank r's widths).
Parameters assemble_gradients(const std::vector<Parameters>& rank_partials, const TpPlan& plan);

// The same, one rank at a time, so a caller need not hold every rank's partials at once. Ranks must be
// added in order 0, 1, ..., tp_size - 1 (sums then run in rank order, independent of scheduling).
class GradientAssembler {
 public:
  explicit GradientAssembler(const TpPlan& plan);  // keeps a reference: the plan must outlive it
  explicit GradientAssembler(TpPlan&&) = delete;
  void add_rank(const Parameters& partial);
  Parameters finish() &&;  // throws std::logic_error unless every rank was added

 private:
  const TpPlan& plan_;
  Parameters full_;
  int next_rank_ = 0;
};

// Each rank's shard gradients after the reductions above: what rank r's optimiser sees. They are the
// slices of the assembled gradients: owned slices as computed, replica-group and all-rank sums as formed.
std::vector<Parameters> reduce_rank_gradients(const std::vector<Parameters>& rank_partials, const TpPlan& plan);
std::vector<Parameters> rank_slices(const Parameters& assembled, const TpPlan& plan);

// The inverse of rank_slices: full-layer gradients from each rank's reduced gradients, every slice taken
// from the first rank that holds it (o_bias and per-head q_norm / k_norm from rank 0), as an all-gather of the
// shards would give them.
Parameters gather_gradients(const std::vector<Parameters>& rank_gradients, const TpPlan& plan);

}  // namespace attncheck
