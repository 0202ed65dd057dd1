// Analytic gradients of the reference against fourth-order central finite differences, on every
// parameter tensor and on x (relative error <= 1e-7 per tensor).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "reference/reference.hpp"
#include "reference/test_support.hpp"

namespace attncheck {
namespace {

using testing::describe;

struct GradientCase {
  std::string name;
  GeometrySpec spec;
  InputOptions options;
};

void PrintTo(const GradientCase& gradient_case, std::ostream* os) {
  *os << gradient_case.name;
}

InputOptions small_inputs(std::uint64_t seed, bool pad_keys,
                          ActivationDistribution activations = ActivationDistribution::uniform) {
  return {.seed = seed, .batch = 2, .seq = 5, .activations = activations, .pad_keys = pad_keys};
}

std::vector<GradientCase> gradient_cases() {
  std::vector<GradientCase> cases = {
      // head_dim 6 while hidden / num_heads = 2: q_proj 8 -> 24, o_proj 24 -> 8.
      {"head_dim_not_quotient", {.hidden_size = 8, .num_heads = 4, .head_dim = 6}, small_inputs(1, false)},
      {"gqa", {.hidden_size = 10, .num_heads = 6, .num_kv_heads = 2, .head_dim = 4}, small_inputs(2, false)},
      {"mqa", {.hidden_size = 6, .num_heads = 3, .num_kv_heads = 1, .head_dim = 8}, small_inputs(3, false)},
      {"partial_rotary_interleaved",
       {.hidden_size = 8, .num_heads = 2, .head_dim = 8, .rotary_pct = 0.25, .rope_style = RopeStyle::interleaved},
       small_inputs(4, false)},
      {"qk_norm_rms_biases",
       {.hidden_size = 6,
        .num_heads = 4,
        .num_kv_heads = 2,
        .head_dim = 4,
        .qk_norm = QkNorm::rms,
        .qkv_bias = true,
        .out_bias = true},
       small_inputs(5, false)},
      {"qk_norm_one_plus",
       {.hidden_size = 6,
        .num_heads = 2,
        .num_kv_heads = 1,
        .head_dim = 6,
        .qk_norm = QkNorm::rms_one_plus,
        .query_pre_attn_scalar = 16.0},
       small_inputs(6, false)},
      {"softcap", {.hidden_size = 8, .num_heads = 2, .head_dim = 4, .softcap = 1.5}, small_inputs(7, false)},
      {"window",
       {.hidden_size = 8, .num_heads = 2, .num_kv_heads = 1, .head_dim = 4, .sliding_window = 2},
       small_inputs(8, false)},
      {"padding", {.hidden_size = 8, .num_heads = 2, .head_dim = 4}, small_inputs(9, true)},
      {"bidirectional_heavy_tailed",
       {.hidden_size = 8, .num_heads = 2, .head_dim = 4, .causal = false},
       small_inputs(10, true, ActivationDistribution::heavy_tailed)},
      {"outliers_large_positions",
       {.hidden_size = 8, .num_heads = 4, .num_kv_heads = 2, .head_dim = 4, .rope_theta = 1e6},
       {.seed = 11, .batch = 2, .seq = 4, .activations = ActivationDistribution::outliers, .position_offset = 1000003}},
  };
  // Attention sinks (gpt-oss): a learned logit per query head in every softmax's denominator; with
  // padding and a window, rows whose only weight is the sink.
  cases.push_back({"sinks_gqa_biases",
                   {.hidden_size = 8,
                    .num_heads = 4,
                    .num_kv_heads = 2,
                    .head_dim = 4,
                    .qkv_bias = true,
                    .out_bias = true,
                    .attention_sinks = true},
                   small_inputs(12, false)});
  cases.push_back({"sinks_window_padding_softcap",
                   {.hidden_size = 8,
                    .num_heads = 2,
                    .num_kv_heads = 1,
                    .head_dim = 4,
                    .softcap = 2.0,
                    .sliding_window = 2,
                    .attention_sinks = true},
                   small_inputs(13, true)});
  // OLMo-2's QK-norm over the whole q and k projections (one rms per token, a weight per channel).
  cases.push_back({"whole_width_qk_norm_gqa_biases",
                   {.hidden_size = 6,
                    .num_heads = 4,
                    .num_kv_heads = 2,
                    .head_dim = 4,
                    .qk_norm = QkNorm::rms_full_width,
                    .qkv_bias = true,
                    .out_bias = true},
                   small_inputs(14, true)});
  for (std::uint64_t seed = 100; seed < 112; ++seed) {
    cases.push_back(
        {fmt::format("random_{}", seed), testing::random_small_geometry(seed), small_inputs(seed, seed % 2 == 0)});
  }
  return cases;
}

class GradientTest : public ::testing::TestWithParam<GradientCase> {};

TEST_P(GradientTest, AnalyticMatchesFiniteDifferences) {
  const Geometry geometry = resolve_geometry(GetParam().spec);
  const Case test_case = generate_case(geometry, GetParam().options);
  const Result result = reference::run_reference(test_case);
  ASSERT_TRUE(result.gradients.has_value());
  const Gradients numeric = testing::finite_difference_gradients(test_case, [](const Case& perturbed) {
    return reference::run_reference(perturbed, {.gradients = false, .decode = false}).out;
  });
  testing::for_each_gradient_pair(
      *result.gradients, numeric, [&](const std::string& name, const Tensor& analytic, const Tensor& expected) {
        EXPECT_LE(testing::relative_error(analytic, expected), 1e-7) << name << " of " << describe(geometry);
      });
}

INSTANTIATE_TEST_SUITE_P(Geometries, GradientTest, ::testing::ValuesIn(gradient_cases()),
                         [](const ::testing::TestParamInfo<GradientCase>& param_info) {
                           return param_info.param.name;
                         });

}  // namespace
}  // namespace attncheck
