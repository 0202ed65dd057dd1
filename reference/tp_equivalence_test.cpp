// reference-tp against the unsharded reference: every valid TP size of every preset geometry (real
// widths, short sequences), forward, every gradient, the intermediates and decoding within 1e-12
// relative; invalid sizes are errors. rank_gradients are slices of the assembled gradients by
// construction (core/tp/tp_shard.hpp); the check on them pins their count, order and shard layout, the
// reductions themselves being checked through the assembled gradients and in tp_shard_test.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/config/presets.hpp"
#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "core/tp/tp_shard.hpp"
#include "reference/reference.hpp"
#include "reference/test_support.hpp"

namespace attncheck {
namespace {

constexpr double kTolerance = 1e-12;

void expect_tp_matches_unsharded(const Geometry& geometry, const InputOptions& base_options) {
  // One case for every size: run_reference ignores the plan, run_reference_tp follows it. (Copies of
  // a 20B-parameter layer's weights cost seconds and gigabytes, so the plan is swapped in place.)
  Case test_case = generate_case(geometry, base_options);
  const reference::RunOptions run{.intermediates = true};
  const Result unsharded = reference::run_reference(test_case, run);
  const std::vector<std::int64_t> sizes = valid_tp_sizes(geometry);
  ASSERT_FALSE(sizes.empty());
  for (std::int64_t tp_size : sizes) {
    SCOPED_TRACE(fmt::format("tp_size {} of {}", tp_size, testing::describe(geometry)));
    test_case.plan = make_tp_plan(geometry, tp_size);
    const Result sharded = reference::run_reference_tp(test_case, run);
    EXPECT_EQ(sharded.implementation, "reference-tp");
    EXPECT_LE(testing::relative_error(sharded.out, unsharded.out), kTolerance) << "out";
    testing::for_each_gradient_pair(*sharded.gradients, *unsharded.gradients,
                                    [&](const std::string& name, const Tensor& actual, const Tensor& expected) {
                                      EXPECT_LE(testing::relative_error(actual, expected), kTolerance) << name;
                                    });
    // A rank stacks its own query heads of a KV group into each GEMM, so with KV replication the GEMM
    // shapes (and roundings) differ from the unsharded run's: equal within the same bound, not bitwise.
    const Intermediates& a = *sharded.intermediates;
    const Intermediates& b = *unsharded.intermediates;
    EXPECT_LE(testing::relative_error(a.q, b.q), kTolerance) << "q";
    EXPECT_LE(testing::relative_error(a.k, b.k), kTolerance) << "k";
    EXPECT_LE(testing::relative_error(a.v, b.v), kTolerance) << "v";
    EXPECT_LE(testing::relative_error(a.context, b.context), kTolerance) << "context";
    EXPECT_EQ(a.lse.shape, b.lse.shape);
    for (std::size_t i = 0; i < a.lse.values.size(); ++i) {  // -inf where a query sees no key
      if (std::isinf(b.lse.values[i])) {
        EXPECT_EQ(a.lse.values[i], b.lse.values[i]) << "lse " << i;
      } else {
        EXPECT_NEAR(a.lse.values[i], b.lse.values[i], kTolerance * (1 + std::fabs(b.lse.values[i]))) << "lse " << i;
      }
    }
    ASSERT_EQ(static_cast<std::int64_t>(sharded.rank_gradients.size()), tp_size);
    for (int r = 0; r < tp_size; ++r) {
      const Parameters expected = shard_parameters(unsharded.gradients->params, test_case.plan, r);
      std::vector<const Tensor*> expected_tensors;
      for_each_parameter(expected, [&](std::string_view, const Tensor& t) { expected_tensors.push_back(&t); });
      std::size_t index = 0;
      for_each_parameter(sharded.rank_gradients[r], [&](std::string_view name, const Tensor& actual) {
        ASSERT_LT(index, expected_tensors.size());
        EXPECT_LE(testing::relative_error(actual, *expected_tensors[index++]), kTolerance)
            << "rank " << r << " " << name;
      });
      EXPECT_EQ(index, expected_tensors.size());
    }
    if (!base_options.decode.empty()) {
      EXPECT_LE(testing::relative_error(*sharded.decode_out, *unsharded.decode_out), kTolerance) << "decode";
    }
  }
}

class PresetTpTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PresetTpTest, EveryValidTpSizeMatchesUnsharded) {
  const Preset* preset = find_preset(GetParam());
  ASSERT_NE(preset, nullptr);
  expect_tp_matches_unsharded(
      resolve_geometry(preset->spec),
      {.seed = 31, .batch = 2, .seq = 3, .pad_keys = true, .decode = {.prefill = 2, .steps = {1}}});
}

INSTANTIATE_TEST_SUITE_P(Presets, PresetTpTest, ::testing::ValuesIn(preset_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(TpEquivalence, KnownReplicationCases) {
  // Qwen3-32B at TP 16 replicates each KV head twice; Gemma 3 270M at TP 4 four times.
  EXPECT_EQ(make_tp_plan(resolve_geometry(find_preset("qwen3-32b")->spec), 16).kv_replicas, 2);
  EXPECT_EQ(make_tp_plan(resolve_geometry(find_preset("gemma-3-270m")->spec), 4).kv_replicas, 4);
}

TEST(TpEquivalence, SmallGeometriesWithLongerSequences) {
  for (std::uint64_t seed = 300; seed < 308; ++seed) {
    const Geometry geometry = resolve_geometry(testing::random_small_geometry(seed));
    InputOptions options{.seed = seed, .batch = 2, .seq = 9, .pad_keys = true};
    if (geometry.causal()) options.decode = {.prefill = 4, .steps = {2, 1}};
    expect_tp_matches_unsharded(geometry, options);
  }
}

// OLMo-2's whole-width QK-norm: every rank holds a slice of the width, so reference-tp all-reduces the
// sums of squares (a replicated KV head counted once) and the backward's sums of dn * n (every replica's
// part). TP 4 and 8 over 2 KV heads replicate each twice and four times.
TEST(TpEquivalence, WholeWidthQkNormIncludingReplicatedKvHeads) {
  for (const bool bias : {false, true}) {
    const Geometry geometry = resolve_geometry({.hidden_size = 12,
                                                .num_heads = 8,
                                                .num_kv_heads = 2,
                                                .head_dim = 6,
                                                .rotary_dim = 4,
                                                .qk_norm = QkNorm::rms_full_width,
                                                .qkv_bias = bias,
                                                .out_bias = bias});
    expect_tp_matches_unsharded(
        geometry, {.seed = 41, .batch = 2, .seq = 7, .pad_keys = true, .decode = {.prefill = 3, .steps = {2, 1}}});
  }
}

TEST(TpEquivalence, InvalidTpSizeIsAnErrorNotAResult) {
  const Geometry geometry = resolve_geometry(find_preset("qwen3-4b")->spec);  // 32 query heads, 8 KV heads
  for (std::int64_t tp_size : {3, 5, 64, 0, -2}) {
    try {
      generate_case(geometry, {.seq = 2, .tp_size = tp_size});
      ADD_FAILURE() << "tp_size " << tp_size << " was accepted";
    } catch (const InputError& error) {
      EXPECT_TRUE(error.names_field("tp_size")) << error.what();
    }
  }
}

}  // namespace
}  // namespace attncheck
