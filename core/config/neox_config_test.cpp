// GPT-NeoX YAML import: NeoX's own file style (a flow mapping with comments, dashed keys, Python-style
// True), the proposed head_dim key, and the unmodelled settings that must be refused.
#include "core/config/neox_config.hpp"

#include <gtest/gtest.h>

#include "core/errors/input_error.hpp"

namespace attncheck {
namespace {

// Written in the style of GPT-NeoX's configs/20B.yml: braces, comments between entries, dashed and
// underscored keys mixed, a trailing comma, nested DeepSpeed sections with Python-style True.
constexpr const char* kNeox20bStyle = R"(# model settings for a 20B-shaped run
{
  # parallelism
  "pipe-parallel-size": 4,
  "model-parallel-size": 2,

  # model settings
  "num-layers": 44,
  "hidden-size": 6144,
  "num-attention-heads": 64,
  "seq-length": 2048,
  "norm": "layernorm",
  "pos-emb": "rotary",
  "rotary_pct": 0.25,
  "gpt_j_residual": true,
  "zero_optimization": {
    "stage": 1,
    "overlap_comm": True,
  },
  "optimizer": {"type": "Adam", "params": {"lr": 0.97e-4, "eps": 1.0e-8}},
}
)";

InputError neox_rejection(const std::string& text) {
  try {
    import_neox_config_text(text, "test neox");
  } catch (const InputError& error) {
    return error;
  }
  ADD_FAILURE() << "config was accepted: " << text;
  return InputError("none", {});
}

TEST(NeoxConfig, TwentyBStyleFileKeepsDerivedHeadDim) {
  const ImportedConfig imported = import_neox_config_text(kNeox20bStyle, "20B.yml");
  EXPECT_EQ(imported.spec.hidden_size, 6144);
  EXPECT_EQ(imported.spec.num_heads, 64);
  EXPECT_EQ(imported.spec.head_dim, std::nullopt);
  EXPECT_EQ(imported.spec.rotary_pct, 0.25);
  EXPECT_EQ(imported.spec.rope_theta, 10000.0);
  EXPECT_TRUE(imported.spec.qkv_bias);  // use_bias_in_attn_linear defaults to true in NeoX
  EXPECT_TRUE(imported.spec.out_bias);
  EXPECT_EQ(imported.tp_size, 2);
  const Geometry geometry = resolve_geometry(imported.spec);
  EXPECT_EQ(geometry.head_dim(), 96);
  EXPECT_EQ(geometry.head_dim_source(), HeadDimSource::derived);
  EXPECT_EQ(geometry.rotary_dim(), 24);
  EXPECT_EQ(geometry.query_width(), 6144);
}

TEST(NeoxConfig, Qwen3ShapedConfigWithExplicitHeadDim) {
  const ImportedConfig imported = import_neox_config_text(R"(
hidden_size: 1024
num_attention_heads: 16
num_kv_heads: 8
head_dim: 128
pos_emb: rotary
rotary_emb_base: 1000000
use_bias_in_attn_linear: false
sliding_window_width: 4096
attention_config: [[["flash"], 28]]
)",
                                                          "qwen3.yml");
  const Geometry geometry = resolve_geometry(imported.spec);
  EXPECT_EQ(geometry.query_width(), 2048);
  EXPECT_EQ(geometry.qkv_width(), 4096);
  EXPECT_EQ(geometry.rope_theta(), 1000000.0);
  EXPECT_FALSE(geometry.qkv_bias());
  EXPECT_EQ(geometry.sliding_window(), 4097);  // flash-attn window_size=(4096, -1): 4096 keys back plus itself
  EXPECT_EQ(imported.tp_size, std::nullopt);
}

TEST(NeoxConfig, NonRotaryPositionEmbeddingsMeanNoRope) {
  for (const char* pos_emb : {"learned", "sinusoidal", "none"}) {
    const ImportedConfig imported = import_neox_config_text(
        std::string("hidden-size: 512\nnum-attention-heads: 8\nrotary_pct: 0.5\npos-emb: ") + pos_emb, "t");
    EXPECT_EQ(resolve_geometry(imported.spec).rotary_dim(), 0) << pos_emb;
  }
  // NeoX's default pos_emb is "learned".
  EXPECT_EQ(
      resolve_geometry(import_neox_config_text("hidden-size: 512\nnum-attention-heads: 8", "t").spec).rotary_dim(), 0);
}

TEST(NeoxConfig, ScoreBiasesAndJointQkLayerNormAreRefused) {
  EXPECT_TRUE(neox_rejection("hidden-size: 512\nnum-attention-heads: 8\npos-emb: alibi").names_field("pos_emb"));
  EXPECT_TRUE(neox_rejection("hidden-size: 512\nnum-attention-heads: 8\npos-emb: rpe").names_field("pos_emb"));
  EXPECT_TRUE(neox_rejection("hidden-size: 512\nnum-attention-heads: 8\nuse_qk_layernorm: true")
                  .names_field("use_qk_layernorm"));
  EXPECT_TRUE(neox_rejection("hidden-size: 512\nnum-attention-heads: 8\nattention_config: [[[\"local\"], 4]]")
                  .names_field("attention_config"));
  EXPECT_NO_THROW(
      import_neox_config_text("hidden-size: 512\nnum-attention-heads: 8\nattention_config: [[[\"flash\"], 4]]", "t"));
}

TEST(NeoxConfig, SlidingWindowWidthActsOnlyOnFlashLayers) {
  const ImportedConfig global = import_neox_config_text(
      "hidden-size: 512\nnum-attention-heads: 8\nsliding_window_width: 64\n", "t");  // default: global
  EXPECT_EQ(global.spec.sliding_window, std::nullopt);
  const ImportedConfig flash = import_neox_config_text(
      "hidden-size: 512\nnum-attention-heads: 8\nsliding_window_width: 64\n"
      "attention_config: [[[\"flash\", \"global\"], 2]]\n",
      "t");
  EXPECT_EQ(flash.spec.sliding_window, 65);
}

TEST(NeoxConfig, MupScalingIsRefused) {
  EXPECT_TRUE(neox_rejection("hidden-size: 512\nnum-attention-heads: 8\nuse_mup: true").names_field("use_mup"));
}

TEST(NeoxConfig, HostileYamlIsAnInputError) {
  // A self-referencing alias, and ten levels of ten-fold aliases ("billion laughs").
  EXPECT_TRUE(neox_rejection("&a [*a]").names_field("config"));
  std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 9; ++level) {
    const std::string previous = "*a" + std::to_string(level - 1);
    laughs += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [" + previous;
    for (int i = 1; i < 10; ++i) laughs += ", " + previous;
    laughs += "]\n";
  }
  EXPECT_TRUE(neox_rejection(laughs + "hidden-size: 512\nnum-attention-heads: 8\n").names_field("config"));
  // Deep nesting: refused by yaml-cpp's own depth limit or by ours, as an InputError either way.
  EXPECT_FALSE(neox_rejection(std::string(100000, '[') + std::string(100000, ']')).violations().empty());
}

TEST(NeoxConfig, BothSpellingsMustAgree) {
  const InputError error = neox_rejection("hidden-size: 512\nhidden_size: 1024\nnum-attention-heads: 8");
  ASSERT_TRUE(error.names_field("hidden_size"));
  EXPECT_NE(error.violations().front().rule.find("given twice"), std::string::npos);
  EXPECT_NO_THROW(import_neox_config_text("hidden-size: 512\nhidden_size: 512\nnum-attention-heads: 8", "t"));
}

TEST(NeoxConfig, MalformedYamlNamesLineAndColumn) {
  const InputError error = neox_rejection("hidden-size: 512\nnum-attention-heads: [8\n");
  ASSERT_TRUE(error.names_field("yaml"));
  EXPECT_NE(error.violations().front().value.find("line"), std::string::npos);
  EXPECT_TRUE(neox_rejection("- just\n- a list\n").names_field("config"));
  EXPECT_TRUE(neox_rejection("num-attention-heads: 8").names_field("hidden_size"));
  EXPECT_TRUE(neox_rejection("hidden-size: '512'\nnum-attention-heads: 8").names_field("hidden_size"));
}

}  // namespace
}  // namespace attncheck
