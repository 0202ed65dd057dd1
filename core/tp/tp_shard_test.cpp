#include "core/tp/tp_shard.hpp"

#include <gtest/gtest.h>

#include "core/generation/input_generation.hpp"

namespace attncheck {
namespace {

// 8 query heads, 2 KV heads, head_dim 4, hidden 5: TP 4 replicates each KV head on 2 ranks.
const GeometrySpec kSpec = {.hidden_size = 5,
                            .num_heads = 8,
                            .num_kv_heads = 2,
                            .head_dim = 4,
                            .qk_norm = QkNorm::rms,
                            .qkv_bias = true,
                            .out_bias = true};

TEST(TpShard, ShardsHoldTheRowsAndColumnsOfTheirHeads) {
  const Geometry geometry = resolve_geometry(kSpec);
  const TpPlan plan = make_tp_plan(geometry, 4);
  const Parameters full = generate_weights(geometry, 1);
  for (int r = 0; r < 4; ++r) {
    const Parameters shard = shard_parameters(full, plan, r);
    EXPECT_EQ(shard.q_proj.shape, (Shape{8, 5}));  // 2 query heads * 4
    EXPECT_EQ(shard.k_proj.shape, (Shape{4, 5}));  // its one (replicated) KV head
    EXPECT_EQ(shard.o_proj.shape, (Shape{5, 8}));
    // q_proj row i of rank r is full row r*8 + i; o_proj column c is full column r*8 + c;
    // k_proj row i is full row (r / 2) * 4 + i (KV head r / kv_replicas).
    for (int i = 0; i < 8; ++i) {
      for (int c = 0; c < 5; ++c) {
        EXPECT_EQ(shard.q_proj.values[i * 5 + c], full.q_proj.values[(r * 8 + i) * 5 + c]);
        EXPECT_EQ(shard.o_proj.values[c * 8 + i], full.o_proj.values[c * 32 + r * 8 + i]);
      }
    }
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(shard.k_proj.values[i * 5], full.k_proj.values[((r / 2) * 4 + i) * 5]);
      EXPECT_EQ(shard.v_bias->values[i], full.v_bias->values[(r / 2) * 4 + i]);
    }
    EXPECT_EQ(shard.o_bias, full.o_bias);
    EXPECT_EQ(shard.q_norm, full.q_norm);
  }
}

TEST(TpShard, AssemblySumsReplicasOnlyWithinTheirGroup) {
  const Geometry geometry = resolve_geometry(kSpec);
  const TpPlan plan = make_tp_plan(geometry, 4);
  const Parameters full = generate_weights(geometry, 2);
  // Partial "gradients" = the shards themselves: owned tensors come back unchanged, a replicated KV
  // head comes back times its 2 replicas (not times 4 ranks), q_norm times 4 ranks, o_bias once.
  std::vector<Parameters> partials;
  for (int r = 0; r < 4; ++r) partials.push_back(shard_parameters(full, plan, r));
  const Parameters assembled = assemble_gradients(partials, plan);
  EXPECT_EQ(assembled.q_proj, full.q_proj);
  EXPECT_EQ(assembled.o_proj, full.o_proj);
  EXPECT_EQ(assembled.q_bias, full.q_bias);
  for (std::size_t i = 0; i < full.k_proj.values.size(); ++i) {
    EXPECT_EQ(assembled.k_proj.values[i], 2 * full.k_proj.values[i]);
    EXPECT_EQ(assembled.v_proj.values[i], 2 * full.v_proj.values[i]);
  }
  for (std::size_t i = 0; i < full.q_norm->values.size(); ++i) {
    EXPECT_EQ(assembled.q_norm->values[i], 4 * full.q_norm->values[i]);
  }
  EXPECT_EQ(assembled.o_bias, full.o_bias);
  const std::vector<Parameters> reduced = reduce_rank_gradients(partials, plan);
  ASSERT_EQ(reduced.size(), 4u);
  EXPECT_EQ(reduced[0].k_proj, reduced[1].k_proj);  // same replica group: same reduced gradient
  EXPECT_NE(reduced[1].k_proj, reduced[2].k_proj);  // different groups
}

TEST(TpShard, WithoutReplicationShardAndAssembleRoundTrip) {
  const Geometry geometry = resolve_geometry(kSpec);
  const TpPlan plan = make_tp_plan(geometry, 2);
  const Parameters full = generate_weights(geometry, 3);
  std::vector<Parameters> shards;
  for (int r = 0; r < 2; ++r) shards.push_back(shard_parameters(full, plan, r));
  Parameters assembled = assemble_gradients(shards, plan);
  // Everything but the replicated-on-every-rank q_norm/k_norm comes back exactly.
  assembled.q_norm = full.q_norm;
  assembled.k_norm = full.k_norm;
  EXPECT_EQ(assembled, full);
}

TEST(TpShard, GatherInvertsRankSlicesAndTakesEachSliceFromItsFirstRank) {
  const Geometry geometry = resolve_geometry(kSpec);
  const TpPlan plan = make_tp_plan(geometry, 4);  // each KV head on 2 ranks
  const Parameters full = generate_weights(geometry, 5);
  std::vector<Parameters> slices = rank_slices(full, plan);
  EXPECT_EQ(gather_gradients(slices, plan), full);
  // Where replicas disagree (a faulty reduction), the first rank of the replica group wins.
  for (double& value : slices[1].k_proj.values) value += 1.0;
  for (double& value : slices[2].k_proj.values) value += 1.0;
  const Parameters gathered = gather_gradients(slices, plan);
  const std::int64_t kv_rows_per_rank = plan.ranks[0].kv_width;
  const std::int64_t hidden = geometry.hidden_size();
  for (std::int64_t i = 0; i < 2 * kv_rows_per_rank * hidden; ++i) {
    const bool from_rank_two = i >= kv_rows_per_rank * hidden;  // KV head 1: ranks 2 and 3
    EXPECT_EQ(gathered.k_proj.values[i], full.k_proj.values[i] + (from_rank_two ? 1.0 : 0.0)) << i;
  }
  slices.pop_back();
  EXPECT_THROW(gather_gradients(slices, plan), std::logic_error);
}

TEST(TpShard, AssemblerRefusesMissingOrExtraRanks) {
  const Geometry geometry = resolve_geometry(kSpec);
  const TpPlan plan = make_tp_plan(geometry, 2);
  const Parameters full = generate_weights(geometry, 4);
  GradientAssembler short_of_ranks(plan);
  short_of_ranks.add_rank(shard_parameters(full, plan, 0));
  EXPECT_THROW(std::move(short_of_ranks).finish(), std::logic_error);
  GradientAssembler too_many(plan);
  too_many.add_rank(shard_parameters(full, plan, 0));
  too_many.add_rank(shard_parameters(full, plan, 1));
  EXPECT_THROW(too_many.add_rank(shard_parameters(full, plan, 1)), std::logic_error);
}

}  // namespace
}  // namespace attncheck
