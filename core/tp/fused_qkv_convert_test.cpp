// Round trips of the fused-QKV converters: HF -> shard -> fused (every layout) -> shard gives the shard
// back exactly; converting between layouts through the shard preserves every value; and the stacked
// layout's rows are [Q | K | V] of the rank's heads.
#include <gtest/gtest.h>

#include "core/generation/input_generation.hpp"
#include "core/tp/fused_qkv_convert.hpp"
#include "core/tp/tp_shard.hpp"

namespace attncheck {
namespace {

struct Layer {
  GeometrySpec spec;
  std::int64_t tp_size;
};

class FusedQkvConvertTest : public ::testing::TestWithParam<Layer> {};

TEST_P(FusedQkvConvertTest, EveryLayoutRoundTripsThroughTheShard) {
  const Geometry geometry = resolve_geometry(GetParam().spec);
  const TpPlan plan = make_tp_plan(geometry, GetParam().tp_size);
  const Parameters full = generate_weights(geometry, 17);
  for (int rank = 0; rank < plan.tp_size; ++rank) {
    const Parameters shard = shard_parameters(full, plan, rank);
    for (const FusedQkvLayout layout : kAllFusedQkvLayouts) {
      if (fused_layout_unsupported(plan, layout)) continue;
      const FusedQkv fused = fuse_qkv(shard, plan, rank, layout);
      EXPECT_EQ(fused.weight.shape, (Shape{plan.ranks[rank].qkv_rows, geometry.hidden_size()}));
      Parameters back = shard;
      back.q_proj.values.assign(back.q_proj.values.size(), 0.0);
      back.k_proj.values.assign(back.k_proj.values.size(), 0.0);
      split_qkv(fused, plan, rank, layout, back);
      EXPECT_EQ(back.q_proj.values, shard.q_proj.values) << to_string(layout) << " rank " << rank;
      EXPECT_EQ(back.k_proj.values, shard.k_proj.values) << to_string(layout) << " rank " << rank;
      EXPECT_EQ(back.v_proj.values, shard.v_proj.values) << to_string(layout) << " rank " << rank;
      if (shard.q_bias) {
        EXPECT_EQ(back.q_bias->values, shard.q_bias->values);
        EXPECT_EQ(back.k_bias->values, shard.k_bias->values);
        EXPECT_EQ(back.v_bias->values, shard.v_bias->values);
      }
    }
  }
}

TEST_P(FusedQkvConvertTest, StackedIsQueriesThenKeysThenValues) {
  const Geometry geometry = resolve_geometry(GetParam().spec);
  const TpPlan plan = make_tp_plan(geometry, GetParam().tp_size);
  const Parameters full = generate_weights(geometry, 18);
  const std::int64_t hidden = geometry.hidden_size();
  for (int rank = 0; rank < plan.tp_size; ++rank) {
    const Parameters shard = shard_parameters(full, plan, rank);
    const FusedQkv fused = fuse_qkv(shard, plan, rank, FusedQkvLayout::stacked);
    const std::int64_t q_values = shard.q_proj.numel();
    const std::int64_t kv_values = shard.k_proj.numel();
    EXPECT_TRUE(std::equal(shard.q_proj.values.begin(), shard.q_proj.values.end(), fused.weight.values.begin()));
    EXPECT_TRUE(
        std::equal(shard.k_proj.values.begin(), shard.k_proj.values.end(), fused.weight.values.begin() + q_values));
    EXPECT_TRUE(std::equal(shard.v_proj.values.begin(), shard.v_proj.values.end(),
                           fused.weight.values.begin() + q_values + kv_values));
    EXPECT_EQ(q_values + 2 * kv_values, plan.ranks[rank].qkv_rows * hidden);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layers, FusedQkvConvertTest,
    ::testing::Values(Layer{{.hidden_size = 24, .num_heads = 4, .num_kv_heads = 2, .head_dim = 6, .qkv_bias = true}, 2},
                      Layer{{.hidden_size = 16, .num_heads = 8, .num_kv_heads = 2, .head_dim = 4}, 4},
                      Layer{{.hidden_size = 10, .num_heads = 4, .num_kv_heads = 1, .head_dim = 8, .qkv_bias = true}, 4},
                      Layer{{.hidden_size = 32, .num_heads = 4, .head_dim = 8}, 1}));

}  // namespace
}  // namespace attncheck
