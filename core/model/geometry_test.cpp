// Geometry rules: the numbers from the GPT-NeoX head_dim request, the omitted-head_dim regression, and
// every validation rule with its message (field, value, rule, nearby valid value).
#include "core/model/geometry.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "core/errors/input_error.hpp"

namespace attncheck {
namespace {

GeometrySpec spec(std::int64_t hidden_size, std::int64_t num_heads, std::optional<std::int64_t> num_kv_heads,
                  std::optional<std::int64_t> head_dim) {
  return {.hidden_size = hidden_size, .num_heads = num_heads, .num_kv_heads = num_kv_heads, .head_dim = head_dim};
}

// The InputError resolve_geometry throws for `bad`; fails the test when it does not throw.
InputError rejection(const GeometrySpec& bad) {
  try {
    resolve_geometry(bad);
  } catch (const InputError& error) {
    return error;
  }
  ADD_FAILURE() << "geometry was accepted";
  return InputError("none", {});
}

TEST(Geometry, Qwen3_0_6bExpandsQueriesBeyondHidden) {
  const Geometry geometry = resolve_geometry(spec(1024, 16, 8, 128));
  EXPECT_EQ(geometry.head_dim(), 128);
  EXPECT_EQ(geometry.head_dim_source(), HeadDimSource::explicit_value);
  EXPECT_EQ(geometry.quotient_head_dim(), 64);
  EXPECT_EQ(geometry.query_width(), 2048);  // q_proj 1024 -> 2048, o_proj 2048 -> 1024
  EXPECT_EQ(geometry.kv_width(), 1024);
  EXPECT_EQ(geometry.qkv_width(), 4096);  // 2048 + 2 x 1024
  EXPECT_EQ(geometry.group_size(), 2);
  EXPECT_EQ(geometry.rotary_dim(), 128);
  EXPECT_EQ(geometry.scale(), std::pow(128.0, -0.5));
  EXPECT_EQ(geometry.scale_source(), ScaleSource::head_dim);
}

TEST(Geometry, Qwen3_4bAnd32bUse128Not80) {
  for (const auto& [hidden_size, num_heads] : {std::pair{2560, 32}, std::pair{5120, 64}}) {
    const Geometry geometry = resolve_geometry(spec(hidden_size, num_heads, 8, 128));
    EXPECT_EQ(geometry.head_dim(), 128);
    EXPECT_EQ(geometry.quotient_head_dim(), 80);
    EXPECT_EQ(geometry.query_width(), num_heads * 128);
    EXPECT_NE(geometry.query_width(), hidden_size);
    EXPECT_EQ(geometry.kv_width(), 1024);
  }
}

TEST(Geometry, GptNeox20bWithHeadDimOmittedKeepsItsShapes) {
  const Geometry geometry = resolve_geometry({.hidden_size = 6144, .num_heads = 64, .rotary_pct = 0.25});
  EXPECT_EQ(geometry.head_dim(), 96);
  EXPECT_EQ(geometry.head_dim_source(), HeadDimSource::derived);
  EXPECT_EQ(geometry.num_kv_heads(), 64);
  EXPECT_EQ(geometry.query_width(), 6144);  // == hidden_size: the shapes before head_dim existed
  EXPECT_EQ(geometry.qkv_width(), 3 * 6144);
  EXPECT_EQ(geometry.rotary_dim(), 24);
}

TEST(Geometry, OmittedHeadDimEqualsExplicitQuotient) {
  // (geometry without head_dim, the head_dim its old shapes imply)
  for (const auto& [omitted, old_head_dim] :
       {std::pair{spec(6144, 64, std::nullopt, std::nullopt), 96}, std::pair{spec(4096, 32, 8, std::nullopt), 128},
        std::pair{spec(1024, 16, 4, std::nullopt), 64}, std::pair{spec(96, 3, 1, std::nullopt), 32}}) {
    GeometrySpec stated = omitted;
    stated.head_dim = old_head_dim;
    const Geometry derived = resolve_geometry(omitted);
    const Geometry explicit_geometry = resolve_geometry(stated);
    EXPECT_EQ(derived.head_dim(), old_head_dim);
    EXPECT_EQ(derived.head_dim(), explicit_geometry.head_dim());
    EXPECT_EQ(derived.query_width(), explicit_geometry.query_width());
    EXPECT_EQ(derived.kv_width(), explicit_geometry.kv_width());
    EXPECT_EQ(derived.rotary_dim(), explicit_geometry.rotary_dim());
    EXPECT_EQ(derived.scale(), explicit_geometry.scale());  // bit-identical numbers
    EXPECT_EQ(derived.head_dim_source(), HeadDimSource::derived);
    EXPECT_EQ(explicit_geometry.head_dim_source(), HeadDimSource::explicit_value);
  }
}

TEST(Geometry, ExplicitHeadDimNeedsNoDivisibility) {
  const Geometry geometry = resolve_geometry(spec(1000, 16, 4, 64));
  EXPECT_EQ(geometry.head_dim(), 64);
  EXPECT_EQ(geometry.quotient_head_dim(), std::nullopt);
  EXPECT_EQ(geometry.query_width(), 1024);
}

TEST(Geometry, NonDividingDerivedHeadDimIsRejectedWithNearbyValues) {
  const InputError error = rejection(spec(1000, 16, std::nullopt, std::nullopt));
  ASSERT_EQ(error.violations().size(), 1u);
  const Violation& violation = error.violations().front();
  EXPECT_EQ(violation.field, "head_dim");
  EXPECT_EQ(violation.value, "absent");
  EXPECT_NE(violation.rule.find("hidden_size (1000) must be divisible by num_heads (16)"), std::string::npos);
  EXPECT_NE(violation.suggestion.find("set head_dim explicitly"), std::string::npos);
  EXPECT_NE(violation.suggestion.find("hidden_size = 992 or 1008"), std::string::npos);
  EXPECT_NE(violation.suggestion.find("num_heads = 10 or 20"), std::string::npos);
}

TEST(Geometry, QueryHeadsMustBeAMultipleOfKvHeads) {
  const InputError error = rejection(spec(1024, 16, 3, 64));
  ASSERT_TRUE(error.names_field("num_kv_heads"));
  const Violation& violation = error.violations().front();
  EXPECT_EQ(violation.value, "3");
  EXPECT_NE(violation.rule.find("num_heads (16) must be a multiple of num_kv_heads"), std::string::npos);
  EXPECT_EQ(violation.suggestion, "nearby valid: num_kv_heads = 2 or 4");

  const InputError more_kv_than_q = rejection(spec(1024, 8, 16, 64));
  EXPECT_EQ(more_kv_than_q.violations().front().suggestion, "nearby valid: num_kv_heads = 8");
}

TEST(Geometry, OddRotaryDimIsRejected) {
  GeometrySpec bad = spec(1024, 16, 8, 128);
  bad.rotary_dim = 63;
  const InputError error = rejection(bad);
  ASSERT_TRUE(error.names_field("rotary_dim"));
  EXPECT_NE(error.violations().front().rule.find("must be even"), std::string::npos);
  EXPECT_EQ(error.violations().front().suggestion, "nearby valid: rotary_dim = 62 or 64");
}

TEST(Geometry, RotaryPctGivingAnOddRotaryDimNamesRotaryPct) {
  GeometrySpec bad = spec(400, 4, std::nullopt, std::nullopt);  // head_dim 100
  bad.rotary_pct = 0.25;                                        // int(100 * 0.25) = 25
  const InputError error = rejection(bad);
  ASSERT_TRUE(error.names_field("rotary_pct"));
  EXPECT_EQ(error.violations().front().value, "0.25 (rotary_dim 25)");
  EXPECT_EQ(error.violations().front().suggestion, "nearby valid: rotary_pct = 0.24 (rotary_dim 24)");
}

TEST(Geometry, OddHeadDimWithFullRotaryIsRejected) {
  const InputError error = rejection(spec(100, 4, std::nullopt, std::nullopt));  // head_dim 25
  ASSERT_TRUE(error.names_field("head_dim"));
  EXPECT_NE(error.violations().front().rule.find("rotary_dim (25) must be even"), std::string::npos);
}

TEST(Geometry, PartialRotaryTruncatesLikePython) {
  GeometrySpec partial = spec(1024, 16, std::nullopt, std::nullopt);  // head_dim 64
  partial.rotary_pct = 0.25;
  EXPECT_EQ(resolve_geometry(partial).rotary_dim(), 16);
  partial.rotary_pct = 0.0;
  EXPECT_EQ(resolve_geometry(partial).rotary_dim(), 0);
  // 90 * 0.7 = 62.99999999999999 in doubles: Python's int() gives 62, rounding would give 63.
  GeometrySpec inexact = spec(1024, 16, std::nullopt, 90);
  inexact.rotary_pct = 0.7;
  EXPECT_EQ(resolve_geometry(inexact).rotary_dim(), 62);
  inexact.head_dim = 180;  // 125.99999999999999 -> 125, odd: rejected although round() would give 126
  EXPECT_TRUE(rejection(inexact).names_field("rotary_pct"));
  GeometrySpec no_rope = spec(1024, 16, std::nullopt, 63);  // odd head_dim is fine without RoPE
  no_rope.rotary_dim = 0;
  EXPECT_EQ(resolve_geometry(no_rope).rotary_dim(), 0);
}

TEST(Geometry, RotaryDimAboveHeadDimAndBadPctAreRejected) {
  GeometrySpec too_wide = spec(1024, 16, 8, 64);
  too_wide.rotary_dim = 66;
  EXPECT_EQ(rejection(too_wide).violations().front().suggestion, "nearby valid: rotary_dim = 64");

  GeometrySpec bad_pct = spec(1024, 16, 8, 64);
  bad_pct.rotary_pct = 1.5;
  EXPECT_TRUE(rejection(bad_pct).names_field("rotary_pct"));
  bad_pct.rotary_pct = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(rejection(bad_pct).names_field("rotary_pct"));

  GeometrySpec disagree = spec(1024, 16, 8, 64);
  disagree.rotary_pct = 0.5;
  disagree.rotary_dim = 16;
  EXPECT_NE(rejection(disagree).violations().front().rule.find("must agree with rotary_pct"), std::string::npos);
  disagree.rotary_dim = 32;
  EXPECT_EQ(resolve_geometry(disagree).rotary_dim(), 32);
}

TEST(Geometry, CountsMustBePositiveAndBounded) {
  EXPECT_TRUE(rejection(spec(0, 16, std::nullopt, std::nullopt)).names_field("hidden_size"));
  EXPECT_TRUE(rejection(spec(1024, -2, std::nullopt, std::nullopt)).names_field("num_heads"));
  EXPECT_TRUE(rejection(spec(1024, 16, 0, std::nullopt)).names_field("num_kv_heads"));
  EXPECT_TRUE(rejection(spec(1024, 16, 8, 0)).names_field("head_dim"));
  EXPECT_TRUE(rejection(spec(kMaxDimension + 1, 16, 8, 64)).names_field("hidden_size"));
  EXPECT_EQ(rejection(spec(0, 16, std::nullopt, std::nullopt)).violations().front().suggestion,
            "nearby valid: hidden_size = 1");
}

TEST(Geometry, EveryViolationIsReportedAtOnce) {
  GeometrySpec bad = spec(1024, 16, 3, 64);
  bad.softcap = -1.0;
  bad.sliding_window = 0;
  bad.rope_theta = std::numeric_limits<double>::infinity();
  const InputError error = rejection(bad);
  EXPECT_TRUE(error.names_field("num_kv_heads"));
  EXPECT_TRUE(error.names_field("softcap"));
  EXPECT_TRUE(error.names_field("sliding_window"));
  EXPECT_TRUE(error.names_field("rope_theta"));
  EXPECT_EQ(error.violations().size(), 4u);
  EXPECT_NE(std::string(error.what()).find("invalid geometry:\n  - num_kv_heads = 3"), std::string::npos);
}

TEST(Geometry, ScalarAndNormSettingsAreChecked) {
  GeometrySpec bad = spec(640, 4, 1, 256);
  bad.query_pre_attn_scalar = 0.0;
  EXPECT_TRUE(rejection(bad).names_field("query_pre_attn_scalar"));
  bad = spec(640, 4, 1, 256);
  bad.qk_norm_eps = -1e-6;
  EXPECT_TRUE(rejection(bad).names_field("qk_norm_eps"));
  bad = spec(640, 4, 1, 256);
  bad.softcap = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(rejection(bad).names_field("softcap"));
}

TEST(Geometry, QueryPreAttnScalarSetsTheScale) {
  GeometrySpec gemma = spec(640, 4, 1, 256);
  gemma.query_pre_attn_scalar = 256.0;
  const Geometry geometry = resolve_geometry(gemma);
  EXPECT_EQ(geometry.scale(), 0.0625);
  EXPECT_EQ(geometry.scale_source(), ScaleSource::query_pre_attn_scalar);
  gemma.query_pre_attn_scalar = 144.0;  // Gemma-2-27B style: not head_dim
  EXPECT_DOUBLE_EQ(resolve_geometry(gemma).scale(), 1.0 / 12.0);
}

TEST(Geometry, EnumNamesRoundTrip) {
  for (RopeStyle style : {RopeStyle::half_split, RopeStyle::interleaved}) {
    EXPECT_EQ(parse_rope_style(to_string(style)), style);
  }
  for (QkNorm norm : {QkNorm::none, QkNorm::rms, QkNorm::rms_one_plus}) EXPECT_EQ(parse_qk_norm(to_string(norm)), norm);
  EXPECT_EQ(parse_rope_style("rotate_half"), std::nullopt);
  EXPECT_EQ(parse_qk_norm("layernorm"), std::nullopt);
}


// DeepSeek-V3's attention widths without its size: q/k heads 12 + 4, v heads 8, hidden / heads = 6.
GeometrySpec latent_spec() {
  return {.hidden_size = 24,
          .num_heads = 4,
          .latent = LatentAttentionSpec{
              .q_lora_rank = 10, .kv_lora_rank = 6, .qk_nope_head_dim = 12, .qk_rope_head_dim = 4, .v_head_dim = 8}};
}

TEST(Geometry, LatentAttentionHasSeparateQueryKeyAndValueHeadWidths) {
  const Geometry geometry = resolve_geometry(latent_spec());
  EXPECT_TRUE(geometry.is_latent());
  EXPECT_EQ(geometry.head_dim(), 16);
  EXPECT_EQ(geometry.head_dim_source(), HeadDimSource::explicit_value);
  EXPECT_EQ(geometry.quotient_head_dim(), 6);
  EXPECT_EQ(geometry.v_head_dim(), 8);
  EXPECT_EQ(geometry.num_kv_heads(), 4);
  EXPECT_EQ(geometry.query_width(), 64);
  EXPECT_EQ(geometry.value_width(), 32);
  EXPECT_EQ(geometry.rotary_dim(), 4);
  EXPECT_EQ(geometry.rope_offset(), 12);
  EXPECT_DOUBLE_EQ(geometry.scale(), 0.25);  // 16^-0.5: the q/k width, not v's
}

TEST(Geometry, APlainLayerHasOneHeadWidth) {
  const Geometry geometry = resolve_geometry({.hidden_size = 1024, .num_heads = 16, .num_kv_heads = 8, .head_dim = 128});
  EXPECT_FALSE(geometry.is_latent());
  EXPECT_EQ(geometry.v_head_dim(), 128);
  EXPECT_EQ(geometry.value_width(), geometry.query_width());
  EXPECT_EQ(geometry.rope_offset(), 0);
}

TEST(Geometry, LatentAttentionRefusesEveryPlainFieldItHasNoRoomFor) {
  GeometrySpec spec = latent_spec();
  spec.head_dim = 16;
  spec.rotary_pct = 0.5;
  spec.num_kv_heads = 1;
  spec.qk_norm = QkNorm::rms;
  spec.qkv_bias = true;
  spec.query_pre_attn_scalar = 16.0;
  spec.latent->qk_rope_head_dim = 3;
  spec.latent->kv_lora_rank = 0;
  try {
    resolve_geometry(spec);
    FAIL() << "accepted";
  } catch (const InputError& error) {
    for (const char* field : {"head_dim", "rotary_dim", "num_kv_heads", "qk_norm", "attention_bias",
                              "query_pre_attn_scalar", "qk_rope_head_dim", "kv_lora_rank"}) {
      EXPECT_TRUE(error.names_field(field)) << field << ": " << error.what();
    }
  }
  GeometrySpec equal_kv = latent_spec();
  equal_kv.num_kv_heads = 4;  // as DeepSeek's configs state it: one K/V head per query head
  EXPECT_NO_THROW(resolve_geometry(equal_kv));
}

}  // namespace
}  // namespace attncheck
