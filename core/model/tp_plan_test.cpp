// TP plans: the partitions of real models (including replicated KV heads) and the invariants every
// valid plan must keep, checked over a sweep of geometries and every valid TP size.
#include "core/model/tp_plan.hpp"

#include <gtest/gtest.h>

#include "core/errors/input_error.hpp"

namespace attncheck {
namespace {

Geometry geometry(std::int64_t hidden_size, std::int64_t num_heads, std::int64_t num_kv_heads,
                  std::optional<std::int64_t> head_dim) {
  return resolve_geometry(
      {.hidden_size = hidden_size, .num_heads = num_heads, .num_kv_heads = num_kv_heads, .head_dim = head_dim});
}

InputError tp_rejection(const Geometry& g, std::int64_t tp_size) {
  try {
    make_tp_plan(g, tp_size);
  } catch (const InputError& error) {
    return error;
  }
  ADD_FAILURE() << "tp_size " << tp_size << " was accepted";
  return InputError("none", {});
}

TEST(TpPlan, Qwen3_0_6bAtTp2SplitsHeadsAndWidths) {
  const TpPlan plan = make_tp_plan(geometry(1024, 16, 8, 128), 2);
  ASSERT_EQ(plan.ranks.size(), 2u);
  EXPECT_EQ(plan.kv_replicas, 1);
  const RankPlan& rank1 = plan.ranks[1];
  EXPECT_EQ(rank1.q_heads, (IndexRange{8, 16}));
  EXPECT_EQ(rank1.kv_heads, (IndexRange{4, 8}));
  EXPECT_EQ(rank1.replica_group, 1);
  EXPECT_EQ(rank1.query_width, 1024);  // query_width / P, not hidden_size / P
  EXPECT_EQ(rank1.kv_width, 512);
  EXPECT_EQ(rank1.qkv_rows, 2048);  // 1024 + 2 x 512
  EXPECT_EQ(rank1.q_proj_rows, (IndexRange{1024, 2048}));
  EXPECT_EQ(rank1.kv_proj_rows, (IndexRange{512, 1024}));
  EXPECT_EQ(rank1.o_proj_columns, (IndexRange{1024, 2048}));
  EXPECT_EQ(rank1.params.qkv_weight, 2048 * 1024);
  EXPECT_EQ(rank1.params.o_proj_weight, 1024 * 1024);
  EXPECT_EQ(rank1.kv_cache_elements_per_token, 2 * 512);
  EXPECT_EQ(plan.unsharded_params.qkv_weight, 4096 * 1024);
  EXPECT_EQ(plan.unsharded_params.o_proj_weight, 1024 * 2048);
}

TEST(TpPlan, Qwen3_32bAtTp16ReplicatesEachKvHeadTwice) {
  const TpPlan plan = make_tp_plan(geometry(5120, 64, 8, 128), 16);
  EXPECT_EQ(plan.kv_replicas, 2);
  ASSERT_EQ(plan.replica_groups.size(), 8u);
  for (const RankPlan& rank : plan.ranks) {
    EXPECT_EQ(rank.q_heads.size(), 4);
    EXPECT_EQ(rank.kv_heads, (IndexRange{rank.rank / 2, rank.rank / 2 + 1}));
    EXPECT_EQ(rank.replica_group, rank.rank / 2);
  }
  EXPECT_EQ(plan.replica_groups[3].ranks, (IndexRange{6, 8}));
  EXPECT_EQ(plan.replica_groups[3].kv_heads, (IndexRange{3, 4}));
}

TEST(TpPlan, Gemma3_270mReplicatesItsOneKvHead) {
  const Geometry gemma = geometry(640, 4, 1, 256);
  for (int tp_size : {2, 4}) {
    const TpPlan plan = make_tp_plan(gemma, tp_size);
    EXPECT_EQ(plan.kv_replicas, tp_size);
    ASSERT_EQ(plan.replica_groups.size(), 1u);
    EXPECT_EQ(plan.replica_groups[0].ranks, (IndexRange{0, tp_size}));
    for (const RankPlan& rank : plan.ranks) {
      EXPECT_EQ(rank.kv_heads, (IndexRange{0, 1}));
      EXPECT_EQ(rank.query_width, 1024 / tp_size);
      // KV memory per rank does not shrink at all, while query width does.
      EXPECT_EQ(rank.kv_cache_elements_per_token, plan.unsharded_kv_cache_elements_per_token);
    }
    EXPECT_GT(plan.total_params_over_ranks().qkv_weight, plan.unsharded_params.qkv_weight);
    EXPECT_EQ(plan.total_params_over_ranks().o_proj_weight, plan.unsharded_params.o_proj_weight);
  }
}

TEST(TpPlan, GptNeox20bDerivedHeadDimKeepsItsOldPartition) {
  const Geometry neox = resolve_geometry({.hidden_size = 6144, .num_heads = 64});
  const TpPlan plan = make_tp_plan(neox, 8);
  for (const RankPlan& rank : plan.ranks) {
    EXPECT_EQ(rank.query_width, 6144 / 8);  // hidden_size / P, as before head_dim existed
    EXPECT_EQ(rank.qkv_rows, 3 * 6144 / 8);
  }
  EXPECT_EQ(plan.total_params_over_ranks(), plan.unsharded_params);
}

TEST(TpPlan, SplittingAQueryHeadIsRejectedWithValidSizes) {
  const InputError error = tp_rejection(geometry(1024, 16, 8, 128), 3);
  ASSERT_TRUE(error.names_field("tp_size"));
  const Violation& violation = error.violations().front();
  EXPECT_EQ(violation.value, "3");
  EXPECT_NE(violation.rule.find("would split a query head"), std::string::npos);
  EXPECT_NE(violation.rule.find("5.333 query heads per rank"), std::string::npos);
  EXPECT_NE(violation.suggestion.find("1, 2, 4, 8, 16"), std::string::npos);
  EXPECT_TRUE(tp_rejection(geometry(1024, 16, 8, 128), 32).names_field("tp_size"));
}

TEST(TpPlan, SplittingAKvHeadIsRejected) {
  const InputError error = tp_rejection(geometry(1536, 24, 6, 64), 4);
  EXPECT_NE(error.violations().front().rule.find("would split a KV head"), std::string::npos);
  EXPECT_NE(error.violations().front().rule.find("1.5 KV heads per rank"), std::string::npos);
  EXPECT_NE(error.violations().front().suggestion.find("1, 2, 3, 6, 12, 24"), std::string::npos);
}

TEST(TpPlan, UnevenReplicationIsRejected) {
  const InputError error = tp_rejection(geometry(3072, 48, 8, 64), 12);
  EXPECT_NE(error.violations().front().rule.find("cannot replicate KV heads evenly"), std::string::npos);
  EXPECT_NE(error.violations().front().rule.find("1.5 ranks per KV head"), std::string::npos);
}

TEST(TpPlan, NonPositiveTpSizeIsRejected) {
  EXPECT_NE(tp_rejection(geometry(1024, 16, 8, 128), 0).violations().front().rule.find("must be >= 1"),
            std::string::npos);
  EXPECT_TRUE(tp_rejection(geometry(1024, 16, 8, 128), -2).names_field("tp_size"));
}

TEST(TpPlan, ValidSizesFollowTheRules) {
  EXPECT_EQ(valid_tp_sizes(geometry(1024, 16, 8, 128)), (std::vector<std::int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(valid_tp_sizes(geometry(1536, 24, 6, 64)), (std::vector<std::int64_t>{1, 2, 3, 6, 12, 24}));
  EXPECT_EQ(valid_tp_sizes(geometry(3072, 48, 8, 64)), (std::vector<std::int64_t>{1, 2, 4, 8, 16, 24, 48}));
  EXPECT_EQ(valid_tp_sizes(geometry(640, 4, 1, 256)), (std::vector<std::int64_t>{1, 2, 4}));
}

// Invariants of every valid plan, over a sweep of group sizes, KV-head counts and TP sizes.
TEST(TpPlan, EveryValidPlanKeepsHeadsWholeAndGroupsIntact) {
  int plans_checked = 0;
  for (std::int64_t num_kv_heads : {1, 2, 3, 4, 6, 8}) {
    for (std::int64_t group_size : {1, 2, 3, 4, 8}) {
      const std::int64_t num_heads = num_kv_heads * group_size;
      const Geometry g = geometry(256, num_heads, num_kv_heads, 16);
      for (std::int64_t tp_size = 1; tp_size <= num_heads; ++tp_size) {
        const bool valid = num_heads % tp_size == 0 && (num_kv_heads % tp_size == 0 || tp_size % num_kv_heads == 0);
        if (!valid) {
          EXPECT_TRUE(tp_rejection(g, tp_size).names_field("tp_size"));
          continue;
        }
        const TpPlan plan = make_tp_plan(g, tp_size);
        ++plans_checked;
        std::vector<int> owner(static_cast<std::size_t>(num_heads), -1);
        std::vector<int> kv_holders(static_cast<std::size_t>(num_kv_heads), 0);
        std::int64_t query_width_sum = 0;
        for (const RankPlan& rank : plan.ranks) {
          query_width_sum += rank.query_width;
          for (std::int64_t h = rank.q_heads.begin; h < rank.q_heads.end; ++h) {
            EXPECT_EQ(owner[static_cast<std::size_t>(h)], -1) << "query head " << h << " on two ranks";
            owner[static_cast<std::size_t>(h)] = rank.rank;
            const std::int64_t kv_head = h / g.group_size();  // GQA: query head h reads KV head h / group_size
            EXPECT_TRUE(kv_head >= rank.kv_heads.begin && kv_head < rank.kv_heads.end)
                << "rank " << rank.rank << " lacks KV head " << kv_head << " of its query head " << h;
          }
          for (std::int64_t k = rank.kv_heads.begin; k < rank.kv_heads.end; ++k)
            ++kv_holders[static_cast<std::size_t>(k)];
          const ReplicaGroup& group = plan.replica_groups[static_cast<std::size_t>(rank.replica_group)];
          EXPECT_TRUE(rank.rank >= group.ranks.begin && rank.rank < group.ranks.end);
          EXPECT_EQ(group.kv_heads, rank.kv_heads);
          EXPECT_EQ(rank.qkv_rows, rank.query_width + 2 * rank.kv_width);
        }
        for (int holder : owner) EXPECT_NE(holder, -1);
        for (int holders : kv_holders) EXPECT_EQ(holders, plan.kv_replicas);
        EXPECT_EQ(query_width_sum, g.query_width());
        EXPECT_EQ(plan.kv_replicas, tp_size > num_kv_heads ? tp_size / num_kv_heads : 1);
      }
    }
  }
  EXPECT_GT(plans_checked, 60);
}


TEST(TpPlan, LatentAttentionSplitsHeadsAndReplicatesTheLatent) {
  // 4 heads of q/k 12 + 4 and v 8; q_lora 10, kv_lora 6; hidden 24.
  const Geometry geometry = resolve_geometry(
      {.hidden_size = 24,
       .num_heads = 4,
       .latent = LatentAttentionSpec{
           .q_lora_rank = 10, .kv_lora_rank = 6, .qk_nope_head_dim = 12, .qk_rope_head_dim = 4, .v_head_dim = 8}});
  const TpPlan plan = make_tp_plan(geometry, 2);
  EXPECT_EQ(plan.kv_replicas, 1);
  const RankPlan& rank = plan.ranks[1];
  EXPECT_EQ(rank.q_heads, (IndexRange{2, 4}));
  EXPECT_EQ(rank.q_proj_rows, (IndexRange{32, 64}));      // q_b_proj rows: 16 per head
  EXPECT_EQ(rank.kv_b_proj_rows, (IndexRange{40, 80}));   // kv_b_proj rows: 12 + 8 per head
  EXPECT_EQ(rank.o_proj_columns, (IndexRange{16, 32}));   // o_proj columns: 8 per head
  EXPECT_EQ(rank.value_width, 16);
  EXPECT_EQ(rank.kv_cache_elements_per_token, 2 * (16 + 8));
  EXPECT_EQ(rank.absorbed_cache_elements_per_token, 6 + 4);  // whole on every rank
  EXPECT_EQ(plan.unsharded_kv_cache_elements_per_token, 4 * (16 + 8));
  // Down-projections (10 + 10) x 24 and norms 10 + 6 on every rank; q_b 32 x 10 + kv_b 40 x 6 + o 24 x 16 each.
  EXPECT_EQ(rank.params.latent_down, (10 + 10) * 24);
  EXPECT_EQ(rank.params.latent_norms, 16);
  EXPECT_EQ(rank.params.latent_up, 32 * 10 + 40 * 6);
  EXPECT_EQ(rank.params.o_proj_weight, 24 * 16);
  EXPECT_EQ(rank.params.qkv_weight, 0);
  EXPECT_EQ(plan.total_params_over_ranks().total() - plan.unsharded_params.total(), (10 + 10) * 24 + 16);
  EXPECT_THROW(make_tp_plan(geometry, 8), InputError);  // a rank without a whole head
}

}  // namespace
}  // namespace attncheck
