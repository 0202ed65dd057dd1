// KV-cache decoding reproduces the rows of the full causal forward, for every step size, on one rank
// and on TP ranks with replicated KV heads.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "reference/reference.hpp"
#include "reference/test_support.hpp"

namespace attncheck {
namespace {

// Rows [0, rows) of every batch row of a [batch, seq, hidden] tensor.
Tensor leading_rows(const Tensor& tensor, std::int64_t rows) {
  const std::int64_t batch = tensor.shape[0], seq = tensor.shape[1], hidden = tensor.shape[2];
  Tensor result({batch, rows, hidden});
  for (std::int64_t b = 0; b < batch; ++b) {
    std::copy_n(tensor.values.begin() + b * seq * hidden, rows * hidden, result.values.begin() + b * rows * hidden);
  }
  return result;
}

struct DecodeCase {
  std::string name;
  GeometrySpec spec;
  DecodeSchedule schedule;
  std::int64_t tp_size = 1;
  bool pad_keys = false;
};

class DecodeTest : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeTest, EveryStepEqualsTheFullForward) {
  const DecodeCase& param = GetParam();
  const Geometry geometry = resolve_geometry(param.spec);
  const Case test_case = generate_case(geometry, {.seed = 21,
                                                  .batch = 3,
                                                  .seq = 11,
                                                  .pad_keys = param.pad_keys,
                                                  .decode = param.schedule,
                                                  .tp_size = param.tp_size});
  const Result result = param.tp_size == 1 ? reference::run_reference(test_case, {.gradients = false})
                                           : reference::run_reference_tp(test_case, {.gradients = false});
  ASSERT_TRUE(result.decode_out.has_value());
  const Tensor expected = leading_rows(result.out, param.schedule.total());
  // Same arithmetic, different GEMM shapes (a step's scores are [tokens, cache] instead of
  // [seq, seq]): equal up to fp64 rounding.
  EXPECT_LE(testing::relative_error(*result.decode_out, expected), 1e-13) << testing::describe(geometry);
  // And row by row: each step's rows, not just the worst.
  const std::int64_t hidden = geometry.hidden_size();
  std::int64_t start = 0;
  std::vector<std::int64_t> calls = {param.schedule.prefill};
  calls.insert(calls.end(), param.schedule.steps.begin(), param.schedule.steps.end());
  for (std::int64_t count : calls) {
    for (std::int64_t b = 0; b < 3; ++b) {
      for (std::int64_t s = start; s < start + count; ++s) {
        for (std::int64_t c = 0; c < hidden; ++c) {
          const double want = expected.values[(b * param.schedule.total() + s) * hidden + c];
          const double got = result.decode_out->values[(b * param.schedule.total() + s) * hidden + c];
          ASSERT_NEAR(got, want, 1e-13 * (1 + std::fabs(want))) << "batch " << b << " position " << s;
        }
      }
    }
    start += count;
  }
}

const GeometrySpec kGqa = {.hidden_size = 12,
                           .num_heads = 4,
                           .num_kv_heads = 2,
                           .head_dim = 6,
                           .qk_norm = QkNorm::rms,
                           .qkv_bias = true,
                           .out_bias = true};

INSTANTIATE_TEST_SUITE_P(
    Schedules, DecodeTest,
    ::testing::Values(DecodeCase{"single_token_steps", kGqa, {.prefill = 4, .steps = {1, 1, 1, 1, 1}}},
                      DecodeCase{"multi_token_steps", kGqa, {.prefill = 3, .steps = {2, 3, 1, 2}}},
                      DecodeCase{"no_prefill", kGqa, {.prefill = 0, .steps = {1, 2, 3}}},
                      DecodeCase{"whole_sequence_prefill", kGqa, {.prefill = 11}},
                      DecodeCase{"padding", kGqa, {.prefill = 5, .steps = {1, 4}}, 1, true},
                      DecodeCase{"window_softcap_interleaved",
                                 {.hidden_size = 8,
                                  .num_heads = 3,
                                  .num_kv_heads = 1,
                                  .head_dim = 4,
                                  .rope_style = RopeStyle::interleaved,
                                  .softcap = 2.0,
                                  .sliding_window = 3},
                                 {.prefill = 2, .steps = {1, 3, 2}}},
                      DecodeCase{"tp4_replicated_kv", kGqa, {.prefill = 3, .steps = {1, 2, 1}}, 4},
                      DecodeCase{"tp2", kGqa, {.prefill = 6, .steps = {2}}, 2}),
    [](const ::testing::TestParamInfo<DecodeCase>& param_info) { return param_info.param.name; });

TEST(Decode, NonCausalGeometryWithAScheduleIsRejected) {
  const Geometry geometry = resolve_geometry({.hidden_size = 4, .num_heads = 2, .head_dim = 2, .causal = false});
  EXPECT_THROW(generate_case(geometry, {.seq = 4, .decode = {.prefill = 2, .steps = {1}}}), InputError);
}

TEST(Decode, ScheduleLongerThanTheSequenceIsRejected) {
  const Geometry geometry = resolve_geometry({.hidden_size = 4, .num_heads = 2, .head_dim = 2});
  try {
    generate_case(geometry, {.seq = 4, .decode = {.prefill = 3, .steps = {1, 1}}});
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("inputs.decode")) << error.what();
  }
}

}  // namespace
}  // namespace attncheck
