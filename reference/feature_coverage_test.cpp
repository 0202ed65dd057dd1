// feature_coverage()'s scale features: a stated scale equal to the default is recorded as not biting without
// rerunning the layer (the reference reads only the scale), and one that differs is run and bites.
#include "reference/feature_coverage.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/generation/input_generation.hpp"

namespace attncheck {
namespace {

Case scaled_case(const GeometrySpec& spec) {
  return generate_case(resolve_geometry(spec), {.seed = 5, .batch = 1, .seq = 5, .tp_size = 1});
}

const reference::FeatureBite& find(const std::vector<reference::FeatureBite>& bites, const std::string& feature) {
  const auto it = std::find_if(bites.begin(), bites.end(), [&](const auto& bite) { return bite.feature == feature; });
  if (it == bites.end()) throw std::runtime_error("no bite for " + feature);
  return *it;
}

TEST(FeatureCoverage, AStatedScaleEqualToTheDefaultCannotBiteAndIsNotRerun) {
  // head_dim 6: query_pre_attn_scalar 6 and attention_multiplier 6^-0.5 give the default's very double.
  for (const bool multiplier : {false, true}) {
    GeometrySpec spec{.hidden_size = 12, .num_heads = 2, .num_kv_heads = 1, .head_dim = 6};
    if (multiplier) {
      spec.attention_multiplier = std::pow(6.0, -0.5);
    } else {
      spec.query_pre_attn_scalar = 6.0;
    }
    const auto bites = reference::feature_coverage(scaled_case(spec));
    const auto& bite = find(bites, multiplier ? "attention multiplier" : "scale source");
    EXPECT_FALSE(bite.bites);
    EXPECT_EQ(bite.tolerances, 0.0);
    EXPECT_NE(bite.off.find("not rerun"), std::string::npos) << bite.off;
  }
}

TEST(FeatureCoverage, AStatedScaleThatDiffersIsRunAndBites) {
  for (const bool multiplier : {false, true}) {
    GeometrySpec spec{.hidden_size = 12, .num_heads = 2, .num_kv_heads = 1, .head_dim = 6};
    if (multiplier) {
      spec.attention_multiplier = 0.25;
    } else {
      spec.query_pre_attn_scalar = 8.0;
    }
    const auto bites = reference::feature_coverage(scaled_case(spec));
    const auto& bite = find(bites, multiplier ? "attention multiplier" : "scale source");
    EXPECT_TRUE(bite.bites) << bite.tolerances;
    EXPECT_GT(bite.tolerances, 1e3);
    EXPECT_EQ(bite.off.find("not rerun"), std::string::npos) << bite.off;
  }
}

}  // namespace
}  // namespace attncheck
