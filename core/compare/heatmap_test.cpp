#include "core/compare/heatmap.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/compare/sketch.hpp"
#include "core/generation/input_generation.hpp"
#include "core/tp/tp_shard.hpp"

namespace attncheck {
namespace {

// 4 query heads, 2 KV heads, head_dim 4, hidden 6; TP 4 replicates each KV head on two ranks.
const GeometrySpec kSpec = {.hidden_size = 6, .num_heads = 4, .num_kv_heads = 2, .head_dim = 4, .qkv_bias = true};

Case small_case(int tp_size = 1) {
  return generate_case(resolve_geometry(kSpec), {.seed = 5, .batch = 2, .seq = 5, .tp_size = tp_size});
}

// Tensors whose values are 1 + their index (distinct, never zero), so that a tolerance exists.
Tensor counting(Shape shape) {
  Tensor tensor(std::move(shape));
  for (std::int64_t i = 0; i < tensor.numel(); ++i) tensor.values[i] = 1.0 + static_cast<double>(i);
  return tensor;
}

const Heatmap* find_map(const std::vector<Heatmap>& maps, const std::string& title) {
  for (const Heatmap& map : maps) {
    if (map.title == title) return &map;
  }
  return nullptr;
}

TEST(Heatmap, BinsNeverStraddleAGroup) {
  EXPECT_EQ(aligned_bin(200, 128, 256), 1);
  EXPECT_EQ(aligned_bin(8192, 128, 256), 32);  // 64 heads of 128 lines: 4 cells per head
  EXPECT_EQ(aligned_bin(2048, 128, 256), 8);
  EXPECT_EQ(aligned_bin(12, 6, 4), 3);       // divides 6
  EXPECT_EQ(aligned_bin(10, 5, 4), 5);       // 5 has no divisor in [3, 5): a whole group
  EXPECT_EQ(aligned_bin(1000, 4, 10), 100);  // 25 groups per cell
  EXPECT_EQ(aligned_bin(1000, 0, 10), 100);
  EXPECT_EQ(aligned_bin(1001, 0, 10), 101);
}

// A wrong head of q_proj's gradient lights that head's lines and nothing else; the worst cell is in it.
TEST(Heatmap, ProjectionGradientShowsItsHeadLines) {
  const Case test_case = small_case();
  const NamedTensors expected = {{"grads/q_proj", counting({16, 6})}, {"out", counting({2, 5, 6})}};
  NamedTensors actual = expected;
  actual["grads/q_proj"].values[2 * 4 * 6 + 1 * 6 + 3] += 50.0;  // head 2, line 1, channel 3
  const CompareReport report = compare(test_case, expected, actual, Precision::fp64);
  const std::vector<Heatmap> maps = error_heatmaps(test_case, expected, actual, report);
  ASSERT_EQ(maps.size(), 1u);  // out passes: no map without --all
  const Heatmap& map = maps[0];
  EXPECT_EQ(map.title, "grads/q_proj");
  EXPECT_EQ(map.status, "MISMATCH");
  EXPECT_EQ(map.rows.cells(), 16);
  EXPECT_EQ(map.rows.group, 4);
  EXPECT_EQ(map.rows.group_name, "query head");
  EXPECT_EQ(map.columns.cells(), 6);
  for (std::int64_t row = 0; row < 16; ++row) {
    for (std::int64_t column = 0; column < 6; ++column) {
      if (row == 9 && column == 3) {
        EXPECT_GT(map.at(row, column), 1.0);
      } else {
        EXPECT_EQ(map.at(row, column), 0.0) << row << "," << column;
      }
    }
  }
  EXPECT_EQ(map.worst_row, 9);
  EXPECT_EQ(map.worst_column, 3);
  EXPECT_DOUBLE_EQ(map.worst_ratio, 50.0 / report.tensors[0].tolerance);
  EXPECT_EQ(map.worst_where, "query head 2, line 1, hidden channel 3: index [9, 3]");
}

// o_proj's lines are its columns; out's rows are tokens (batch row, position); --all draws passing tensors.
TEST(Heatmap, OProjColumnsAndOutTokens) {
  const Case test_case = small_case();
  const NamedTensors expected = {{"grads/o_proj", counting({6, 16})}, {"out", counting({2, 5, 6})}};
  NamedTensors actual = expected;
  actual["grads/o_proj"].values[4 * 16 + 13] -= 1.0;  // channel 4, column 13: head 3, line 1
  actual["out"].values[(1 * 5 + 3) * 6 + 2] = std::numeric_limits<double>::quiet_NaN();
  const CompareReport report = compare(test_case, expected, actual, Precision::fp64);
  const std::vector<Heatmap> maps = error_heatmaps(test_case, expected, actual, report, {.all = true});
  ASSERT_EQ(maps.size(), 2u);
  const Heatmap* o_proj = find_map(maps, "grads/o_proj");
  ASSERT_NE(o_proj, nullptr);
  EXPECT_EQ(o_proj->rows.cells(), 16);
  EXPECT_EQ(o_proj->columns.cells(), 6);
  EXPECT_EQ(o_proj->worst_row, 13);
  EXPECT_EQ(o_proj->worst_column, 4);
  EXPECT_EQ(o_proj->worst_where, "query head 3, line 1, hidden channel 4: index [4, 13]");
  const Heatmap* out = find_map(maps, "out");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->status, "NON-FINITE");
  EXPECT_EQ(out->rows.cells(), 10);
  EXPECT_EQ(out->rows.group, 5);
  EXPECT_TRUE(std::isinf(out->at(8, 2)));
  EXPECT_EQ(out->worst_where, "batch row 1, position 3, hidden channel 2: index [1, 3, 2]");
  // Without --all a passing tensor has no map, and a failing one still does.
  EXPECT_EQ(error_heatmaps(test_case, expected, actual, report).size(), 2u);
  NamedTensors only_o_proj_wrong = actual;
  only_o_proj_wrong["out"] = expected.at("out");
  const CompareReport second = compare(test_case, expected, only_o_proj_wrong, Precision::fp64);
  EXPECT_EQ(error_heatmaps(test_case, expected, only_o_proj_wrong, second).size(), 1u);
}

// A sketched gradient is drawn line x sketch entry, from the candidate's full gradient sketched.
TEST(Heatmap, SketchedGradientKeepsItsLines) {
  const Case test_case = small_case();
  const Tensor full = counting({8, 6});  // k_proj: 2 KV heads of 4 lines
  const NamedTensors expected = {{"grads/k_proj#sketch", sketch("grads/k_proj", full)}};
  Tensor wrong = full;
  wrong.values[5 * 6 + 0] += 3.0;  // KV head 1, line 1
  const NamedTensors actual = {{"grads/k_proj", wrong}};
  const CompareReport report = compare(test_case, expected, actual, Precision::fp64);
  const std::vector<Heatmap> maps = error_heatmaps(test_case, expected, actual, report);
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].rows.group_name, "KV head");
  EXPECT_EQ(maps[0].columns.cells(), 1 + kSketchProjections);
  for (std::int64_t row = 0; row < 8; ++row) {
    EXPECT_EQ(maps[0].at(row, 0) > 1.0, row == 5) << row;
  }
}

// Per-rank gradients: one map per parameter, head x rank; a rank that holds no line of a head is NaN.
TEST(Heatmap, PerRankGradientsAreHeadByRank) {
  const Case test_case = small_case(4);  // rank r holds query head r and KV head r / 2
  const std::vector<Parameters> ranks = rank_slices(generate_weights(test_case.geometry(), 3), test_case.plan);
  NamedTensors expected;
  for (auto& [name, tensor] : named_tensors(Result{.rank_gradients = ranks})) {
    if (name != "out") expected[name] = tensor;
  }
  NamedTensors actual = expected;
  actual["ranks/3/grads/k_proj"].values[2] += 10.0;  // rank 3 holds KV head 1
  actual["ranks/0/grads/q_bias"].values[1] += 10.0;  // rank 0 holds query head 0
  const CompareReport report = compare(test_case, expected, actual, Precision::fp64);
  const std::vector<Heatmap> maps = error_heatmaps(test_case, expected, actual, report);
  ASSERT_EQ(maps.size(), 2u);
  const Heatmap* k_proj = find_map(maps, "ranks/*/grads/k_proj");
  ASSERT_NE(k_proj, nullptr);
  EXPECT_EQ(k_proj->rows.cells(), 2);
  EXPECT_EQ(k_proj->columns.cells(), 4);
  EXPECT_EQ(k_proj->columns.group_name, "rank");
  for (std::int64_t head = 0; head < 2; ++head) {
    for (std::int64_t rank = 0; rank < 4; ++rank) {
      const double cell = k_proj->at(head, rank);
      if (rank / 2 != head) {
        EXPECT_TRUE(std::isnan(cell)) << head << "," << rank;  // not held
      } else {
        EXPECT_EQ(cell > 1.0, head == 1 && rank == 3) << head << "," << rank;
      }
    }
  }
  EXPECT_EQ(k_proj->worst_row, 1);
  EXPECT_EQ(k_proj->worst_column, 3);
  EXPECT_EQ(k_proj->worst_where, "KV head 1, rank 3: ranks/3/grads/k_proj index [0, 2]");
  const Heatmap* q_bias = find_map(maps, "ranks/*/grads/q_bias");
  ASSERT_NE(q_bias, nullptr);
  EXPECT_EQ(q_bias->rows.cells(), 4);
  EXPECT_GT(q_bias->at(0, 0), 1.0);
  EXPECT_EQ(q_bias->at(1, 1), 0.0);
  EXPECT_TRUE(std::isnan(q_bias->at(1, 0)));
}

// Unsharded biases: head x channel within the head.
TEST(Heatmap, BiasIsHeadByChannel) {
  const Case test_case = small_case();
  const NamedTensors expected = {{"grads/v_bias", counting({8})}};
  NamedTensors actual = expected;
  actual["grads/v_bias"].values[6] += 1.0;
  const CompareReport report = compare(test_case, expected, actual, Precision::fp64);
  const std::vector<Heatmap> maps = error_heatmaps(test_case, expected, actual, report);
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].rows.cells(), 2);
  EXPECT_EQ(maps[0].columns.cells(), 4);
  EXPECT_EQ(maps[0].worst_row, 1);
  EXPECT_EQ(maps[0].worst_column, 2);
  EXPECT_EQ(maps[0].worst_where, "KV head 1, channel within the head 2: index [6]");
}

// Wide tensors are binned to at most the cells asked for, the max over each bin.
TEST(Heatmap, BinsKeepTheMaximum) {
  const Case test_case = small_case();
  const NamedTensors expected = {{"grads/q_proj", counting({16, 6})}};
  NamedTensors actual = expected;
  actual["grads/q_proj"].values[7 * 6 + 5] += 2.0;  // head 1, line 3
  const CompareReport report = compare(test_case, expected, actual, Precision::fp64);
  const std::vector<Heatmap> maps =
      error_heatmaps(test_case, expected, actual, report, {.max_rows = 4, .max_columns = 2});
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].rows.bin, 4);  // a head per cell
  EXPECT_EQ(maps[0].columns.bin, 3);
  EXPECT_GT(maps[0].at(1, 1), 1.0);
  EXPECT_EQ(maps[0].at(0, 1), 0.0);
  EXPECT_EQ(maps[0].at(1, 0), 0.0);
  EXPECT_EQ(maps[0].worst_row, 1);
  EXPECT_EQ(maps[0].worst_column, 1);
}

}  // namespace
}  // namespace attncheck
