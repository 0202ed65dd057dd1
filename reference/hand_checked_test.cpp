// Cases whose answer is known without the reference, checked exactly (bit for bit): every input is
// a small dyadic number, so the sums below are exact in fp64 whatever their order.
#include <gtest/gtest.h>

#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "reference/reference.hpp"
#include "reference/test_support.hpp"

namespace attncheck {
namespace {

// out[t] = sum_h o_proj[:, h] . (v_proj[g(h)] x_t + v_bias) + o_bias, written as plain loops.
Tensor out_when_each_query_reads_its_own_value(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  const Inputs& in = test_case.inputs;
  const Parameters& w = test_case.weights;
  Tensor out({in.batch, in.seq, g.hidden_size()});
  for (std::int64_t t = 0; t < in.batch * in.seq; ++t) {
    std::vector<double> value(g.kv_width());
    for (std::int64_t r = 0; r < g.kv_width(); ++r) {
      double sum = w.v_bias ? w.v_bias->values[r] : 0.0;
      for (std::int64_t c = 0; c < g.hidden_size(); ++c) {
        sum += w.v_proj.values[r * g.hidden_size() + c] * in.x.values[t * g.hidden_size() + c];
      }
      value[r] = sum;
    }
    for (std::int64_t o = 0; o < g.hidden_size(); ++o) {
      double sum = w.o_bias ? w.o_bias->values[o] : 0.0;
      for (std::int64_t h = 0; h < g.num_heads(); ++h) {
        const std::int64_t kv = h / g.group_size();
        for (std::int64_t d = 0; d < g.head_dim(); ++d) {
          sum += w.o_proj.values[o * g.query_width() + h * g.head_dim() + d] * value[kv * g.head_dim() + d];
        }
      }
      out.values[t * g.hidden_size() + o] = sum;
    }
  }
  return out;
}

TEST(HandChecked, SingleTokenOutputIsOProjOfVProjPerHead) {
  // One key: its softmax weight is exactly 1, so each head's context is its KV head's value.
  // head_dim 6 with hidden 8 and 4 heads (quotient 2), GQA, QK-norm, biases and softcap all present:
  // none of them may change the answer.
  const Geometry geometry = resolve_geometry({.hidden_size = 8,
                                              .num_heads = 4,
                                              .num_kv_heads = 2,
                                              .head_dim = 6,
                                              .qk_norm = QkNorm::rms,
                                              .qkv_bias = true,
                                              .out_bias = true,
                                              .softcap = 3.0});
  const Case test_case = generate_case(geometry, {.seed = 3, .batch = 3, .seq = 1});
  const Result result = reference::run_reference(test_case, {.gradients = false});
  EXPECT_EQ(result.out, out_when_each_query_reads_its_own_value(test_case));
}

TEST(HandChecked, RopeSeesOnlyRelativePositions) {
  // RoPE makes q_m . k_n depend on m - n only: shifting every position of a row by the same offset
  // leaves the output unchanged up to rounding (the angles grow, so a few ulp of them), while a
  // different relative layout (positions reversed) changes it. Masks follow sequence indices, so
  // both runs mask identically.
  const Geometry geometry =
      resolve_geometry({.hidden_size = 8, .num_heads = 4, .num_kv_heads = 2, .head_dim = 6, .qk_norm = QkNorm::rms});
  Case test_case = generate_case(geometry, {.seed = 4, .batch = 2, .seq = 6, .position_offset = 0});
  const Result base = reference::run_reference(test_case, {.gradients = false});
  Case shifted = test_case;
  for (std::int64_t& position : shifted.inputs.positions) position += 4099;
  EXPECT_LE(testing::relative_error(reference::run_reference(shifted, {.gradients = false}).out, base.out), 1e-12);
  Case reversed = test_case;
  for (std::size_t i = 0; i < reversed.inputs.positions.size(); ++i) reversed.inputs.positions[i] = 100 - i % 6;
  EXPECT_GT(testing::relative_error(reference::run_reference(reversed, {.gradients = false}).out, base.out), 1e-3);
}

TEST(HandChecked, RotaryAtPositionZeroIsTheIdentity) {
  // cos 0 = 1, sin 0 = 0: at position 0 RoPE changes nothing, so a rotary geometry equals a rotary-free one.
  const GeometrySpec rotary = {.hidden_size = 8, .num_heads = 2, .head_dim = 4};
  GeometrySpec no_rotary = rotary;
  no_rotary.rotary_dim = 0;
  Case with = generate_case(resolve_geometry(rotary), {.seed = 5, .batch = 1, .seq = 4});
  Case without = generate_case(resolve_geometry(no_rotary), {.seed = 5, .batch = 1, .seq = 4});
  std::fill(with.inputs.positions.begin(), with.inputs.positions.end(), 0);
  std::fill(without.inputs.positions.begin(), without.inputs.positions.end(), 0);
  EXPECT_EQ(reference::run_reference(with, {.gradients = false}).out,
            reference::run_reference(without, {.gradients = false}).out);
}

TEST(HandChecked, ZeroQueriesAttendUniformly) {
  // q_proj = 0: every score is 0, so a bidirectional query averages the values of all 4 keys
  // (weights exactly 1/4). With identity-like v_proj and o_proj (hidden = query_width, one 1 per row),
  // out is the mean of x over the sequence, exactly.
  const Geometry geometry = resolve_geometry({.hidden_size = 4, .num_heads = 2, .head_dim = 2, .causal = false});
  Case test_case = generate_case(geometry, {.seed = 6, .batch = 2, .seq = 4});
  Parameters& w = test_case.weights;
  std::fill(w.q_proj.values.begin(), w.q_proj.values.end(), 0.0);
  std::fill(w.v_proj.values.begin(), w.v_proj.values.end(), 0.0);
  std::fill(w.o_proj.values.begin(), w.o_proj.values.end(), 0.0);
  for (int i = 0; i < 4; ++i) {
    w.v_proj.values[i * 4 + i] = 1.0;
    w.o_proj.values[i * 4 + i] = 1.0;
  }
  const Result result = reference::run_reference(test_case, {.gradients = false});
  const Tensor& x = test_case.inputs.x;
  for (int b = 0; b < 2; ++b) {
    for (int c = 0; c < 4; ++c) {
      double mean = 0.0;
      for (int s = 0; s < 4; ++s) mean += x.values[(b * 4 + s) * 4 + c];
      mean /= 4;
      for (int s = 0; s < 4; ++s) EXPECT_EQ(result.out.values[(b * 4 + s) * 4 + c], mean) << b << " " << s << " " << c;
    }
  }
}

TEST(HandChecked, GradientOfOBiasIsTheSumOfDout) {
  const Geometry geometry = resolve_geometry({.hidden_size = 4, .num_heads = 2, .head_dim = 6, .out_bias = true});
  const Case test_case = generate_case(geometry, {.seed = 7, .batch = 2, .seq = 3});
  const Result result = reference::run_reference(test_case);
  for (int c = 0; c < 4; ++c) {
    double sum = 0.0;
    for (int t = 0; t < 6; ++t) sum += test_case.inputs.dout.values[t * 4 + c];
    EXPECT_EQ(result.gradients->params.o_bias->values[c], sum);
  }
}

TEST(ReferenceErrors, NonFiniteResultIsAnErrorNotAResult) {
  // qk_norm_eps 0 and an all-zero token: the norm divides 0 by 0.
  const Geometry geometry =
      resolve_geometry({.hidden_size = 4, .num_heads = 2, .head_dim = 2, .qk_norm = QkNorm::rms, .qk_norm_eps = 0.0});
  Case test_case = generate_case(geometry, {.seed = 8, .batch = 1, .seq = 2});
  std::fill(test_case.inputs.x.values.begin(), test_case.inputs.x.values.begin() + 4, 0.0);
  try {
    reference::run_reference(test_case);
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("out[flat 0]")) << error.what();
  }
}

}  // namespace
}  // namespace attncheck
