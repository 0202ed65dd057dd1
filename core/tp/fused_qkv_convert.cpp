#include "core/tp/fused_qkv_convert.hpp"

#include <algorithm>
#include <vector>

namespace attncheck {

namespace {

template <typename P>
auto& projection_of(P& shard, Projection projection) {
  return projection == Projection::q ? shard.q_proj : projection == Projection::k ? shard.k_proj : shard.v_proj;
}

template <typename P>
auto& bias_of(P& shard, Projection projection) {
  return projection == Projection::q ? shard.q_bias : projection == Projection::k ? shard.k_bias : shard.v_bias;
}

}  // namespace

Tensor& shard_projection(Parameters& shard, Projection projection) { return projection_of(shard, projection); }
const Tensor& shard_projection(const Parameters& shard, Projection projection) {
  return projection_of(shard, projection);
}
std::optional<Tensor>& shard_bias(Parameters& shard, Projection projection) { return bias_of(shard, projection); }
const std::optional<Tensor>& shard_bias(const Parameters& shard, Projection projection) {
  return bias_of(shard, projection);
}

std::vector<FusedRowCopy> fused_row_copies(const TpPlan& plan, int rank, FusedQkvLayout layout) {
  const RankPlan& r = plan.ranks[rank];
  std::vector<FusedRowCopy> copies;
  for (const FusedRowSegment& segment : fused_qkv_segments(plan, rank, layout)) {
    const std::int64_t first = segment.projection == Projection::q ? r.q_proj_rows.begin : r.kv_proj_rows.begin;
    copies.push_back(
        {segment.projection, segment.local_rows.begin, segment.source_rows.begin - first, segment.local_rows.size()});
  }
  return copies;
}

FusedQkv fuse_qkv(const Parameters& shard, const TpPlan& plan, int rank, FusedQkvLayout layout) {
  const std::int64_t hidden = plan.geometry.hidden_size();
  const std::int64_t rows = plan.ranks[rank].qkv_rows;
  FusedQkv fused{.weight = Tensor({rows, hidden}), .bias = std::nullopt};
  if (shard.q_bias) fused.bias = Tensor({rows});
  for (const FusedRowCopy& copy : fused_row_copies(plan, rank, layout)) {
    std::copy_n(projection_of(shard, copy.projection).values.begin() + copy.shard_row * hidden, copy.rows * hidden,
                fused.weight.values.begin() + copy.fused_row * hidden);
    if (fused.bias) {
      std::copy_n(bias_of(shard, copy.projection)->values.begin() + copy.shard_row, copy.rows,
                  fused.bias->values.begin() + copy.fused_row);
    }
  }
  return fused;
}

void split_qkv(const FusedQkv& fused, const TpPlan& plan, int rank, FusedQkvLayout layout, Parameters& shard) {
  const RankPlan& r = plan.ranks[rank];
  const std::int64_t hidden = plan.geometry.hidden_size();
  shard.q_proj = Tensor({r.query_width, hidden});
  shard.k_proj = Tensor({r.kv_width, hidden});
  shard.v_proj = Tensor({r.kv_width, hidden});
  if (fused.bias) {
    shard.q_bias = Tensor({r.query_width});
    shard.k_bias = Tensor({r.kv_width});
    shard.v_bias = Tensor({r.kv_width});
  }
  for (const FusedRowCopy& copy : fused_row_copies(plan, rank, layout)) {
    std::copy_n(fused.weight.values.begin() + copy.fused_row * hidden, copy.rows * hidden,
                projection_of(shard, copy.projection).values.begin() + copy.shard_row * hidden);
    if (fused.bias) {
      std::copy_n(fused.bias->values.begin() + copy.fused_row, copy.rows,
                  bias_of(shard, copy.projection)->values.begin() + copy.shard_row);
    }
  }
}

}  // namespace attncheck
