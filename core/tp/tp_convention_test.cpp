#include "core/tp/tp_convention.hpp"

#include <gtest/gtest.h>

#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "core/tp/tp_shard.hpp"

namespace attncheck {
namespace {

constexpr std::int64_t kHeadDim = 128;

TpPlan qwen3_32b_plan(std::int64_t tp_size) {
  return make_tp_plan(resolve_geometry({.hidden_size = 5120, .num_heads = 64, .num_kv_heads = 8, .head_dim = kHeadDim}),
                      tp_size);
}

IndexRange heads(std::int64_t first, std::int64_t end) {
  return {first * kHeadDim, end * kHeadDim};
}

// 8 query heads over 2 KV heads of head_dim 4, biases and QK-norm: at TP 8 the equal blocks of
// (8 + 2*2) * 4 / 8 = 6 fused rows cut heads in half and spread a KV head's K rows over two ranks.
const GeometrySpec kSmallSpec = {.hidden_size = 5,
                                 .num_heads = 8,
                                 .num_kv_heads = 2,
                                 .head_dim = 4,
                                 .qk_norm = QkNorm::rms,
                                 .qkv_bias = true,
                                 .out_bias = true};

TEST(TpConvention, NamesParseAndListTheTwoConventions) {
  for (TpConvention convention : kAllTpConventions) EXPECT_EQ(parse_tp_convention(to_string(convention)), convention);
  EXPECT_EQ(parse_tp_convention("megatron"), std::nullopt);
  EXPECT_EQ(tp_convention_names(), "replicated-kv, megatron-equal-block");
}

TEST(TpConvention, Qwen3_32bAtTp16MegatronSplitsEachKvGroupOverTwoRanks) {
  const TpPlan plan = qwen3_32b_plan(16);
  const std::vector<RankHoldings> megatron = rank_holdings(plan, TpConvention::megatron_equal_block);
  const std::vector<RankHoldings> replicated = rank_holdings(plan, TpConvention::replicated_kv);
  ASSERT_EQ(megatron.size(), 16u);
  // Fused rows per KV group: 8 query heads + K + V = 10 heads; 16 blocks of 5 heads' rows.
  for (int g = 0; g < 8; ++g) {
    const RankHoldings& even = megatron[2 * g];
    const RankHoldings& odd = megatron[2 * g + 1];
    EXPECT_EQ(even.q_proj_rows, heads(8 * g, 8 * g + 5)) << "rank " << 2 * g;  // q heads 8g .. 8g+4
    EXPECT_EQ(even.k_proj_rows.size(), 0);
    EXPECT_EQ(even.v_proj_rows.size(), 0);
    EXPECT_EQ(odd.q_proj_rows, heads(8 * g + 5, 8 * g + 8)) << "rank " << 2 * g + 1;  // 8g+5 .. 8g+7
    EXPECT_EQ(odd.k_proj_rows, heads(g, g + 1));                                      // group g's K and V
    EXPECT_EQ(odd.v_proj_rows, heads(g, g + 1));
  }
  for (int r = 0; r < 16; ++r) {
    // Both compute query heads 4r .. 4r+3 and hold their o_proj columns; replicated-kv holds KV head r/2 twice.
    EXPECT_EQ(megatron[r].q_heads, (IndexRange{4 * r, 4 * r + 4}));
    EXPECT_EQ(megatron[r].o_proj_columns, heads(4 * r, 4 * r + 4));
    EXPECT_EQ(megatron[r].o_proj_columns, replicated[r].o_proj_columns);
    EXPECT_EQ(replicated[r].q_proj_rows, heads(4 * r, 4 * r + 4));
    EXPECT_EQ(replicated[r].k_proj_rows, heads(r / 2, r / 2 + 1));
  }
}

TEST(TpConvention, WherePDividesTheKvHeadsMegatronHoldsWhatReplicatedKvHolds) {
  for (std::int64_t tp_size : {1, 2, 4, 8}) {  // Qwen3-32B, P <= H_kv = 8
    const TpPlan plan = qwen3_32b_plan(tp_size);
    EXPECT_EQ(rank_holdings(plan, TpConvention::megatron_equal_block), rank_holdings(plan, TpConvention::replicated_kv))
        << "tp " << tp_size;
  }
  const TpPlan small = make_tp_plan(resolve_geometry(kSmallSpec), 2);
  EXPECT_EQ(rank_holdings(small, TpConvention::megatron_equal_block),
            rank_holdings(small, TpConvention::replicated_kv));
}

TEST(TpConvention, EqualBlocksNeedNotBeWholeHeads) {
  const TpPlan plan = make_tp_plan(resolve_geometry(kSmallSpec), 8);
  const std::vector<RankHoldings> held = rank_holdings(plan, TpConvention::megatron_equal_block);
  // Group 0's fused rows: q 0-15, k 16-19, v 20-23; group 1's the next 24. Blocks of 6.
  EXPECT_EQ(held[0].q_proj_rows, (IndexRange{0, 6}));
  EXPECT_EQ(held[1].q_proj_rows, (IndexRange{6, 12}));
  EXPECT_EQ(held[2].q_proj_rows, (IndexRange{12, 16}));
  EXPECT_EQ(held[2].k_proj_rows, (IndexRange{0, 2}));
  EXPECT_EQ(held[2].v_proj_rows.size(), 0);
  EXPECT_EQ(held[3].q_proj_rows.size(), 0);
  EXPECT_EQ(held[3].k_proj_rows, (IndexRange{2, 4}));
  EXPECT_EQ(held[3].v_proj_rows, (IndexRange{0, 4}));
  EXPECT_EQ(held[4].q_proj_rows, (IndexRange{16, 22}));
  EXPECT_EQ(held[7].k_proj_rows, (IndexRange{6, 8}));
  EXPECT_EQ(held[7].v_proj_rows, (IndexRange{4, 8}));
  // Every row of each projection is held exactly once, in rank order.
  std::int64_t q_end = 0, k_end = 0, v_end = 0;
  for (const RankHoldings& rank : held) {
    if (rank.q_proj_rows.size() > 0) {
      EXPECT_EQ(rank.q_proj_rows.begin, q_end);
    }
    if (rank.k_proj_rows.size() > 0) {
      EXPECT_EQ(rank.k_proj_rows.begin, k_end);
    }
    if (rank.v_proj_rows.size() > 0) {
      EXPECT_EQ(rank.v_proj_rows.begin, v_end);
    }
    q_end += rank.q_proj_rows.size();
    k_end += rank.k_proj_rows.size();
    v_end += rank.v_proj_rows.size();
  }
  EXPECT_EQ(q_end, 32);
  EXPECT_EQ(k_end, 8);
  EXPECT_EQ(v_end, 8);
  const Parameters shapes = held_parameters(plan.geometry, held[3]);
  EXPECT_EQ(shapes.q_proj.shape, (Shape{0, 5}));
  EXPECT_EQ(shapes.k_proj.shape, (Shape{2, 5}));
  EXPECT_EQ(shapes.v_bias->shape, (Shape{4}));
  EXPECT_EQ(shapes.o_proj.shape, (Shape{5, 4}));  // it computes query head 3
  EXPECT_EQ(shapes.o_bias->shape, (Shape{5}));
  EXPECT_EQ(shapes.k_norm->shape, (Shape{4}));
}

TEST(TpConvention, AnUnpartitionableSizeIsBadInputNamingTheSizesThatWork) {
  // (8 + 2*1) * 2 = 20 fused rows do not divide into 8 blocks; TP 8 is a valid replicated-kv plan.
  const TpPlan plan =
      make_tp_plan(resolve_geometry({.hidden_size = 16, .num_heads = 8, .num_kv_heads = 1, .head_dim = 2}), 8);
  EXPECT_EQ(rank_holdings(plan, TpConvention::replicated_kv).size(), 8u);
  try {
    rank_holdings(plan, TpConvention::megatron_equal_block);
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("tp_convention"));
    const std::string message = error.what();
    EXPECT_NE(message.find("20 fused QKV rows"), std::string::npos) << message;
    EXPECT_NE(message.find("tp_size 1, 2, 4 under megatron-equal-block"), std::string::npos) << message;
  }
}

TEST(TpConvention, RegroupRoundTripsReplicatedToEqualBlockAndBack) {
  const Geometry geometry = resolve_geometry(kSmallSpec);
  for (std::int64_t tp_size : {2, 4, 8}) {
    const TpPlan plan = make_tp_plan(geometry, tp_size);
    const Parameters full = generate_weights(geometry, 7);  // stands in for the layer's full gradients
    const std::vector<Parameters> replicated = rank_slices(full, plan);
    const std::vector<Parameters> megatron =
        regroup_rank_gradients(replicated, plan, TpConvention::replicated_kv, TpConvention::megatron_equal_block);
    const std::vector<RankHoldings> held = rank_holdings(plan, TpConvention::megatron_equal_block);
    for (int r = 0; r < plan.tp_size; ++r) {
      // Each held row is the full tensor's row.
      const Parameters& rank = megatron[r];
      ASSERT_EQ(rank.k_proj.shape, (Shape{held[r].k_proj_rows.size(), 5})) << "tp " << tp_size << " rank " << r;
      for (std::int64_t i = 0; i < held[r].k_proj_rows.size() * 5; ++i) {
        EXPECT_EQ(rank.k_proj.values[i], full.k_proj.values[held[r].k_proj_rows.begin * 5 + i]);
      }
      for (std::int64_t i = 0; i < held[r].q_proj_rows.size(); ++i) {
        EXPECT_EQ(rank.q_bias->values[i], full.q_bias->values[held[r].q_proj_rows.begin + i]);
      }
      EXPECT_EQ(rank.o_proj, replicated[r].o_proj);
      EXPECT_EQ(rank.q_norm, full.q_norm);
    }
    EXPECT_EQ(regroup_rank_gradients(megatron, plan, TpConvention::megatron_equal_block, TpConvention::replicated_kv),
              replicated)
        << "tp " << tp_size;
  }
}

TEST(TpConvention, EachLineComesFromTheSameRankWhenItHoldsItElseTheLowestHolder) {
  const Geometry geometry = resolve_geometry(kSmallSpec);
  const TpPlan plan = make_tp_plan(geometry, 8);  // replicated-kv: KV head 0 on ranks 0-3
  std::vector<Parameters> replicated = rank_slices(generate_weights(geometry, 11), plan);
  // Replicas that disagree (a faulty reduction) stay as they are when nothing is regrouped ...
  for (double& value : replicated[1].k_proj.values) value += 1.0;
  const std::vector<RankHoldings> replicated_held = rank_holdings(plan, TpConvention::replicated_kv);
  std::vector<const Tensor*> sources;
  for (const Parameters& rank : replicated) sources.push_back(&rank.k_proj);
  const std::vector<Tensor> same = regroup_lines("k_proj", sources, replicated_held, replicated_held, LineAxis::rows);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(same[r], replicated[r].k_proj) << r;
  // ... and under megatron-equal-block K rows 2-3 of KV head 0 live on rank 3 alone: regrouped back to
  // replicated-kv, ranks 0-2 (which do not hold them there) take them from rank 3, the lowest holder.
  std::vector<Parameters> megatron =
      regroup_rank_gradients(replicated, plan, TpConvention::replicated_kv, TpConvention::megatron_equal_block);
  for (double& value : megatron[3].k_proj.values) value = -1.0;
  const std::vector<Parameters> back =
      regroup_rank_gradients(megatron, plan, TpConvention::megatron_equal_block, TpConvention::replicated_kv);
  for (int r = 0; r < 4; ++r) {
    for (std::int64_t i = 2 * 5; i < 4 * 5; ++i) EXPECT_EQ(back[r].k_proj.values[i], -1.0) << r << " " << i;
    for (std::int64_t i = 0; i < 2 * 5; ++i) EXPECT_NE(back[r].k_proj.values[i], -1.0) << r << " " << i;
  }
}

TEST(TpConvention, RegroupRefusesTensorsThatDisagreeWithTheirHoldings) {
  const TpPlan plan = make_tp_plan(resolve_geometry(kSmallSpec), 2);
  const std::vector<RankHoldings> held = rank_holdings(plan, TpConvention::replicated_kv);
  const Tensor right({16, 5}), wrong({15, 5});
  EXPECT_THROW(regroup_lines("q_proj", {&right, &wrong}, held, held, LineAxis::rows), std::invalid_argument);
  EXPECT_THROW(regroup_lines("q_proj", {&right, nullptr}, held, held, LineAxis::rows), std::invalid_argument);
  EXPECT_THROW(held_lines(held[0], "x"), std::invalid_argument);
  EXPECT_EQ(held_lines(held[0], "q_norm"), std::nullopt);
}

}  // namespace
}  // namespace attncheck
