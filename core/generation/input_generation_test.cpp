#include "core/generation/input_generation.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/config/presets.hpp"
#include "core/errors/input_error.hpp"
#include "core/generation/splitmix_stream.hpp"

namespace attncheck {
namespace {

const GeometrySpec kSpec = {.hidden_size = 16,
                            .num_heads = 6,
                            .num_kv_heads = 2,
                            .head_dim = 8,
                            .qk_norm = QkNorm::rms,
                            .qkv_bias = true,
                            .out_bias = true};

TEST(InputGeneration, SameSeedSameCaseDifferentSeedDifferentCase) {
  const Geometry geometry = resolve_geometry(kSpec);
  const Case a = generate_case(geometry, {.seed = 1, .batch = 2, .seq = 5});
  const Case b = generate_case(geometry, {.seed = 1, .batch = 2, .seq = 5});
  const Case c = generate_case(geometry, {.seed = 2, .batch = 2, .seq = 5});
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_NE(a.inputs.x, c.inputs.x);
  EXPECT_NE(a.weights.q_proj, c.weights.q_proj);
}

TEST(InputGeneration, PinnedValuesDoNotDriftAcrossPlatformsOrVersions) {
  // SplitMix64 streams, no <random> distributions: these values are part of the golden-file contract.
  const Geometry geometry = resolve_geometry({.hidden_size = 4, .num_heads = 2, .head_dim = 2});
  const Case test_case = generate_case(geometry, {.seed = 42, .batch = 1, .seq = 2});
  const std::vector<double> first_x(test_case.inputs.x.values.begin(), test_case.inputs.x.values.begin() + 4);
  const std::vector<double> first_q(test_case.weights.q_proj.values.begin(),
                                    test_case.weights.q_proj.values.begin() + 4);
  EXPECT_EQ(first_x, (std::vector<double>{-0x1.6p-3, -0x1.a8p-1, 0x1.8p-5, 0x1p+0}));
  EXPECT_EQ(first_q, (std::vector<double>{0x1.8p-2, 0x1.dp-3, 0x1.9p-2, 0x1.4p-4}));
}

// FNV-1a over the bit patterns of every value, tensor by tensor in a fixed order.
std::uint64_t fingerprint(const std::vector<const Tensor*>& tensors) {
  std::uint64_t hash = 0xCBF29CE484222325ULL;
  for (const Tensor* tensor : tensors) {
    for (double value : tensor->values) hash = (hash ^ std::bit_cast<std::uint64_t>(value)) * 0x100000001B3ULL;
  }
  return hash;
}

// Every value of a layer large enough for the threaded and tiled paths of input generation (o_proj 1024 x 1024),
// pinned: a faster generator must draw the same numbers, or every committed golden's inputs would move.
TEST(InputGeneration, WholeLayerPinnedAcrossRewritesOfTheGenerator) {
  const Geometry geometry = resolve_geometry({.hidden_size = 1024, .num_heads = 16, .num_kv_heads = 4, .head_dim = 64,
                                              .qk_norm = QkNorm::rms, .qkv_bias = true, .out_bias = true});
  const Case uniform = generate_case(geometry, {.seed = 7, .batch = 2, .seq = 33});
  const Case heavy = generate_case(
      geometry, {.seed = 7, .batch = 1, .seq = 9, .activations = ActivationDistribution::heavy_tailed});
  const Parameters& w = uniform.weights;
  ASSERT_TRUE(w.q_bias && w.k_bias && w.v_bias && w.o_bias && w.q_norm && w.k_norm);
  EXPECT_EQ(fingerprint({&w.q_proj, &w.k_proj, &w.v_proj, &w.o_proj, &*w.q_bias, &*w.k_bias, &*w.v_bias, &*w.o_bias,
                         &*w.q_norm, &*w.k_norm}),
            3142420999603795237ULL);
  EXPECT_EQ(fingerprint({&uniform.inputs.x, &uniform.inputs.dout, &heavy.inputs.x}), 8302248943003906853ULL);
}

// The rejection sampler with its limit computed once (UniformBelow, which uniform_below and symmetric_integer also
// use) draws what SCHEMA.md's definition draws, computed here the plain way: a limit and a remainder per draw.
TEST(SplitMixStream, UniformBelowDrawsAsTheDefinitionDoes) {
  for (const std::uint64_t range : std::vector<std::uint64_t>{1, 2, 65, 255, 1000003, (std::uint64_t{1} << 63) + 1, UINT64_MAX}) {
    SplitMixStream defined(3, "uniform-below"), hoisted(3, "uniform-below"), public_api(3, "uniform-below");
    const UniformBelow draw(range);
    for (int i = 0; i < 2000; ++i) {
      std::uint64_t value = defined.next();
      while (value >= UINT64_MAX - UINT64_MAX % range) value = defined.next();
      const std::uint64_t expected = value % range;
      ASSERT_EQ(draw(hoisted), expected) << "range " << range << ", draw " << i;
      if (range <= static_cast<std::uint64_t>(INT64_MAX)) {
        ASSERT_EQ(static_cast<std::uint64_t>(public_api.uniform_below(static_cast<std::int64_t>(range))), expected)
            << "uniform_below, range " << range << ", draw " << i;
      }
    }
  }
}

// Draws computed ahead (peek, then skip) are next()'s draws, and leave the stream where next() leaves it.
TEST(SplitMixStream, PeekAndSkipDrawAsNextDoes) {
  SplitMixStream one_by_one(5, "jitter"), ahead(5, "jitter");
  std::vector<std::uint64_t> block(37);
  for (const std::size_t taken : {37, 0, 1, 20, 37, 5}) {
    ahead.peek(block.data(), block.size());
    for (std::size_t i = 0; i < taken; ++i) ASSERT_EQ(block[i], one_by_one.next()) << "draw " << i;
    ahead.skip(taken);
  }
  EXPECT_EQ(ahead.next(), one_by_one.next());
}

TEST(InputGeneration, EveryValueIsExactInBf16AndFp16) {
  const Geometry geometry = resolve_geometry(kSpec);
  for (auto distribution :
       {ActivationDistribution::uniform, ActivationDistribution::heavy_tailed, ActivationDistribution::outliers}) {
    const Case test_case = generate_case(geometry, {.seed = 3, .batch = 2, .seq = 7, .activations = distribution});
    auto expect_exact = [&](std::string_view name, const Tensor& tensor) {
      for (double value : tensor.values) {
        ASSERT_TRUE(is_exact_in_half_precisions(value)) << name << " " << value << " " << to_string(distribution);
      }
    };
    expect_exact("x", test_case.inputs.x);
    expect_exact("dout", test_case.inputs.dout);
    for_each_parameter(test_case.weights, expect_exact);
  }
}

TEST(InputGeneration, ExactnessPredicate) {
  EXPECT_TRUE(is_exact_in_half_precisions(255.0 * 0.125));
  EXPECT_TRUE(is_exact_in_half_precisions(std::ldexp(1.0, -24)));
  EXPECT_FALSE(is_exact_in_half_precisions(257.0));                 // 9 significant bits
  EXPECT_FALSE(is_exact_in_half_precisions(0.1));                   // not dyadic
  EXPECT_FALSE(is_exact_in_half_precisions(std::ldexp(3.0, -25)));  // below fp16's subnormal grid
  EXPECT_FALSE(is_exact_in_half_precisions(65536.0));               // beyond fp16
}

TEST(InputGeneration, HeadsAreDistinctAndDifferInScale) {
  const Geometry geometry = resolve_geometry(kSpec);
  const Parameters weights = generate_weights(geometry, 5);
  const std::int64_t block = geometry.head_dim() * geometry.hidden_size();
  std::vector<double> head_rms;
  for (std::int64_t h = 0; h < geometry.num_heads(); ++h) {
    const auto begin = weights.q_proj.values.begin() + h * block;
    double sum = 0.0;
    for (auto it = begin; it != begin + block; ++it) sum += *it * *it;
    head_rms.push_back(std::sqrt(sum / block));
    for (std::int64_t other = 0; other < h; ++other) {
      EXPECT_FALSE(std::equal(begin, begin + block, weights.q_proj.values.begin() + other * block))
          << "heads " << other << " and " << h;
    }
  }
  const auto [low, high] = std::minmax_element(head_rms.begin(), head_rms.end());
  EXPECT_GT(*high / *low, 1.5) << "per-head scales should differ";
}

TEST(InputGeneration, TinyHeadsAreStillDistinct) {
  // hidden 1, head_dim 2: 2 values per head block, 64 heads; collisions must be redrawn.
  const Geometry geometry = resolve_geometry({.hidden_size = 1, .num_heads = 64, .head_dim = 2});
  const Parameters weights = generate_weights(geometry, 9);
  for (std::int64_t h = 0; h < 64; ++h) {
    for (std::int64_t other = 0; other < h; ++other) {
      EXPECT_FALSE(weights.q_proj.values[2 * h] == weights.q_proj.values[2 * other] &&
                   weights.q_proj.values[2 * h + 1] == weights.q_proj.values[2 * other + 1]);
    }
  }
}


TEST(InputGeneration, FirstDrawsKeepTheBlockTheRuleRedraws) {
  // Seed 3675 at this geometry is the committed golden small_duplicate_block's: q_proj head 3's first
  // draw equals an earlier head's block, so the rule redraws it; first_draws keeps the duplicate (golden
  // coverage's "duplicate-block rule" off), and every other block is the same in both.
  const Geometry geometry = resolve_geometry({.hidden_size = 1, .num_heads = 4, .num_kv_heads = 2, .head_dim = 2});
  const Parameters distinct = generate_weights(geometry, 3675);
  const Parameters first = generate_weights(geometry, 3675, HeadBlocks::first_draws);
  const auto block = [](const Tensor& t, int head) { return std::vector<double>(t.values.begin() + 2 * head,
                                                                              t.values.begin() + 2 * head + 2); };
  int equal_to_earlier = 0;
  for (int head = 1; head < 4; ++head) {
    for (int other = 0; other < head; ++other) equal_to_earlier += block(first.q_proj, head) == block(first.q_proj, other);
  }
  EXPECT_EQ(equal_to_earlier, 1);
  EXPECT_NE(block(first.q_proj, 3), block(distinct.q_proj, 3));
  for (int head = 0; head < 3; ++head) EXPECT_EQ(block(first.q_proj, head), block(distinct.q_proj, head));
  EXPECT_EQ(first.k_proj, distinct.k_proj);
  EXPECT_EQ(first.v_proj, distinct.v_proj);
  EXPECT_EQ(first.o_proj, distinct.o_proj);
}
TEST(InputGeneration, WeightScaleFollowsFanIn) {
  // Qwen3-0.6B: q_proj fan-in 1024 (std ~ 1/32), o_proj fan-in 2048 (std ~ 1/45).
  const Geometry geometry = resolve_geometry(find_preset("qwen3-0.6b")->spec);
  const Parameters weights = generate_weights(geometry, 1);
  auto rms = [](const Tensor& t) {
    double sum = 0.0;
    for (double v : t.values) sum += v * v;
    return std::sqrt(sum / t.numel());
  };
  // Within a factor sqrt(2): the scale is a power of two.
  for (double ratio :
       {rms(weights.q_proj) * 32.0, rms(weights.k_proj) * 32.0, rms(weights.o_proj) * std::sqrt(2048.0)}) {
    EXPECT_GT(ratio, 0.7);
    EXPECT_LT(ratio, 1.42);
  }
}

TEST(InputGeneration, PositionsPaddingAndDistributions) {
  const Geometry geometry = resolve_geometry(kSpec);
  const Inputs inputs = generate_inputs(geometry, {.seed = 8, .batch = 4, .seq = 6, .pad_keys = true});
  EXPECT_EQ(inputs.key_lengths[0], 6);
  for (std::int64_t b = 0; b < 4; ++b) {
    EXPECT_GE(inputs.key_lengths[b], 1);
    EXPECT_LE(inputs.key_lengths[b], 6);
    for (std::int64_t s = 1; s < 6; ++s) EXPECT_EQ(inputs.positions[b * 6 + s], inputs.positions[b * 6] + s);
  }
  EXPECT_LT(inputs.positions[0], 16);
  EXPECT_GE(inputs.positions[6], 1 << 16);  // later rows start at large offsets
  const Inputs heavy = generate_inputs(
      geometry, {.seed = 8, .batch = 4, .seq = 64, .activations = ActivationDistribution::heavy_tailed});
  double largest = 0.0;
  for (double v : heavy.x.values) largest = std::max(largest, std::fabs(v));
  EXPECT_GT(largest, 4.0) << "heavy tail should reach beyond the uniform range [-1, 1]";
  // Explicit key lengths replace the drawn ones, and change nothing else.
  const Inputs explicit_lengths =
      generate_inputs(geometry, {.seed = 8, .batch = 4, .seq = 6, .pad_keys = true, .key_lengths = {6, 0, 3, 5}});
  EXPECT_EQ(explicit_lengths.key_lengths, (std::vector<std::int64_t>{6, 0, 3, 5}));
  EXPECT_EQ(explicit_lengths.x, inputs.x);
  EXPECT_EQ(explicit_lengths.positions, inputs.positions);
}

TEST(InputGeneration, BadOptionsAreInputErrors) {
  const Geometry geometry = resolve_geometry(kSpec);
  EXPECT_THROW(generate_inputs(geometry, {.batch = 0}), InputError);
  EXPECT_THROW(generate_inputs(geometry, {.seq = -1}), InputError);
  EXPECT_THROW(generate_inputs(geometry, {.seq = 4, .position_offset = kMaxPosition}), InputError);
  EXPECT_THROW(generate_inputs(geometry, {.seq = 4, .position_offset = std::numeric_limits<std::int64_t>::max()}),
               InputError);  // offset + seq would overflow
  EXPECT_THROW(generate_inputs(geometry, {.batch = 1 << 20, .seq = 1 << 20}), InputError);  // 2^44 values
  EXPECT_THROW(generate_weights(resolve_geometry({.hidden_size = 1 << 20, .num_heads = 4096, .head_dim = 1 << 10}), 1),
               InputError);                                           // 2^42 parameters
  EXPECT_THROW(generate_case(geometry, {.tp_size = 4}), InputError);  // 2 KV heads, 6 query heads
  EXPECT_THROW(generate_inputs(geometry, {.batch = 2, .seq = 4, .key_lengths = {4}}), InputError);  // one row short
  EXPECT_THROW(generate_inputs(geometry, {.batch = 1, .seq = 4, .key_lengths = {5}}), InputError);  // past seq
  EXPECT_THROW(generate_inputs(geometry, {.batch = 1, .seq = 4, .key_lengths = {-1}}), InputError);
  EXPECT_EQ(parse_activation_distribution("heavy-tailed"), ActivationDistribution::heavy_tailed);
  EXPECT_FALSE(parse_activation_distribution("gaussian").has_value());
}

}  // namespace
}  // namespace attncheck
