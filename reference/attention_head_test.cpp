// Masks as key intervals, the softmax, and rows that see no key.
#include "reference/attention_head.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace attncheck::reference {
namespace {

TEST(MaskSpec, CausalSquareSeesKeysUpToItself) {
  const MaskSpec mask{.key_offset = 0, .key_length = 5, .key_count = 5, .causal = true};
  EXPECT_EQ(mask.visible_keys(0).begin, 0);
  EXPECT_EQ(mask.visible_keys(0).end, 1);
  EXPECT_EQ(mask.visible_keys(4).end, 5);
}

TEST(MaskSpec, BottomRightAlignmentWhenFewerQueriesThanKeys) {
  // 2 queries over 6 keys: query 0 is key index 4, query 1 key index 5.
  const MaskSpec mask{.key_offset = 4, .key_length = 6, .key_count = 6, .causal = true};
  EXPECT_EQ(mask.visible_keys(0).end, 5);
  EXPECT_EQ(mask.visible_keys(1).end, 6);
}

TEST(MaskSpec, WindowPaddingAndBidirectional) {
  const MaskSpec window{.key_offset = 0, .key_length = 8, .key_count = 8, .causal = true, .window = 3};
  EXPECT_EQ(window.visible_keys(5).begin, 3);  // keys 3, 4, 5
  EXPECT_EQ(window.visible_keys(5).end, 6);
  const MaskSpec padded{.key_offset = 0, .key_length = 2, .key_count = 5, .causal = true};
  EXPECT_EQ(padded.visible_keys(4).end, 2);
  const MaskSpec bidirectional{.key_offset = 0, .key_length = 6, .key_count = 6, .causal = false};
  EXPECT_EQ(bidirectional.visible_keys(0).end, 6);
  // A cache holding 4 keys of a row padded to 6: keys past the cache do not exist.
  const MaskSpec short_cache{.key_offset = 0, .key_length = 6, .key_count = 4, .causal = false};
  EXPECT_EQ(short_cache.visible_keys(0).end, 4);
  const MaskSpec nothing{.key_offset = 0, .key_length = 0, .key_count = 0, .causal = true};
  EXPECT_LE(nothing.visible_keys(3).end, nothing.visible_keys(3).begin);
}

TEST(AttentionHead, ProbabilitiesSumToOneInsideTheIntervalAndZeroOutside) {
  RowMatrix q(4, 2), k(4, 2), v(4, 2);
  q << 1, 2, -1, 0.5, 3, -2, 0.25, 4;
  k << 0.5, -1, 2, 1, -3, 0.5, 1, 1;
  v << 1, 0, 0, 1, 2, 2, -1, 3;
  const MaskSpec mask{.key_offset = 0, .key_length = 3, .key_count = 4, .causal = true, .window = 2};
  RowMatrix context(4, 2);
  double lse[4];
  attention_group_forward(q, k, v, mask, {.scale = 0.5}, context, lse);
  const RowMatrix probabilities = attention_probabilities(q, k, mask, {.scale = 0.5});
  EXPECT_TRUE(context.isApprox(probabilities * v, 1e-15));
  for (int i = 0; i < 4; ++i) {
    const KeyInterval keys = mask.visible_keys(i);
    double inside = 0.0;
    for (int j = 0; j < 4; ++j) {
      if (j >= keys.begin && j < keys.end) {
        inside += probabilities(i, j);
        // p = exp(score - lse) with score = 0.5 q.k
        EXPECT_NEAR(probabilities(i, j), std::exp(0.5 * q.row(i).dot(k.row(j)) - lse[i]), 1e-15);
      } else {
        EXPECT_EQ(probabilities(i, j), 0.0) << i << "," << j;
      }
    }
    EXPECT_NEAR(inside, 1.0, 1e-15);
  }
}

TEST(AttentionHead, RowThatSeesNoKeyGivesZeroContextAndZeroGradients) {
  RowMatrix q = RowMatrix::Constant(2, 2, 1.0), k = RowMatrix::Constant(2, 2, 2.0), v = RowMatrix::Constant(2, 2, 3.0);
  const MaskSpec mask{.key_offset = 0, .key_length = 0, .key_count = 2, .causal = true};
  RowMatrix context(2, 2);
  double lse[2];
  attention_group_forward(q, k, v, mask, {.scale = 1.0, .softcap = 5.0}, context, lse);
  EXPECT_TRUE(context.isZero(0.0));
  EXPECT_TRUE(std::isinf(lse[0]) && lse[0] < 0);
  RowMatrix d_q(2, 2), d_k(2, 2), d_v(2, 2);
  attention_group_backward(q, k, v, mask, {.scale = 1.0, .softcap = 5.0}, RowMatrix::Ones(2, 2), d_q, d_k, d_v);
  EXPECT_TRUE(d_q.isZero(0.0));
  EXPECT_TRUE(d_k.isZero(0.0));
  EXPECT_TRUE(d_v.isZero(0.0));
}

TEST(AttentionHead, SoftcapBoundsScores) {
  RowMatrix q(1, 1), k(2, 1), v(2, 1);
  q << 100;
  k << 100, -100;
  v << 1, 0;
  const MaskSpec mask{.key_offset = 1, .key_length = 2, .key_count = 2, .causal = true};
  RowMatrix context(1, 1);
  double lse[1];
  attention_group_forward(q, k, v, mask, {.scale = 1.0, .softcap = 2.0}, context, lse);
  // capped scores 2 tanh(5000) = 2 and 2 tanh(-5000) = -2: p = e^2 / (e^2 + e^-2)
  EXPECT_NEAR(context(0, 0), std::exp(2.0) / (std::exp(2.0) + std::exp(-2.0)), 1e-15);
  EXPECT_NEAR(lse[0], std::log(std::exp(2.0) + std::exp(-2.0)), 1e-15);
}

}  // namespace
}  // namespace attncheck::reference
