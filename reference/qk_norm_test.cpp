// QK-norm against the explicit formulas, per head and over the whole width (split over two ranks).
#include "reference/qk_norm.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace attncheck::reference {
namespace {

TEST(QkNorm, RmsAndOnePlusPerHead) {
  // Two heads of head_dim 2: [3, 4] and [1, -1]; eps 1e-6; weight [0.5, 2].
  for (QkNorm kind : {QkNorm::rms, QkNorm::rms_one_plus}) {
    const Geometry geometry =
        resolve_geometry({.hidden_size = 4, .num_heads = 2, .head_dim = 2, .qk_norm = kind, .qk_norm_eps = 1e-6});
    RowMatrix rows(1, 4);
    rows << 3, 4, 1, -1;
    RowVector weight(2);
    weight << 0.5, 2.0;
    RowMatrix inverse_rms;
    qk_norm_forward(rows, weight, 2, geometry, inverse_rms);
    const double factor[2] = {kind == QkNorm::rms ? 0.5 : 1.5, kind == QkNorm::rms ? 2.0 : 3.0};
    const double rms0 = std::sqrt((9.0 + 16.0) / 2 + 1e-6);
    const double rms1 = std::sqrt((1.0 + 1.0) / 2 + 1e-6);
    EXPECT_NEAR(rows(0, 0), 3 / rms0 * factor[0], 1e-15) << to_string(kind);
    EXPECT_NEAR(rows(0, 1), 4 / rms0 * factor[1], 1e-15) << to_string(kind);
    EXPECT_NEAR(rows(0, 2), 1 / rms1 * factor[0], 1e-15) << to_string(kind);
    EXPECT_NEAR(rows(0, 3), -1 / rms1 * factor[1], 1e-15) << to_string(kind);
    EXPECT_NEAR(inverse_rms(0, 1), 1 / rms1, 1e-15);
  }
}

// OLMo-2's whole-width norm, the row [3, 4, 1, -1] split over two ranks as [3, 4] and [1, -1]: with the
// ranks' sums of squares all-reduced, each rank's half is the whole row's normalisation; and the
// two-stage backward (the dots all-reduced) gives the whole row's gradient, against the formula.
TEST(QkNorm, WholeWidthSplitOverRanksEqualsTheWholeRow) {
  const double eps = 1e-6;
  RowMatrix whole(1, 4), left(1, 2), right(1, 2);
  whole << 3, 4, 1, -1;
  left << 3, 4;
  right << 1, -1;
  RowVector weight(4);
  weight << 0.5, 2.0, 1.25, -0.75;
  const RowVector sums = full_width_sum_squares(left) + full_width_sum_squares(right);  // the all-reduce
  EXPECT_EQ(sums[0], 27.0);
  RowMatrix inverse_left, inverse_right;
  const RowMatrix left_input = left, right_input = right;
  full_width_norm_forward(left, weight.segment(0, 2), sums, 4, eps, inverse_left);
  full_width_norm_forward(right, weight.segment(2, 2), sums, 4, eps, inverse_right);
  const double rms = std::sqrt(27.0 / 4 + eps);
  for (int c = 0; c < 4; ++c) {
    const double got = c < 2 ? left(0, c) : right(0, c - 2);
    EXPECT_NEAR(got, whole(0, c) / rms * weight[c], 1e-15) << c;
  }
  // A rank that normalised its own half alone would be off: [3, 4] has rms sqrt(12.5), not sqrt(6.75).
  EXPECT_GT(std::fabs(std::sqrt(25.0 / 2 + eps) - rms), 0.9);

  // Backward of L = sum(dy * y): dx_c = inv (dy_c w_c - n_c sum_j dy_j w_j n_j / N).
  RowVector dy(4);
  dy << 0.3, -1.1, 0.7, 2.0;
  RowMatrix d_left = dy.segment(0, 2), d_right = dy.segment(2, 2);
  const RowVector dots = full_width_dot(d_left, left_input, inverse_left, weight.segment(0, 2)) +
                         full_width_dot(d_right, right_input, inverse_right, weight.segment(2, 2));
  RowVector d_weight_left = RowVector::Zero(2), d_weight_right = RowVector::Zero(2);
  full_width_norm_backward(d_left, left_input, inverse_left, weight.segment(0, 2), dots, 4, true, d_weight_left);
  full_width_norm_backward(d_right, right_input, inverse_right, weight.segment(2, 2), dots, 4, true, d_weight_right);
  const double inv = 1.0 / rms;
  double dot = 0.0;
  for (int c = 0; c < 4; ++c) dot += dy[c] * weight[c] * whole(0, c) * inv;
  for (int c = 0; c < 4; ++c) {
    const double expected = inv * (dy[c] * weight[c] - whole(0, c) * inv * dot / 4);
    EXPECT_NEAR(c < 2 ? d_left(0, c) : d_right(0, c - 2), expected, 1e-14) << c;
    EXPECT_NEAR(c < 2 ? d_weight_left[c] : d_weight_right[c - 2], dy[c] * whole(0, c) * inv, 1e-15) << c;
  }
}

}  // namespace
}  // namespace attncheck::reference
