// The RoPE frequencies of each scaling type against their step-by-step definitions
// (core/model/rope_frequencies.hpp); ctest cli.rope_frequencies_transformers holds them to transformers'.
#include "core/model/rope_frequencies.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"

namespace attncheck {
namespace {

Geometry with_scaling(RopeScaling scaling, double theta = 500000.0, std::int64_t head_dim = 128) {
  return resolve_geometry({.hidden_size = 4096,
                           .num_heads = 32,
                           .num_kv_heads = 8,
                           .head_dim = head_dim,
                           .rope_theta = theta,
                           .rope_scaling = std::move(scaling)});
}

double base(std::int64_t i, double theta = 500000.0, double dim = 128.0) {
  return std::pow(theta, -2.0 * static_cast<double>(i) / dim);
}

TEST(RopeFrequencies, UnscaledIsThetaToTheMinusTwoIOverD) {
  const RopeFrequencies f = rope_frequencies(with_scaling({}), 100000);
  ASSERT_EQ(f.inv_freq.size(), 64u);
  for (std::int64_t i = 0; i < 64; ++i) EXPECT_EQ(f.inv_freq[i], base(i)) << i;
  EXPECT_EQ(f.attention_factor, 1.0);
}

TEST(RopeFrequencies, LinearDividesEveryFrequency) {
  const RopeFrequencies f =
      rope_frequencies(with_scaling({.type = RopeScalingType::linear, .factor = 8.0}, 1e6, 256), 0);
  for (std::int64_t i = 0; i < 128; ++i) EXPECT_EQ(f.inv_freq[i], base(i, 1e6, 256) / 8.0) << i;
  EXPECT_EQ(f.attention_factor, 1.0);
}

// Llama 3.1: wavelengths below original / high_freq_factor untouched, above original / low_freq_factor
// divided by factor, the band between blended smoothly (continuous at both edges).
TEST(RopeFrequencies, Llama3KeepsHighDividesLowAndBlendsTheBand) {
  const RopeScaling scaling{.type = RopeScalingType::llama3,
                            .factor = 8.0,
                            .low_freq_factor = 1.0,
                            .high_freq_factor = 4.0,
                            .original_max_position_embeddings = 8192};
  const RopeFrequencies f = rope_frequencies(with_scaling(scaling), 0);
  int kept = 0, divided = 0, blended = 0;
  for (std::int64_t i = 0; i < 64; ++i) {
    const double wavelength = 2.0 * std::numbers::pi / base(i);
    if (wavelength < 8192.0 / 4.0) {
      EXPECT_EQ(f.inv_freq[i], base(i)) << i;
      ++kept;
    } else if (wavelength > 8192.0) {
      EXPECT_EQ(f.inv_freq[i], base(i) / 8.0) << i;
      ++divided;
    } else {
      const double smooth = (8192.0 / wavelength - 1.0) / 3.0;
      EXPECT_EQ(f.inv_freq[i], (1.0 - smooth) * base(i) / 8.0 + smooth * base(i)) << i;
      EXPECT_LT(f.inv_freq[i], base(i));
      EXPECT_GT(f.inv_freq[i], base(i) / 8.0);
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

// yarn: pairs below the ramp extrapolate (unchanged), above it interpolate (divided by factor); the
// attention factor is 0.1 ln(factor) + 1, or the mscale ratio, or the stated one.
TEST(RopeFrequencies, YarnRampsFromExtrapolationToInterpolation) {
  RopeScaling scaling{.type = RopeScalingType::yarn, .factor = 4.0, .original_max_position_embeddings = 32768};
  const Geometry geometry = with_scaling(scaling, 1e6);
  const RopeFrequencies f = rope_frequencies(geometry, 0);
  const auto edge = [](double rotations) {
    return 128.0 * std::log(32768.0 / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(1e6));
  };
  const double low = std::floor(edge(32.0)), high = std::ceil(edge(1.0));
  for (std::int64_t i = 0; i < 64; ++i) {
    if (i <= low) {
      EXPECT_EQ(f.inv_freq[i], base(i, 1e6)) << i;
    } else if (i >= high) {
      EXPECT_EQ(f.inv_freq[i], base(i, 1e6) / 4.0) << i;
    }
  }
  EXPECT_EQ(f.attention_factor, 0.1 * std::log(4.0) + 1.0);

  scaling.mscale = 1.0;
  scaling.mscale_all_dim = 0.5;
  EXPECT_EQ(rope_frequencies(with_scaling(scaling, 1e6), 0).attention_factor,
            (0.1 * std::log(4.0) + 1.0) / (0.05 * std::log(4.0) + 1.0));
  scaling.attention_factor = 1.25;
  EXPECT_EQ(rope_frequencies(with_scaling(scaling, 1e6), 0).attention_factor, 1.25);
}

// longrope: short factors while the call's positions stay below the original length, long ones once
// its largest position + 1 exceeds it.
TEST(RopeFrequencies, LongropeChoosesItsFactorsFromTheCallsLargestPosition) {
  RopeScaling scaling{.type = RopeScalingType::longrope, .factor = 32.0, .original_max_position_embeddings = 4096};
  scaling.short_factor.assign(48, 1.0);
  scaling.long_factor.assign(48, 2.5);
  scaling.short_factor[3] = 1.1;
  const Geometry geometry = with_scaling(scaling, 10000.0, 96);
  const RopeFrequencies below = rope_frequencies(geometry, 4095);
  const RopeFrequencies beyond = rope_frequencies(geometry, 4096);
  EXPECT_FALSE(below.long_factors);
  EXPECT_TRUE(beyond.long_factors);
  EXPECT_EQ(below.inv_freq[0], base(0, 10000.0, 96));
  EXPECT_EQ(below.inv_freq[3], base(3, 10000.0, 96) / 1.1);
  EXPECT_EQ(beyond.inv_freq[5], base(5, 10000.0, 96) / 2.5);
  EXPECT_EQ(below.attention_factor, std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)));
  EXPECT_EQ(beyond.attention_factor, below.attention_factor);
}

// The decode call whose longrope factors differ from the full forward's: a prefill of 0 tokens is no call
// (it rotates nothing), so it never counts as one taking the short factors.
TEST(RopeFrequencies, DecodeCallWithOtherFactorsSkipsAnEmptyPrefill) {
  RopeScaling scaling{.type = RopeScalingType::longrope, .factor = 16.0, .original_max_position_embeddings = 8};
  scaling.short_factor.assign(4, 1.0);
  scaling.long_factor.assign(4, 4.0);
  const Geometry geometry = with_scaling(scaling, 10000.0, 8);
  // Positions 12 .. 23: every call is past the original length, as the whole sequence is.
  const Case all_long = generate_case(
      geometry, {.seed = 1, .batch = 1, .seq = 12, .position_offset = 12, .decode = {.prefill = 0, .steps = {4, 8}}});
  EXPECT_EQ(decode_call_with_other_frequencies(all_long), -1);
  // Positions 0 .. 11: the first step (0 .. 5) takes the short factors, the whole sequence the long ones.
  const Case switching = generate_case(
      geometry, {.seed = 1, .batch = 1, .seq = 12, .position_offset = 0, .decode = {.prefill = 0, .steps = {6, 6}}});
  EXPECT_EQ(decode_call_with_other_frequencies(switching), 1);
}

TEST(RopeFrequencies, ScalingParametersAreValidated) {
  const auto rejected_field = [](RopeScaling scaling, std::int64_t head_dim = 128) -> std::string {
    try {
      with_scaling(std::move(scaling), 10000.0, head_dim);
    } catch (const InputError& error) {
      return error.violations().front().field;
    }
    return "accepted";
  };
  EXPECT_EQ(rejected_field({.type = RopeScalingType::linear}), "rope_scaling.factor");
  EXPECT_EQ(rejected_field({.type = RopeScalingType::linear, .factor = -2.0}), "rope_scaling.factor");
  EXPECT_EQ(rejected_field({.type = RopeScalingType::llama3,
                            .factor = 8.0,
                            .low_freq_factor = 4.0,
                            .high_freq_factor = 1.0,
                            .original_max_position_embeddings = 8192}),
            "rope_scaling.high_freq_factor");
  EXPECT_EQ(rejected_field({.type = RopeScalingType::yarn, .factor = 4.0}),
            "rope_scaling.original_max_position_embeddings");
  RopeScaling longrope{.type = RopeScalingType::longrope, .original_max_position_embeddings = 4096};
  longrope.short_factor.assign(47, 1.0);
  longrope.long_factor.assign(48, 1.0);
  EXPECT_EQ(rejected_field(longrope, 96), "rope_scaling.short_factor");
  // A parameter of another type would be silently ignored: refused.
  EXPECT_EQ(rejected_field({.type = RopeScalingType::linear, .factor = 2.0, .beta_fast = 32.0}),
            "rope_scaling.beta_fast/beta_slow/mscale/mscale_all_dim/truncate");
  EXPECT_EQ(rejected_field({.factor = 2.0}), "rope_scaling.factor");
}

TEST(RopeFrequencies, AttentionMultiplierIsTheScaleAndExcludesQueryPreAttnScalar) {
  const Geometry granite =
      resolve_geometry({.hidden_size = 4096, .num_heads = 32, .num_kv_heads = 8, .attention_multiplier = 0.0078125});
  EXPECT_EQ(granite.scale(), 0.0078125);
  EXPECT_EQ(granite.scale_source(), ScaleSource::attention_multiplier);
  EXPECT_THROW(
      resolve_geometry(
          {.hidden_size = 4096, .num_heads = 32, .query_pre_attn_scalar = 256.0, .attention_multiplier = 0.0078125}),
      InputError);
}

}  // namespace
}  // namespace attncheck
