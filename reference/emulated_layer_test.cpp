// The yardstick's rounding variants (reference/emulated_layer.hpp): a directed mode really changes the
// softmax chain's arithmetic without biasing the rest, fp32 only, and leaves the thread's mode as it was.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <algorithm>
#include <vector>
#include <limits>
#include <bit>

#include "core/generation/input_generation.hpp"
#include "core/model/rope_frequencies.hpp"
#include "reference/emulated_arithmetic.hpp"
#include "reference/emulated_layer.hpp"
#include "reference/reference.hpp"

namespace attncheck::reference {
namespace {

// Positions from 0: at large positions the float RoPE angle's error would swamp what is measured here.
Case small_case() {
  const Geometry geometry = resolve_geometry(
      {.hidden_size = 48, .num_heads = 4, .num_kv_heads = 2, .head_dim = 16, .qk_norm = QkNorm::rms, .softcap = 5.0});
  return generate_case(geometry, {.seed = 5, .batch = 2, .seq = 9, .position_offset = 0});
}

double max_difference(const Tensor& a, const Tensor& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.values.size(); ++i) worst = std::max(worst, std::fabs(a.values[i] - b.values[i]));
  return worst;
}

TEST(EmulatedLayer, DirectedRoundingChangesTheSoftmaxChainOnly) {
  const Case test_case = small_case();
  const Result exact = run_reference(test_case);
  const Result nearest = run_emulated(test_case, Precision::fp32);
  const double nearest_error = std::max(max_difference(nearest.out, exact.out), 1e-7);
  for (const Rounding rounding : {Rounding::upward, Rounding::downward, Rounding::toward_zero}) {
    const Result directed = run_emulated(test_case, Precision::fp32, {.rounding = rounding});
    EXPECT_GT(max_difference(directed.out, nearest.out), 0.0) << static_cast<int>(rounding);
    EXPECT_GT(max_difference(directed.gradients->x, nearest.gradients->x), 0.0) << static_cast<int>(rounding);
    // Directed rounding of every GEMM would bias long sums (5-10x the nearest error): kept out of them.
    EXPECT_LT(max_difference(directed.out, exact.out), 3 * nearest_error) << static_cast<int>(rounding);
  }
  const Result up = run_emulated(test_case, Precision::fp32, {.rounding = Rounding::upward});
  const Result down = run_emulated(test_case, Precision::fp32, {.rounding = Rounding::downward});
  EXPECT_GT(max_difference(up.out, down.out), 0.0);
}

// The angle policy a candidate declares (core/model/precision.hpp): at the goldens' large positions
// float32 angles dominate the fp32 yardstick's error; float64 angles remove that error, and at small
// positions the two policies nearly agree.
TEST(EmulatedLayer, Float64AnglesRemoveTheFloatAngleErrorAtLargePositions) {
  const Geometry geometry = resolve_geometry({.hidden_size = 32, .num_heads = 2, .head_dim = 16});
  // The fp32 yardstick's error on out with the given angles, for a case starting at that position.
  const auto error = [&](std::int64_t position_offset, RopeAngles angles) {
    const Case test_case =
        generate_case(geometry, {.seed = 5, .batch = 1, .seq = 9, .position_offset = position_offset});
    return max_difference(run_emulated(test_case, Precision::fp32, {.angles = angles}).out,
                          run_reference(test_case).out);
  };
  EXPECT_GT(error(440000, RopeAngles::float32), 100 * error(440000, RopeAngles::float64));
  const double near_float = error(0, RopeAngles::float32);
  const double near_double = error(0, RopeAngles::float64);
  EXPECT_LT(near_float, 10 * near_double);
  EXPECT_LT(near_double, 10 * near_float);
}

TEST(EmulatedLayer, HalfPrecisionsRoundToNearestOnly) {
  const Case test_case = small_case();
  for (const Precision precision : {Precision::bf16, Precision::fp16}) {
    const Result nearest = run_emulated(test_case, precision);
    const Result directed = run_emulated(test_case, precision, {.rounding = Rounding::downward});
    EXPECT_EQ(max_difference(directed.out, nearest.out), 0.0) << to_string(precision);
    EXPECT_EQ(max_difference(directed.gradients->x, nearest.gradients->x), 0.0) << to_string(precision);
  }
}

TEST(EmulatedLayer, DirectedRunsRestoreTheRoundingMode) {
  (void)run_emulated(small_case(), Precision::fp32, {.rounding = Rounding::downward});
  EXPECT_EQ(std::fegetround(), FE_TONEAREST);
  ASSERT_EQ(std::fesetround(FE_UPWARD), 0);
  (void)run_emulated(small_case(), Precision::fp32, {.rounding = Rounding::toward_zero});
  EXPECT_EQ(std::fegetround(), FE_UPWARD);
  std::fesetround(FE_TONEAREST);
}

TEST(EmulatedLayer, JitterIsSeededAndMovesResults) {
  const Case test_case = small_case();
  const Result first = run_emulated(test_case, Precision::fp32, {.jitter_seed = 1});
  const Result again = run_emulated(test_case, Precision::fp32, {.jitter_seed = 1});
  const Result other = run_emulated(test_case, Precision::fp32, {.jitter_seed = 2});
  EXPECT_EQ(max_difference(first.out, again.out), 0.0);
  EXPECT_GT(max_difference(first.out, other.out), 0.0);
}

// longrope decoding across its pretraining length: the prefill (positions 0-3) uses the short factors,
// the later calls and the full forward the long ones. In fp64 the emulated layer is the reference, so its
// decode/out must be the reference's own decode (keys cached with the prefill's factors), not the full
// forward's rows, which differ here by far more than rounding.
TEST(EmulatedLayer, LongropeDecodeUsesEachCallsFrequencies) {
  RopeScaling scaling{.type = RopeScalingType::longrope,
                      .factor = 16.0,
                      .original_max_position_embeddings = 4,
                      .short_factor = {1.0, 1.1, 1.2, 1.3},
                      .long_factor = {2.0, 4.0, 8.0, 16.0}};
  const Geometry geometry = resolve_geometry({.hidden_size = 32,
                                              .num_heads = 2,
                                              .num_kv_heads = 1,
                                              .head_dim = 8,
                                              .rope_theta = 100.0,
                                              .rope_scaling = scaling});
  const Case test_case = generate_case(
      geometry, {.seed = 3, .batch = 1, .seq = 7, .position_offset = 0, .decode = {.prefill = 4, .steps = {1, 2}}});
  ASSERT_EQ(decode_call_with_other_frequencies(test_case), 0);
  const Result exact = run_reference(test_case);
  const Result emulated = run_emulated(test_case, Precision::fp64);
  ASSERT_TRUE(exact.decode_out && emulated.decode_out);
  const double scale = max_difference(*exact.decode_out, Tensor(exact.decode_out->shape));
  EXPECT_LT(max_difference(*emulated.decode_out, *exact.decode_out), 1e-13 * scale);
  // The full forward's first rows are another answer: the check above is not vacuous.
  Tensor full_rows(exact.decode_out->shape);
  const std::int64_t hidden = geometry.hidden_size();
  std::copy_n(exact.out.values.begin(), 7 * hidden, full_rows.values.begin());
  EXPECT_GT(max_difference(full_rows, *exact.decode_out), 1e-3 * scale);
}

}  // namespace
// A jittered run's storage rounding (Storage::operator(), bit arithmetic and branch-free coins) is round()
// over reshaped(), as the yardstick was defined: the same floats bit for bit in the same (column-major) order of
// draws, zeros, infinities and NaNs kept without a draw, and the neighbours of the smallest subnormal and the
// largest finite float as std::nextafter has them.
TEST(EmulatedStorage, JitteredRoundingIsRoundValueByValue) {
  std::vector<float> values = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::min(), -std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 1.0f, -1.0f,
                               // fp16's largest, what rounds to its infinity, and its smallest subnormal
                               65504.0f, -65520.0f, 0x1p-24f, -0x1p-24f, 0x1p-26f};
  const std::size_t specials = values.size();
  SplitMixStream source(9, "values");
  while (values.size() < 4000) {
    values.push_back(std::ldexp(static_cast<float>(source.symmetric_integer(1 << 20)), -static_cast<int>(source.uniform_below(140))));
  }
  // Every special value several times over, at different points of the coin stream.
  for (int repeat = 0; repeat < 40; ++repeat) values.push_back(values[static_cast<std::size_t>(repeat) % specials]);
  while (values.size() % 40 != 0) values.push_back(values[values.size() % 97]);
  emulation::Mat<float> matrix(40, static_cast<Eigen::Index>(values.size() / 40));
  std::copy_n(values.begin(), matrix.size(), matrix.data());
  for (const Precision precision : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    SCOPED_TRACE(std::string(to_string(precision)));
    SplitMixStream fast_coins(11, "jitter"), plain_coins(11, "jitter");
    const emulation::Storage fast{.precision = precision, .jitter = &fast_coins};
    const emulation::Storage plain{.precision = precision, .jitter = &plain_coins};
    const emulation::Mat<float> rounded = fast(matrix);
    emulation::Mat<float> expected = matrix;
    for (float& value : expected.reshaped()) value = plain.round(value);
    int nudged = 0, can_move = 0;
    for (Eigen::Index i = 0; i < matrix.size(); ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(rounded.data()[i]), std::bit_cast<std::uint32_t>(expected.data()[i]))
          << "value " << i << ": " << matrix.data()[i];
      const float nearest = plain.nearest(matrix.data()[i]);
      nudged += rounded.data()[i] != nearest;
      can_move += nearest != 0.0f && std::isfinite(nearest);
    }
    EXPECT_EQ(fast_coins.next(), plain_coins.next());
    // About half of the values finite and nonzero in the storage type are nudged (fp16 flushes many to 0).
    EXPECT_GT(can_move, 1000);
    EXPECT_GT(nudged, 2 * can_move / 5);
    EXPECT_LT(nudged, 3 * can_move / 5);
    EXPECT_FLOAT_EQ(rounded(0, 0), 0.0f);
    // round_each (a softmax row's exps, in memory order) likewise, the stream left where round() leaves it.
    std::vector<float> row = values, plain_row = values;
    fast.round_each(row.data(), static_cast<Eigen::Index>(row.size()));
    for (float& value : plain_row) value = plain.round(value);
    for (std::size_t i = 0; i < row.size(); ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(row[i]), std::bit_cast<std::uint32_t>(plain_row[i])) << "value " << i;
    }
    EXPECT_EQ(fast_coins.next(), plain_coins.next());
  }
}

}  // namespace attncheck::reference
