// QK-norm against the explicit formulas, per head.
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

}  // namespace
}  // namespace attncheck::reference
