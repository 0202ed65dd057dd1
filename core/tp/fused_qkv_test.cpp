// Fused QKV layouts: exact row maps for known cases, and, for every layout and plan of a sweep, that the
// local rows are covered without gaps and every HF row lands where the plan says (K/V rows once per
// replica).
#include "core/tp/fused_qkv.hpp"

#include <map>

#include <gtest/gtest.h>

#include "core/errors/input_error.hpp"

namespace attncheck {
namespace {

TpPlan plan_for(std::int64_t hidden_size, std::int64_t num_heads, std::int64_t num_kv_heads, std::int64_t head_dim,
                std::int64_t tp_size) {
  return make_tp_plan(
      resolve_geometry(
          {.hidden_size = hidden_size, .num_heads = num_heads, .num_kv_heads = num_kv_heads, .head_dim = head_dim}),
      tp_size);
}

FusedRowSegment segment(Projection projection, std::int64_t head, IndexRange local, IndexRange source) {
  return {projection, head, local, source};
}

TEST(FusedQkv, StackedPutsAllQueriesFirst) {
  const TpPlan plan = plan_for(1024, 16, 8, 128, 2);  // Qwen3-0.6B at TP 2
  const auto segments = fused_qkv_segments(plan, 1, FusedQkvLayout::stacked);
  ASSERT_EQ(segments.size(), 8u + 4u + 4u);
  EXPECT_EQ(segments[0], segment(Projection::q, 8, {0, 128}, {1024, 1152}));
  EXPECT_EQ(segments[8], segment(Projection::k, 4, {1024, 1152}, {512, 640}));
  EXPECT_EQ(segments[12], segment(Projection::v, 4, {1536, 1664}, {512, 640}));
  EXPECT_EQ(segments.back().local_rows.end, 2048);
}

TEST(FusedQkv, GroupedInterleavesEachKvGroup) {
  const TpPlan plan = plan_for(1024, 16, 8, 128, 1);
  const auto segments = fused_qkv_segments(plan, 0, FusedQkvLayout::grouped);
  EXPECT_EQ(segments[0], segment(Projection::q, 0, {0, 128}, {0, 128}));
  EXPECT_EQ(segments[1], segment(Projection::q, 1, {128, 256}, {128, 256}));
  EXPECT_EQ(segments[2], segment(Projection::k, 0, {256, 384}, {0, 128}));
  EXPECT_EQ(segments[3], segment(Projection::v, 0, {384, 512}, {0, 128}));
  EXPECT_EQ(segments[4], segment(Projection::q, 2, {512, 640}, {256, 384}));
}

TEST(FusedQkv, NeoxGqaIsTheRanksQueryThenKeyThenValueHeads) {
  // Since EleutherAI/gpt-neox#1315: torch.split(local query width, local KV width, local KV width).
  const TpPlan plan = plan_for(1024, 16, 8, 128, 2);
  EXPECT_EQ(fused_qkv_segments(plan, 1, FusedQkvLayout::neox), fused_qkv_segments(plan, 1, FusedQkvLayout::stacked));
  const auto segments = fused_qkv_segments(plan, 1, FusedQkvLayout::neox);
  EXPECT_EQ(segments[0], segment(Projection::q, 8, {0, 128}, {1024, 1152}));
  EXPECT_EQ(segments[8], segment(Projection::k, 4, {1024, 1152}, {512, 640}));
  EXPECT_EQ(segments[12], segment(Projection::v, 4, {1536, 1664}, {512, 640}));
}

TEST(FusedQkv, NeoxBefore1315SlicesKvAcrossItsQueryHeads) {
  const TpPlan plan = plan_for(1024, 16, 8, 128, 1);  // group 2: 64 rows of K and V per query head
  const auto segments = fused_qkv_segments(plan, 0, FusedQkvLayout::neox_before_1315);
  EXPECT_EQ(segments[0], segment(Projection::q, 0, {0, 128}, {0, 128}));
  EXPECT_EQ(segments[1], segment(Projection::k, 0, {128, 192}, {0, 64}));
  EXPECT_EQ(segments[2], segment(Projection::v, 0, {192, 256}, {0, 64}));
  EXPECT_EQ(segments[3], segment(Projection::q, 1, {256, 384}, {128, 256}));
  EXPECT_EQ(segments[4], segment(Projection::k, 0, {384, 448}, {64, 128}));
  EXPECT_EQ(segments[7], segment(Projection::k, 1, {640, 704}, {128, 192}));
}

TEST(FusedQkv, NeoxMhaIsPerHeadQkv) {
  const TpPlan plan = plan_for(6144, 64, 64, 96, 4);
  const auto segments = fused_qkv_segments(plan, 2, FusedQkvLayout::neox);
  const auto grouped = fused_qkv_segments(plan, 2, FusedQkvLayout::grouped);
  EXPECT_EQ(segments, grouped);  // g = 1: both are [q_h | k_h | v_h] per head
  EXPECT_EQ(segments, fused_qkv_segments(plan, 2, FusedQkvLayout::neox_before_1315));  // #1315 left MHA alone
  EXPECT_EQ(segments[0], segment(Projection::q, 32, {0, 96}, {3072, 3168}));
  EXPECT_EQ(segments[1], segment(Projection::k, 32, {96, 192}, {3072, 3168}));
}

TEST(FusedQkv, NeoxLayoutIsUnavailableWhereNeoxCannotRun) {
  const TpPlan replicated = plan_for(640, 4, 1, 256, 4);
  EXPECT_NE(fused_layout_unsupported(replicated, FusedQkvLayout::neox), std::nullopt);
  EXPECT_NE(fused_layout_unsupported(replicated, FusedQkvLayout::neox_before_1315), std::nullopt);
  EXPECT_THROW(fused_qkv_segments(replicated, 0, FusedQkvLayout::neox), InputError);
  EXPECT_EQ(fused_layout_unsupported(replicated, FusedQkvLayout::stacked), std::nullopt);

  // The order before #1315 only where its float arithmetic came out exact; today's split has no such limit.
  const TpPlan fractional = plan_for(64, 8, 1, 6, 1);  // head_dim 6 over group 8: 0.75 rows each
  EXPECT_NE(fused_layout_unsupported(fractional, FusedQkvLayout::neox_before_1315), std::nullopt);
  EXPECT_EQ(fused_layout_unsupported(fractional, FusedQkvLayout::neox), std::nullopt);

  // head_dim 120, group 3: 120 / 3 = 40 is whole, but NeoX computed int(120 * (1 + 2 * (1/3))) = 199, not 200,
  // and its reshape failed.
  const TpPlan float_trap = plan_for(360, 3, 1, 120, 1);
  EXPECT_NE(fused_layout_unsupported(float_trap, FusedQkvLayout::neox_before_1315), std::nullopt);
  EXPECT_EQ(fused_layout_unsupported(float_trap, FusedQkvLayout::neox), std::nullopt);
  EXPECT_EQ(fused_layout_unsupported(plan_for(256, 2, 1, 128, 1), FusedQkvLayout::neox_before_1315), std::nullopt);
}

TEST(FusedQkv, RankOutOfRangeIsRejected) {
  const TpPlan plan = plan_for(1024, 16, 8, 128, 2);
  EXPECT_THROW(fused_qkv_segments(plan, 2, FusedQkvLayout::stacked), InputError);
  EXPECT_THROW(fused_qkv_segments(plan, -1, FusedQkvLayout::grouped), InputError);
}

TEST(FusedQkv, EveryLayoutCoversEveryRowOncePerReplica) {
  int layouts_checked = 0;
  for (std::int64_t num_kv_heads : {1, 2, 4}) {
    for (std::int64_t group_size : {1, 2, 4}) {
      const std::int64_t num_heads = num_kv_heads * group_size;
      for (std::int64_t tp_size = 1; tp_size <= num_heads; ++tp_size) {
        if (num_heads % tp_size != 0 || (num_kv_heads % tp_size != 0 && tp_size % num_kv_heads != 0)) continue;
        const TpPlan plan = plan_for(128, num_heads, num_kv_heads, 8, tp_size);
        for (FusedQkvLayout layout : kAllFusedQkvLayouts) {
          if (fused_layout_unsupported(plan, layout)) continue;
          ++layouts_checked;
          // (projection, source row) -> how many ranks hold it
          std::map<std::pair<Projection, std::int64_t>, int> holders;
          for (const RankPlan& rank : plan.ranks) {
            std::int64_t next_row = 0;
            const auto segments = fused_qkv_segments(plan, rank.rank, layout);
            // In the interleaved layouts each query head is followed (after its group's other query heads
            // in grouped) by K and V of its own KV head: h / group_size. neox is interleaved for MHA only (its
            // GQA is the rank's [Q | K | V]).
            const bool interleaved = layout == FusedQkvLayout::grouped || layout == FusedQkvLayout::neox_before_1315 ||
                                     (layout == FusedQkvLayout::neox && plan.geometry.group_size() == 1);
            if (interleaved) {
              for (std::size_t i = 0; i < segments.size(); ++i) {
                if (segments[i].projection != Projection::q) continue;
                std::size_t k = i;
                while (segments[k].projection == Projection::q) ++k;
                EXPECT_EQ(segments[k].projection, Projection::k);
                EXPECT_EQ(segments[k].head, segments[i].head / plan.geometry.group_size());
                EXPECT_EQ(segments[k + 1].projection, Projection::v);
                EXPECT_EQ(segments[k + 1].head, segments[k].head);
              }
            }
            for (const FusedRowSegment& s : segments) {
              EXPECT_EQ(s.local_rows.begin, next_row);
              EXPECT_EQ(s.local_rows.size(), s.source_rows.size());
              next_row = s.local_rows.end;
              const bool query = s.projection == Projection::q;
              const IndexRange owned = query ? rank.q_heads : rank.kv_heads;
              EXPECT_TRUE(s.head >= owned.begin && s.head < owned.end);
              EXPECT_TRUE(s.source_rows.begin >= s.head * 8 && s.source_rows.end <= (s.head + 1) * 8);
              for (std::int64_t row = s.source_rows.begin; row < s.source_rows.end; ++row) {
                ++holders[{s.projection, row}];
              }
            }
            EXPECT_EQ(next_row, rank.qkv_rows);
          }
          const auto geometry = plan.geometry;
          for (std::int64_t row = 0; row < geometry.query_width(); ++row) EXPECT_EQ((holders[{Projection::q, row}]), 1);
          for (Projection kv : {Projection::k, Projection::v}) {
            for (std::int64_t row = 0; row < geometry.kv_width(); ++row) {
              EXPECT_EQ((holders[{kv, row}]), plan.kv_replicas);
            }
          }
        }
      }
    }
  }
  EXPECT_GT(layouts_checked, 40);
}

}  // namespace
}  // namespace attncheck
