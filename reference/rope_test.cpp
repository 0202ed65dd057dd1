// RoPE against hand-computed rotations in both pairings (HF's rotate_half for half-split, GPT-J's
// rotate_every_two for interleaved), partial rotary, and the backward direction.
#include "reference/rope.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace attncheck::reference {
namespace {

// head_dim 4, whole head rotated, theta 100: pair frequencies 1 and 100^(-1/2) = 0.1, so at position 1
// the angles are 1 and 0.1 radians.
const double kA[4] = {0.5, -1.25, 2.0, 0.75};

RowMatrix rotate(const Geometry& geometry, std::int64_t position, const double* values, RopeDirection direction) {
  RowMatrix rows(1, geometry.head_dim());
  for (int i = 0; i < geometry.head_dim(); ++i) rows(0, i) = values[i];
  const std::vector<std::int64_t> positions = {position};
  apply_rope(rows, positions, 1, geometry, direction);
  return rows;
}

TEST(Rope, HalfSplitPairsChannelIWithIPlusHalf) {
  const Geometry geometry = resolve_geometry({.hidden_size = 4, .num_heads = 1, .head_dim = 4, .rope_theta = 100.0});
  const RowMatrix out = rotate(geometry, 1, kA, RopeDirection::forward);
  EXPECT_NEAR(out(0, 0), kA[0] * std::cos(1.0) - kA[2] * std::sin(1.0), 1e-15);
  EXPECT_NEAR(out(0, 2), kA[2] * std::cos(1.0) + kA[0] * std::sin(1.0), 1e-15);
  EXPECT_NEAR(out(0, 1), kA[1] * std::cos(0.1) - kA[3] * std::sin(0.1), 1e-15);
  EXPECT_NEAR(out(0, 3), kA[3] * std::cos(0.1) + kA[1] * std::sin(0.1), 1e-15);
}

TEST(Rope, InterleavedPairsNeighbours) {
  const Geometry geometry = resolve_geometry(
      {.hidden_size = 4, .num_heads = 1, .head_dim = 4, .rope_theta = 100.0, .rope_style = RopeStyle::interleaved});
  const RowMatrix out = rotate(geometry, 1, kA, RopeDirection::forward);
  EXPECT_NEAR(out(0, 0), kA[0] * std::cos(1.0) - kA[1] * std::sin(1.0), 1e-15);
  EXPECT_NEAR(out(0, 1), kA[1] * std::cos(1.0) + kA[0] * std::sin(1.0), 1e-15);
  EXPECT_NEAR(out(0, 2), kA[2] * std::cos(0.1) - kA[3] * std::sin(0.1), 1e-15);
  EXPECT_NEAR(out(0, 3), kA[3] * std::cos(0.1) + kA[2] * std::sin(0.1), 1e-15);
}

TEST(Rope, PartialRotaryUsesRotaryDimForFrequenciesAndLeavesTheRest) {
  // head_dim 6, rotary_dim 4: frequencies from rotary_dim (1 and 0.1 at theta 100), channels 4, 5 untouched.
  const Geometry geometry =
      resolve_geometry({.hidden_size = 6, .num_heads = 1, .head_dim = 6, .rotary_dim = 4, .rope_theta = 100.0});
  const double values[6] = {0.5, -1.25, 2.0, 0.75, 3.5, -4.0};
  const RowMatrix out = rotate(geometry, 2, values, RopeDirection::forward);  // angles 2 and 0.2
  EXPECT_NEAR(out(0, 0), values[0] * std::cos(2.0) - values[2] * std::sin(2.0), 1e-15);
  EXPECT_NEAR(out(0, 3), values[3] * std::cos(0.2) + values[1] * std::sin(0.2), 1e-15);
  EXPECT_EQ(out(0, 4), 3.5);
  EXPECT_EQ(out(0, 5), -4.0);
}

TEST(Rope, BackwardUndoesForwardAndPositionZeroIsIdentity) {
  const Geometry geometry = resolve_geometry({.hidden_size = 4, .num_heads = 1, .head_dim = 4});
  const RowMatrix forward = rotate(geometry, 123457, kA, RopeDirection::forward);
  const RowMatrix back = rotate(geometry, 123457, forward.data(), RopeDirection::backward);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(back(0, i), kA[i], 1e-14);
  const RowMatrix at_zero = rotate(geometry, 0, kA, RopeDirection::forward);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(at_zero(0, i), kA[i]);
}

}  // namespace
}  // namespace attncheck::reference
