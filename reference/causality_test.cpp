// Causality: changing x at positions > t changes no output at positions <= t, bit for bit (masked keys
// get probability exactly 0, and 0 times any finite value is 0).
#include <gtest/gtest.h>

#include "core/generation/input_generation.hpp"
#include "reference/reference.hpp"
#include "reference/test_support.hpp"

namespace attncheck {
namespace {

class CausalityTest : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(CausalityTest, FutureTokensDoNotReachThePast) {
  GeometrySpec spec = testing::random_small_geometry(GetParam());
  spec.causal = true;
  const Geometry geometry = resolve_geometry(spec);
  const std::int64_t batch = 2, seq = 7, hidden = geometry.hidden_size();
  const Case original = generate_case(geometry, {.seed = GetParam(), .batch = batch, .seq = seq, .pad_keys = true});
  const Tensor before = reference::run_reference(original, {.gradients = false}).out;
  for (std::int64_t t = 0; t < seq - 1; ++t) {
    Case changed = original;
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t s = t + 1; s < seq; ++s) {
        for (std::int64_t c = 0; c < hidden; ++c) changed.inputs.x.values[(b * seq + s) * hidden + c] += 0.75 + c;
      }
    }
    const Tensor after = reference::run_reference(changed, {.gradients = false}).out;
    bool future_changed = false;
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t s = 0; s < seq; ++s) {
        for (std::int64_t c = 0; c < hidden; ++c) {
          const std::int64_t i = (b * seq + s) * hidden + c;
          if (s <= t) {
            ASSERT_EQ(after.values[i], before.values[i]) << "t " << t << " batch " << b << " position " << s;
          } else if (after.values[i] != before.values[i]) {
            future_changed = true;
          }
        }
      }
    }
    // The change must be visible somewhere, or the check above proves nothing.
    EXPECT_TRUE(future_changed) << "t " << t << ": " << testing::describe(geometry);
  }
}

INSTANTIATE_TEST_SUITE_P(RandomGeometries, CausalityTest, ::testing::Range<std::uint64_t>(200, 208));

}  // namespace
}  // namespace attncheck
