// An omitted head_dim gives exactly the numbers of head_dim = hidden / num_heads written out: the same
// shapes, the same outputs and gradients, bit for bit.
#include <gtest/gtest.h>

#include "core/config/presets.hpp"
#include "core/generation/input_generation.hpp"
#include "reference/reference.hpp"

namespace attncheck {
namespace {

void expect_identical_runs(GeometrySpec omitted, std::int64_t explicit_head_dim) {
  ASSERT_FALSE(omitted.head_dim.has_value());
  GeometrySpec written = omitted;
  written.head_dim = explicit_head_dim;
  const Geometry derived_geometry = resolve_geometry(omitted);
  const Geometry explicit_geometry = resolve_geometry(written);
  ASSERT_EQ(derived_geometry.head_dim_source(), HeadDimSource::derived);
  ASSERT_EQ(explicit_geometry.head_dim_source(), HeadDimSource::explicit_value);
  const InputOptions options{
      .seed = 17, .batch = 2, .seq = 6, .pad_keys = true, .decode = {.prefill = 3, .steps = {1, 2}}};
  const Case derived = generate_case(derived_geometry, options);
  const Case written_case = generate_case(explicit_geometry, options);
  EXPECT_EQ(derived.weights, written_case.weights);
  const reference::RunOptions run{.intermediates = true};
  const Result a = reference::run_reference(derived, run);
  const Result b = reference::run_reference(written_case, run);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.gradients, b.gradients);
  EXPECT_EQ(a.intermediates, b.intermediates);
  EXPECT_EQ(a.decode_out, b.decode_out);
}

TEST(HeadDimOmitted, SmallGqaGeometry) {
  expect_identical_runs({.hidden_size = 16, .num_heads = 4, .num_kv_heads = 2, .qk_norm = QkNorm::rms}, 4);
}

TEST(HeadDimOmitted, PartialRotaryWithBiases) {
  expect_identical_runs({.hidden_size = 16, .num_heads = 2, .rotary_pct = 0.25, .qkv_bias = true, .out_bias = true}, 8);
}

TEST(HeadDimOmitted, Pythia410mShapes) {
  // Pythia's config has no head_dim: 1024 / 16 = 64, as before head_dim existed. Run on a short sequence.
  const Preset* preset = find_preset("pythia-410m");
  ASSERT_NE(preset, nullptr);
  ASSERT_FALSE(preset->spec.head_dim.has_value());
  expect_identical_runs(preset->spec, 64);
}

}  // namespace
}  // namespace attncheck
