// Converters between HF's separate q/k/v projections and a rank's fused QKV weight in any layout of
// core/tp/fused_qkv.hpp (stacked [Q|K|V] as vLLM, grouped as Megatron-Core, neox as GPT-NeoX's code
// reshapes it), using the row maps there. Together with core/tp/tp_shard (full <-> rank shards) they take HF
// weights to any framework's per-rank fused tensors and back, and gradients the same way.
//
// Layouts: a rank shard is what shard_parameters() gives (q_proj [local query width, hidden], k_proj and
// v_proj [local kv width, hidden], biases likewise); a fused weight is [qkv_rows, hidden] and a fused
// bias [qkv_rows], rows ordered as fused_qkv_segments(plan, rank, layout) says.
#pragma once

#include <optional>
#include <vector>

#include "core/model/parameters.hpp"
#include "core/model/tensor.hpp"
#include "core/tp/fused_qkv.hpp"

namespace attncheck {

struct FusedQkv {
  Tensor weight;               // [qkv_rows, hidden]
  std::optional<Tensor> bias;  // [qkv_rows] when the geometry has qkv biases
};

// One segment of a rank's fused rows as offsets: `rows` rows starting at `fused_row` of the fused tensor and
// at `shard_row` of the shard's q, k or v projection (and of its bias). fuse_qkv and split_qkv copy these; an
// implementation that keeps its fused tensors elsewhere (LibTorch's) copies the same rows itself.
struct FusedRowCopy {
  Projection projection;
  std::int64_t fused_row;
  std::int64_t shard_row;
  std::int64_t rows;
};

// The rank's segments in local row order. InputError when the layout cannot express the plan.
std::vector<FusedRowCopy> fused_row_copies(const TpPlan& plan, int rank, FusedQkvLayout layout);

// The shard's q_proj, k_proj or v_proj (or its bias), by projection.
Tensor& shard_projection(Parameters& shard, Projection projection);
const Tensor& shard_projection(const Parameters& shard, Projection projection);
std::optional<Tensor>& shard_bias(Parameters& shard, Projection projection);
const std::optional<Tensor>& shard_bias(const Parameters& shard, Projection projection);

// The rank's fused QKV from its shard. InputError when the layout cannot express the plan.
FusedQkv fuse_qkv(const Parameters& shard, const TpPlan& plan, int rank, FusedQkvLayout layout);

// The inverse: writes q_proj, k_proj, v_proj (and their biases) of `shard` from the fused tensors.
// Also takes fused gradients back to the shard layout.
void split_qkv(const FusedQkv& fused, const TpPlan& plan, int rank, FusedQkvLayout layout, Parameters& shard);

}  // namespace attncheck
