#include <gtest/gtest.h>

#include "core/capabilities/capabilities.hpp"
#include "core/capabilities/capabilities_json.hpp"
#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"

namespace attncheck {
namespace {

// A plain modern layer: GQA, explicit head_dim (32, not 64 / 4), full half-split RoPE, causal, positions from 0.
GeometrySpec plain_spec() {
  return GeometrySpec{.hidden_size = 64, .num_heads = 4, .num_kv_heads = 2, .head_dim = 32};
}

CaseOutline outline(const GeometrySpec& spec, InputOptions options = {}) {
  if (!options.position_offset) options.position_offset = 0;
  options.batch = 2;
  options.seq = 6;
  return outline_of(generate_case(resolve_geometry(spec), options));
}

Capabilities plain_layer() {
  return parse_capabilities_text(
      R"({"features": ["gqa", "explicit-head-dim", "rope-half-split", "causal", "backward"]})", "test");
}

TEST(FeatureNames, TableIsInDeclarationOrderAndNamesRoundTrip) {
  std::size_t index = 0;
  for (const FeatureInfo& entry : all_features()) {
    EXPECT_EQ(static_cast<std::size_t>(entry.feature), index++) << entry.name;
    EXPECT_EQ(parse_feature(entry.name), entry.feature);
  }
  EXPECT_FALSE(parse_feature("soft-cap"));
}

TEST(CaseFeatures, PlainLayerUsesItsBasicsOnly) {
  EXPECT_EQ(features_of(outline(plain_spec())),
            (FeatureSet{Feature::gqa, Feature::explicit_head_dim, Feature::rope_half_split, Feature::causal,
                        Feature::backward}));
  // head_dim equal to the quotient is not an explicit head_dim, whether stated or derived.
  GeometrySpec quotient = plain_spec();
  quotient.head_dim = 16;
  EXPECT_FALSE(features_of(outline(quotient)).contains(Feature::explicit_head_dim));
}

TEST(CaseFeatures, EachFeatureIsSeen) {
  GeometrySpec spec = plain_spec();
  spec.rotary_dim = 8;
  spec.rope_style = RopeStyle::interleaved;
  spec.qk_norm = QkNorm::rms;
  spec.qkv_bias = true;
  spec.softcap = 30.0;
  spec.sliding_window = 2;
  spec.attention_sinks = true;
  spec.query_pre_attn_scalar = 20.0;
  const FeatureSet features = features_of(outline(spec, {.position_offset = 7,
                                                         .position_gaps = true,
                                                         .key_lengths = {6, 1},
                                                         .decode = {.prefill = 4, .steps = {2}},
                                                         .tp_size = 4}));
  for (const Feature expected :
       {Feature::partial_rope, Feature::rope_interleaved, Feature::qk_norm_rms, Feature::qkv_bias, Feature::softcap,
        Feature::sliding_window, Feature::sinks, Feature::custom_scale, Feature::position_offsets,
        Feature::position_gaps, Feature::key_padding, Feature::keyless_rows, Feature::decode, Feature::tensor_parallel,
        Feature::kv_replication}) {
    EXPECT_TRUE(features.contains(expected)) << to_string(expected);
  }
  EXPECT_FALSE(features.contains(Feature::rope_half_split));
  EXPECT_FALSE(features.contains(Feature::out_bias));
}

TEST(CaseFeatures, KeylessRowsFollowTheMask) {
  // Window 2 over keys 0..1 of row 1: queries 3, 4, 5 see nothing.
  GeometrySpec windowed = plain_spec();
  windowed.sliding_window = 2;
  EXPECT_TRUE(has_keyless_queries(outline(windowed, {.key_lengths = {6, 2}})));
  // With seq - window + 1 = 5 keys, the last query still sees key 4.
  EXPECT_FALSE(has_keyless_queries(outline(windowed, {.key_lengths = {6, 5}})));
  // A row of no keys at all.
  EXPECT_TRUE(has_keyless_queries(outline(plain_spec(), {.key_lengths = {6, 0}})));
  EXPECT_FALSE(has_keyless_queries(outline(plain_spec(), {.key_lengths = {6, 1}})));
}

TEST(Admission, OutsideNamesEveryMissingRequirementAndLimit) {
  GeometrySpec spec = plain_spec();
  spec.softcap = 5.0;
  spec.qkv_bias = true;
  Capabilities capabilities = plain_layer();
  capabilities.head_dim_multiple_of = 64;
  capabilities.max_seq = 4;
  const Admission admission = admit(capabilities, outline(spec));
  EXPECT_FALSE(admission.admitted());
  EXPECT_EQ(admission.outside, (std::vector<std::string>{"qkv-bias", "softcap", "head_dim 32 (a multiple of 64 stated)",
                                                         "seq 6 (at most 4 stated)"}));
  EXPECT_EQ(admission.reason(),
            "outside its stated capabilities: qkv-bias, softcap, head_dim 32 (a multiple of 64 stated), seq 6 (at most "
            "4 stated)");
}

TEST(Admission, PartsNotStatedAreLeftOutNotRefused) {
  const Admission admission =
      admit(plain_layer(), outline(plain_spec(), {.decode = {.prefill = 4, .steps = {1, 1}}, .tp_size = 2}));
  EXPECT_TRUE(admission.admitted());
  EXPECT_EQ(admission.parts_not_stated.count("decode"), 1u);
  EXPECT_FALSE(admission.per_rank_gradients);  // tensor-parallel not stated: run as one process
}

TEST(Admission, PerRankGradientsOnlyWithinTheStatedPlan) {
  Capabilities capabilities = plain_layer();
  capabilities.features.insert(Feature::tensor_parallel);
  capabilities.max_tp_size = 2;
  EXPECT_TRUE(admit(capabilities, outline(plain_spec(), {.tp_size = 2})).per_rank_gradients);
  EXPECT_FALSE(admit(capabilities, outline(plain_spec(), {.tp_size = 4})).per_rank_gradients);  // above 2
  capabilities.max_tp_size = 4;
  EXPECT_FALSE(admit(capabilities, outline(plain_spec(), {.tp_size = 4})).per_rank_gradients);  // replicates KV
  capabilities.features.insert(Feature::kv_replication);
  EXPECT_TRUE(admit(capabilities, outline(plain_spec(), {.tp_size = 4})).per_rank_gradients);
  capabilities.features.erase(Feature::backward);  // no gradients at all: none per rank either
  const Admission forward_only = admit(capabilities, outline(plain_spec(), {.tp_size = 4}));
  EXPECT_FALSE(forward_only.per_rank_gradients);
  EXPECT_EQ(forward_only.parts_not_stated.count("grads"), 1u);
}

TEST(Admission, EverythingAdmitsEveryCase) {
  GeometrySpec spec = plain_spec();
  spec.softcap = 5.0;
  const Admission admission =
      admit(Capabilities::everything(), outline(spec, {.decode = {.prefill = 5, .steps = {1}}, .tp_size = 4}));
  EXPECT_TRUE(admission.admitted());
  EXPECT_TRUE(admission.parts_not_stated.empty());
  EXPECT_TRUE(admission.per_rank_gradients);
}

TEST(CapabilityStatement, ReadsEveryKeyAndRoundTrips) {
  const Capabilities read = parse_capabilities_text(
      R"({"features": "all", "without": ["latent", "sinks"], "head_dim_multiple_of": 8, "max_head_dim": 256,
          "max_seq": 4096, "max_batch": 4, "max_num_heads": 64, "max_hidden_size": 8192, "max_tp_size": 4,
          "precisions": ["fp32", "bf16"]})",
      "test");
  EXPECT_TRUE(read.stated);
  EXPECT_FALSE(read.features.contains(Feature::latent));
  EXPECT_FALSE(read.features.contains(Feature::sinks));
  EXPECT_TRUE(read.features.contains(Feature::softcap));
  EXPECT_EQ(read.head_dim_multiple_of, 8);
  EXPECT_EQ(read.max_tp_size, 4);
  EXPECT_EQ(read.precisions, (PrecisionSet{Precision::fp32, Precision::bf16}));
  EXPECT_EQ(parse_capabilities(to_json(read), "round trip"), read);
}

TEST(CapabilityStatement, RefusesEveryProblemAtOnce) {
  try {
    parse_capabilities_text(R"({"features": ["causal", "soft-cap"], "max_seq": 0, "colour": "blue"})",
                            "worker statement");
    FAIL() << "accepted";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("colour"));
    EXPECT_TRUE(error.names_field("features"));
    EXPECT_TRUE(error.names_field("max_seq"));
    EXPECT_NE(std::string(error.what()).find("rope-half-split"), std::string::npos);  // the valid names
  }
  // Required, never defaulted to "all".
  EXPECT_THROW(parse_capabilities_text(R"({"max_seq": 8})", "test"), InputError);
  // A statement under which no case exists: no RoPE form.
  EXPECT_THROW(parse_capabilities_text(R"({"features": ["causal", "backward"]})", "test"), InputError);
  EXPECT_THROW(parse_capabilities_text("not json", "test"), InputError);
  // No head_dim its limits allow: even and a multiple of 3 is at least 6; one head must fit in hidden_size.
  EXPECT_THROW(parse_capabilities_text(R"({"features": ["causal", "rope-half-split"], "max_head_dim": 1})", "t"),
               InputError);
  EXPECT_THROW(parse_capabilities_text(
                   R"({"features": ["causal", "rope-half-split"], "head_dim_multiple_of": 3, "max_head_dim": 5})", "t"),
               InputError);
  EXPECT_THROW(parse_capabilities_text(R"({"features": ["causal", "rope-half-split"], "max_hidden_size": 1})", "t"),
               InputError);
  EXPECT_NO_THROW(parse_capabilities_text(
      R"({"features": ["causal", "rope-half-split", "explicit-head-dim"], "max_hidden_size": 1})", "t"));
  EXPECT_THROW(parse_capabilities_text(R"(["causal"])", "test"), InputError);
}

}  // namespace
}  // namespace attncheck
