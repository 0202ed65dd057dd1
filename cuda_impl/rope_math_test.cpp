// RoPE as the kernels compute it (rope_table + rotate_pairs, in float) against the reference's
// apply_rope (fp64), both directions, both pair styles, partial rotary_dim, at positions up to 2^20, and
// with each RoPE scaling (its frequencies and attention factor in the table).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_impl/rope_math.hpp"
#include "cuda_impl/rope_table.hpp"
#include "reference/rope.hpp"

namespace attncheck::cuda_impl {
namespace {

struct RopeCase {
  const char* name;
  std::int64_t head_dim, rotary_dim;
  RopeStyle style;
  RopeScaling scaling = {};
};

RopeScaling longrope(std::int64_t pairs) {
  RopeScaling scaling{.type = RopeScalingType::longrope, .factor = 32.0, .original_max_position_embeddings = 4096};
  for (std::int64_t i = 0; i < pairs; ++i) {
    scaling.short_factor.push_back(1.0 + 0.01 * static_cast<double>(i));
    scaling.long_factor.push_back(1.5 + 0.5 * static_cast<double>(i));
  }
  return scaling;
}

TEST(RopeMath, KernelRotationEqualsTheReferenceToFloatRounding) {
  const std::vector<std::int64_t> positions = {0, 1, 7, 4095, 65536, 1048575};
  for (const RopeCase& rope :
       {RopeCase{"half-split full", 64, 64, RopeStyle::half_split},
        RopeCase{"interleaved full", 80, 80, RopeStyle::interleaved},
        RopeCase{"half-split partial", 34, 16, RopeStyle::half_split},
        RopeCase{"interleaved partial", 128, 32, RopeStyle::interleaved},
        RopeCase{"linear", 64, 64, RopeStyle::half_split, {.type = RopeScalingType::linear, .factor = 8.0}},
        RopeCase{"llama3",
                 128,
                 128,
                 RopeStyle::half_split,
                 {.type = RopeScalingType::llama3,
                 .factor = 8.0,
                 .low_freq_factor = 1.0,
                 .high_freq_factor = 4.0,
                 .original_max_position_embeddings = 8192}},
        RopeCase{"yarn partial",
                 64,
                 32,
                 RopeStyle::half_split,
                 {.type = RopeScalingType::yarn, .factor = 4.0, .original_max_position_embeddings = 4096}},
        RopeCase{"longrope", 96, 96, RopeStyle::half_split, longrope(48)}}) {
    const Geometry geometry = resolve_geometry({.hidden_size = 2 * rope.head_dim,
                                                .num_heads = 2,
                                                .head_dim = rope.head_dim,
                                                .rotary_dim = rope.rotary_dim,
                                                .rope_theta = 1e6,
                                                .rope_scaling = rope.scaling,
                                                .rope_style = rope.style});
    const std::vector<double> table_double = rope_table(geometry, positions);
    const std::vector<float> table(table_double.begin(), table_double.end());
    for (const auto direction : {reference::RopeDirection::forward, reference::RopeDirection::backward}) {
      // One head per token; values k/16 - 1 (exact in float).
      reference::RowMatrix expected(static_cast<Eigen::Index>(positions.size()), rope.head_dim);
      for (Eigen::Index t = 0; t < expected.rows(); ++t) {
        for (Eigen::Index c = 0; c < expected.cols(); ++c) expected(t, c) = double((t * 7 + c * 3) % 33) / 16 - 1;
      }
      reference::RowMatrix input = expected;
      reference::apply_rope(expected, positions, 1, geometry, direction);
      const float sign = direction == reference::RopeDirection::forward ? 1.0f : -1.0f;
      for (Eigen::Index t = 0; t < input.rows(); ++t) {
        std::vector<float> row(input.row(t).data(), input.row(t).data() + rope.head_dim);
        rotate_pairs(row.data(), table.data() + t * rope.rotary_dim, int(rope.rotary_dim),
                     rope.style == RopeStyle::interleaved, sign, 0, 1);
        for (Eigen::Index c = 0; c < input.cols(); ++c) {
          // Float arithmetic on |values| <= 1 (times an attention factor below 1.4): a few ulps of 1.
          EXPECT_NEAR(row[c], expected(t, c), 6e-7) << rope.name << " token " << t << " channel " << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace attncheck::cuda_impl
