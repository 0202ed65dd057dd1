// The intermediates a Result carries are the values inside the layer, in the documented layouts.
#include <gtest/gtest.h>

#include <cmath>

#include "core/generation/input_generation.hpp"
#include "reference/reference.hpp"
#include "reference/test_support.hpp"

namespace attncheck {
namespace {

TEST(Intermediates, QkvAreProjectionsWhenNoNormAndNoRotary) {
  // No QK-norm and rotary_dim 0: q, k, v are x @ W^T + b, laid out [batch, heads, seq, head_dim].
  const Geometry geometry = resolve_geometry(
      {.hidden_size = 5, .num_heads = 4, .num_kv_heads = 2, .head_dim = 6, .rotary_dim = 0, .qkv_bias = true});
  const Case test_case = generate_case(geometry, {.seed = 2, .batch = 2, .seq = 3});
  const Result result = reference::run_reference(test_case, {.gradients = false, .intermediates = true});
  const Intermediates& in = *result.intermediates;
  const Parameters& w = test_case.weights;
  ASSERT_EQ(in.q.shape, (Shape{2, 4, 3, 6}));
  ASSERT_EQ(in.k.shape, (Shape{2, 2, 3, 6}));
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < 3; ++s) {
      auto projection = [&](const Tensor& weight, const Tensor& bias, int row) {
        double sum = bias.values[row];
        for (int c = 0; c < 5; ++c) sum += weight.values[row * 5 + c] * test_case.inputs.x.values[(b * 3 + s) * 5 + c];
        return sum;
      };
      for (int h = 0; h < 4; ++h) {
        for (int d = 0; d < 6; ++d) {
          EXPECT_NEAR(in.q.values[((b * 4 + h) * 3 + s) * 6 + d], projection(w.q_proj, *w.q_bias, h * 6 + d), 1e-15);
        }
      }
      for (int g = 0; g < 2; ++g) {
        for (int d = 0; d < 6; ++d) {
          EXPECT_NEAR(in.k.values[((b * 2 + g) * 3 + s) * 6 + d], projection(w.k_proj, *w.k_bias, g * 6 + d), 1e-15);
          EXPECT_NEAR(in.v.values[((b * 2 + g) * 3 + s) * 6 + d], projection(w.v_proj, *w.v_bias, g * 6 + d), 1e-15);
        }
      }
    }
  }
}

TEST(Intermediates, QAndKFollowHfConventionsWithNormAndPartialRotary) {
  // Recomputed here as transformers does it: projection, RMS norm over head_dim, then
  // q * cos + rotate_half(q) * sin on the first rotary_dim channels with inv_freq = 1 / theta^(2i/r).
  const Geometry geometry = resolve_geometry({.hidden_size = 6,
                                              .num_heads = 2,
                                              .num_kv_heads = 1,
                                              .head_dim = 8,
                                              .rotary_pct = 0.5,
                                              .rope_theta = 10000.0,
                                              .qk_norm = QkNorm::rms});
  const Case test_case = generate_case(geometry, {.seed = 5, .batch = 2, .seq = 3});  // row 1 at offset >= 2^16
  const Result result = reference::run_reference(test_case, {.gradients = false, .intermediates = true});
  const Parameters& w = test_case.weights;
  const int hidden = 6, head_dim = 8, rotary = 4, seq = 3;
  auto expected_head = [&](const Tensor& weight, const Tensor& norm, int head, int b, int s) {
    std::vector<double> x(head_dim);
    for (int d = 0; d < head_dim; ++d) {
      for (int c = 0; c < hidden; ++c) {
        x[d] +=
            weight.values[(head * head_dim + d) * hidden + c] * test_case.inputs.x.values[(b * seq + s) * hidden + c];
      }
    }
    double mean_square = 0.0;
    for (double v : x) mean_square += v * v / head_dim;
    for (int d = 0; d < head_dim; ++d) x[d] = x[d] / std::sqrt(mean_square + 1e-6) * norm.values[d];
    const double position = static_cast<double>(test_case.inputs.positions[b * seq + s]);
    std::vector<double> out = x;
    for (int d = 0; d < rotary; ++d) {
      const double angle = position / std::pow(10000.0, 2.0 * (d % (rotary / 2)) / rotary);
      const double rotated_half = d < rotary / 2 ? -x[d + rotary / 2] : x[d - rotary / 2];
      out[d] = x[d] * std::cos(angle) + rotated_half * std::sin(angle);
    }
    return out;
  };
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < seq; ++s) {
      for (int h = 0; h < 2; ++h) {
        const std::vector<double> q = expected_head(w.q_proj, *w.q_norm, h, b, s);
        for (int d = 0; d < head_dim; ++d) {
          // Angles reach 2^20 rad at row 1, where an ulp of the angle is 2e-10: tolerance 1e-9.
          EXPECT_NEAR(result.intermediates->q.values[((b * 2 + h) * seq + s) * head_dim + d], q[d], 1e-9)
              << "b " << b << " s " << s << " h " << h << " d " << d;
        }
      }
      const std::vector<double> k = expected_head(w.k_proj, *w.k_norm, 0, b, s);
      for (int d = 0; d < head_dim; ++d) {
        EXPECT_NEAR(result.intermediates->k.values[(b * seq + s) * head_dim + d], k[d], 1e-9);
      }
    }
  }
}

TEST(Intermediates, ContextAndLogSumExpReproduceTheOutput) {
  const Geometry geometry = resolve_geometry({.hidden_size = 8,
                                              .num_heads = 4,
                                              .num_kv_heads = 2,
                                              .head_dim = 6,
                                              .qk_norm = QkNorm::rms,
                                              .out_bias = true,
                                              .softcap = 3.0,
                                              .sliding_window = 3});
  const Case test_case = generate_case(geometry, {.seed = 3, .batch = 2, .seq = 5, .pad_keys = true});
  const Result result = reference::run_reference(test_case, {.gradients = false, .intermediates = true});
  const Intermediates& in = *result.intermediates;
  const std::int64_t seq = 5, head_dim = 6;
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < seq; ++i) {
      // out = context @ o_proj^T + o_bias
      for (int o = 0; o < 8; ++o) {
        double sum = test_case.weights.o_bias->values[o];
        for (int c = 0; c < 24; ++c)
          sum += test_case.weights.o_proj.values[o * 24 + c] * in.context.values[(b * seq + i) * 24 + c];
        EXPECT_NEAR(result.out.values[(b * seq + i) * 8 + o], sum, 1e-14);
      }
      // context of head h = sum_j exp(capped score - lse) v_j over the visible keys, from q and k alone.
      for (int h = 0; h < 4; ++h) {
        const int g = h / 2;
        const std::int64_t key_length = test_case.inputs.key_lengths[b];
        const double lse = in.lse.values[(b * 4 + h) * seq + i];
        std::vector<double> expected(head_dim, 0.0);
        for (int j = std::max(0, i - 2); j <= i && j < key_length; ++j) {
          double dot = 0.0;
          for (int d = 0; d < head_dim; ++d) {
            dot += in.q.values[((b * 4 + h) * seq + i) * head_dim + d] *
                   in.k.values[((b * 2 + g) * seq + j) * head_dim + d];
          }
          const double weight = std::exp(3.0 * std::tanh(dot * geometry.scale() / 3.0) - lse);
          for (int d = 0; d < head_dim; ++d)
            expected[d] += weight * in.v.values[((b * 2 + g) * seq + j) * head_dim + d];
        }
        for (int d = 0; d < head_dim; ++d) {
          EXPECT_NEAR(in.context.values[(b * seq + i) * 24 + h * head_dim + d], expected[d], 1e-14)
              << "b " << b << " i " << i << " h " << h;
        }
      }
    }
  }
}

}  // namespace
}  // namespace attncheck
