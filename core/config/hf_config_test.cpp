// HF config.json import: every official config in core/config/hf_configs imports with the right head_dim and
// features; malformed files are rejected with the key, value and rule named.
#include "core/config/hf_config.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/errors/input_error.hpp"
#include "core/model/parameters.hpp"
#include "core/testing/source_tree.hpp"

namespace attncheck {
namespace {

std::string config_path(const std::string& file) {
  return source_tree_path("core/config/hf_configs/" + file);
}

InputError import_rejection(const std::string& text, const HfImportOptions& options = {}) {
  try {
    import_hf_config_text(text, "test config", options);
  } catch (const InputError& error) {
    return error;
  }
  ADD_FAILURE() << "config was accepted: " << text;
  return InputError("none", {});
}

// The rule of the violation naming `field` ("" when none does), to pin which rule fired.
std::string rule_of(const InputError& error, const std::string& field) {
  for (const Violation& violation : error.violations()) {
    if (violation.field == field) return violation.rule;
  }
  ADD_FAILURE() << "no violation names " << field << ": " << error.what();
  return "";
}

// A small Llama-shaped config with `extra` (JSON members, comma-led) appended.
std::string llama_with(const std::string& extra) {
  return R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 131072)" +
         extra + "}";
}

struct OfficialConfig {
  const char* file;
  std::int64_t hidden_size, num_heads, num_kv_heads, head_dim;
  HeadDimSource source;
};

TEST(HfConfig, EveryOfficialConfigImportsWithTheRightHeadDim) {
  const OfficialConfig expected[] = {
      {"Qwen__Qwen3-0.6B.json", 1024, 16, 8, 128, HeadDimSource::explicit_value},
      {"Qwen__Qwen3-1.7B.json", 2048, 16, 8, 128, HeadDimSource::explicit_value},
      {"Qwen__Qwen3-4B.json", 2560, 32, 8, 128, HeadDimSource::explicit_value},
      {"Qwen__Qwen3-8B.json", 4096, 32, 8, 128, HeadDimSource::explicit_value},
      {"Qwen__Qwen3-14B.json", 5120, 40, 8, 128, HeadDimSource::explicit_value},
      {"Qwen__Qwen3-32B.json", 5120, 64, 8, 128, HeadDimSource::explicit_value},
      {"google__gemma-3-270m.json", 640, 4, 1, 256, HeadDimSource::explicit_value},
      {"google__gemma-3-4b-pt.json", 2560, 8, 4, 256, HeadDimSource::explicit_value},
      {"meta-llama__Meta-Llama-3-8B.json", 4096, 32, 8, 128, HeadDimSource::derived},
      {"mistralai__Mistral-7B-v0.1.json", 4096, 32, 8, 128, HeadDimSource::derived},
      {"EleutherAI__gpt-neox-20b.json", 6144, 64, 64, 96, HeadDimSource::derived},
      {"EleutherAI__pythia-410m.json", 1024, 16, 16, 64, HeadDimSource::derived},
      {"meta-llama__Llama-3.1-8B.json", 4096, 32, 8, 128, HeadDimSource::derived},
      {"meta-llama__Llama-3.1-8B-Instruct.json", 4096, 32, 8, 128, HeadDimSource::derived},
      {"google__gemma-2-2b.json", 2304, 8, 4, 256, HeadDimSource::explicit_value},
      {"google__gemma-2-2b-it.json", 2304, 8, 4, 256, HeadDimSource::explicit_value},
      {"microsoft__Phi-4-mini-instruct.json", 3072, 24, 8, 128, HeadDimSource::derived},
      {"microsoft__Phi-3.5-mini-instruct.json", 3072, 32, 32, 96, HeadDimSource::derived},
      {"allenai__OLMo-2-1124-7B-Instruct.json", 4096, 32, 32, 128, HeadDimSource::derived},
      {"Qwen__Qwen2.5-7B.json", 3584, 28, 4, 128, HeadDimSource::derived},
      {"Qwen__Qwen2.5-7B-Instruct.json", 3584, 28, 4, 128, HeadDimSource::derived},
      {"ibm-granite__granite-3.3-8b-instruct.json", 4096, 32, 8, 128, HeadDimSource::derived},
      {"HuggingFaceTB__SmolLM3-3B.json", 2048, 16, 4, 128, HeadDimSource::derived},
      {"EleutherAI__gpt-j-6b.json", 4096, 16, 16, 256, HeadDimSource::derived},
      {"openai__gpt-oss-20b.json", 2880, 64, 8, 64, HeadDimSource::explicit_value},
      // Latent attention: head_dim is the q/k head width qk_nope_head_dim + qk_rope_head_dim (the file has none).
      {"deepseek-ai__DeepSeek-V3.json", 7168, 128, 128, 192, HeadDimSource::explicit_value},
      {"moonshotai__Kimi-K2-Instruct.json", 7168, 64, 64, 192, HeadDimSource::explicit_value},
  };
  // Every file in the folder is here.
  std::size_t files_in_folder = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_tree_path("core/config/hf_configs"))) {
    files_in_folder += entry.path().extension() == ".json";
  }
  EXPECT_EQ(files_in_folder, std::size(expected)) << "a config file has no expectation here";
  for (const OfficialConfig& config : expected) {
    SCOPED_TRACE(config.file);
    const Geometry geometry = resolve_geometry(import_hf_config_file(config_path(config.file)).spec);
    EXPECT_EQ(geometry.hidden_size(), config.hidden_size);
    EXPECT_EQ(geometry.num_heads(), config.num_heads);
    EXPECT_EQ(geometry.num_kv_heads(), config.num_kv_heads);
    EXPECT_EQ(geometry.head_dim(), config.head_dim);
    EXPECT_EQ(geometry.head_dim_source(), config.source);
  }
}

TEST(HfConfig, Qwen3HasRmsQkNormAndItsRopeBase) {
  const ImportedConfig imported = import_hf_config_file(config_path("Qwen__Qwen3-0.6B.json"));
  EXPECT_EQ(imported.model_type, "qwen3");
  EXPECT_EQ(imported.spec.qk_norm, QkNorm::rms);
  EXPECT_EQ(imported.spec.qk_norm_eps, 1e-6);
  EXPECT_EQ(imported.spec.rope_theta, 1000000.0);
  EXPECT_EQ(imported.spec.sliding_window, std::nullopt);  // use_sliding_window false
  EXPECT_FALSE(imported.spec.qkv_bias);
}

TEST(HfConfig, Gemma3LayersDifferBetweenSlidingAndFull) {
  const ImportedConfig sliding = import_hf_config_file(config_path("google__gemma-3-270m.json"));
  EXPECT_EQ(sliding.spec.qk_norm, QkNorm::rms_one_plus);
  EXPECT_EQ(sliding.spec.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(sliding.spec.sliding_window, 512);
  EXPECT_EQ(sliding.spec.rope_theta, 10000.0);  // rope_local_base_freq
  EXPECT_EQ(resolve_geometry(sliding.spec).scale(), 0.0625);

  const ImportedConfig full = import_hf_config_file(config_path("google__gemma-3-270m.json"), {.layer = 5});
  EXPECT_EQ(full.spec.sliding_window, std::nullopt);
  EXPECT_EQ(full.spec.rope_theta, 1000000.0);
}

TEST(HfConfig, Gemma3_4bFillsTransformersDefaultsAndScalesOnlyItsFullLayers) {
  const ImportedConfig imported = import_hf_config_file(config_path("google__gemma-3-4b-pt.json"));
  EXPECT_EQ(imported.model_type, "gemma3_text");
  EXPECT_EQ(imported.spec.num_heads, 8);
  EXPECT_EQ(imported.spec.num_kv_heads, 4);
  EXPECT_EQ(imported.spec.head_dim, 256);
  EXPECT_EQ(imported.spec.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(imported.spec.sliding_window, 1024);  // layer 0 is sliding; linear rope_scaling is for full layers
  EXPECT_EQ(imported.spec.rope_scaling.type, RopeScalingType::none);
  EXPECT_EQ(imported.spec.rope_theta, 10000.0);

  const ImportedConfig full = import_hf_config_file(config_path("google__gemma-3-4b-pt.json"), {.layer = 5});
  EXPECT_EQ(full.spec.sliding_window, std::nullopt);
  EXPECT_EQ(full.spec.rope_theta, 1000000.0);
  EXPECT_EQ(full.spec.rope_scaling.type, RopeScalingType::linear);
  EXPECT_EQ(full.spec.rope_scaling.factor, 8.0);
  EXPECT_NE(full.layer_kind.find("layer 5 of 34: full_attention"), std::string::npos) << full.layer_kind;
}

TEST(HfConfig, Llama31HasLlama3Scaling) {
  const ImportedConfig llama = import_hf_config_file(config_path("meta-llama__Llama-3.1-8B.json"));
  const RopeScaling& scaling = llama.spec.rope_scaling;
  EXPECT_EQ(scaling.type, RopeScalingType::llama3);
  EXPECT_EQ(scaling.factor, 8.0);
  EXPECT_EQ(scaling.low_freq_factor, 1.0);
  EXPECT_EQ(scaling.high_freq_factor, 4.0);
  EXPECT_EQ(scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(llama.spec.rope_theta, 500000.0);
  EXPECT_NO_THROW(resolve_geometry(llama.spec));
}

TEST(HfConfig, Gemma2AlternatesSlidingAndFullLayersWithSoftcap) {
  const ImportedConfig sliding = import_hf_config_file(config_path("google__gemma-2-2b.json"));
  EXPECT_EQ(sliding.model_type, "gemma2");
  EXPECT_EQ(sliding.spec.sliding_window, 4096);
  EXPECT_EQ(sliding.spec.softcap, 50.0);
  EXPECT_EQ(resolve_geometry(sliding.spec).scale(), 0.0625);  // query_pre_attn_scalar 256
  EXPECT_NE(sliding.layer_kind.find("sliding_attention"), std::string::npos);
  const ImportedConfig full = import_hf_config_file(config_path("google__gemma-2-2b.json"), {.layer = 1});
  EXPECT_EQ(full.spec.sliding_window, std::nullopt);
  EXPECT_EQ(full.spec.softcap, 50.0);
  EXPECT_NE(full.layer_kind.find("full_attention"), std::string::npos);
}

TEST(HfConfig, Phi3HasLongropePartialRotaryAndAWindowOnEveryLayer) {
  const ImportedConfig phi4 = import_hf_config_file(config_path("microsoft__Phi-4-mini-instruct.json"), {.layer = 7});
  const Geometry geometry = resolve_geometry(phi4.spec);
  EXPECT_EQ(geometry.rotary_dim(), 96);  // 0.75 of 128
  const RopeScaling& scaling = geometry.rope_scaling();
  EXPECT_EQ(scaling.type, RopeScalingType::longrope);
  EXPECT_EQ(scaling.short_factor.size(), 48u);
  EXPECT_EQ(scaling.long_factor.size(), 48u);
  EXPECT_EQ(scaling.original_max_position_embeddings, 4096);  // the top-level key, as transformers reads it
  EXPECT_EQ(scaling.factor, 32.0);                            // 131072 / 4096
  EXPECT_EQ(geometry.sliding_window(), 262144);
  EXPECT_FALSE(geometry.qkv_bias());
  EXPECT_FALSE(geometry.out_bias());
  const ImportedConfig phi35 = import_hf_config_file(config_path("microsoft__Phi-3.5-mini-instruct.json"));
  EXPECT_EQ(resolve_geometry(phi35.spec).rotary_dim(), 96);  // the whole head
  EXPECT_EQ(phi35.spec.rope_scaling.type, RopeScalingType::longrope);
}

TEST(HfConfig, Olmo2NormalisesQAndKOverTheirWholeWidth) {
  const ImportedConfig olmo = import_hf_config_file(config_path("allenai__OLMo-2-1124-7B-Instruct.json"));
  EXPECT_EQ(olmo.spec.qk_norm, QkNorm::rms_full_width);
  EXPECT_EQ(olmo.spec.qk_norm_eps, 1e-6);  // the file's rms_norm_eps, which Olmo2Attention's norms take
  EXPECT_TRUE(olmo.not_modelled.empty());
  EXPECT_EQ(olmo.spec.rope_theta, 500000.0);
  const Geometry geometry = resolve_geometry(olmo.spec);
  const Parameters weights = zero_parameters(geometry, full_widths(geometry));
  EXPECT_EQ(weights.q_norm->shape, (Shape{4096}));  // 32 heads x 128
  EXPECT_EQ(weights.k_norm->shape, (Shape{4096}));
}

TEST(HfConfig, GraniteScalesScoresByItsAttentionMultiplier) {
  const ImportedConfig granite = import_hf_config_file(config_path("ibm-granite__granite-3.3-8b-instruct.json"));
  const Geometry geometry = resolve_geometry(granite.spec);
  EXPECT_EQ(geometry.scale(), 0.0078125);
  EXPECT_EQ(geometry.scale_source(), ScaleSource::attention_multiplier);
  EXPECT_EQ(geometry.rope_theta(), 10000000.0);
}

TEST(HfConfig, SmolLM3LayersWithoutRope) {
  const ImportedConfig rotating = import_hf_config_file(config_path("HuggingFaceTB__SmolLM3-3B.json"), {.layer = 2});
  EXPECT_EQ(resolve_geometry(rotating.spec).rotary_dim(), 128);
  EXPECT_EQ(rotating.spec.rope_theta, 5000000.0);
  const ImportedConfig nope = import_hf_config_file(config_path("HuggingFaceTB__SmolLM3-3B.json"), {.layer = 3});
  EXPECT_EQ(resolve_geometry(nope.spec).rotary_dim(), 0);
  EXPECT_NE(nope.layer_kind.find("no RoPE"), std::string::npos) << nope.layer_kind;
  // Without no_rope_layers, every no_rope_layer_interval-th layer (transformers' default 4) has none.
  const ImportedConfig derived = import_hf_config_text(
      R"({"model_type": "smollm3", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 8})", "t",
      {.layer = 7});
  EXPECT_EQ(derived.spec.rotary_dim, 0);
}

TEST(HfConfig, GptJRotatesInterleavedPairsOfItsFirst64Channels) {
  const ImportedConfig gptj = import_hf_config_file(config_path("EleutherAI__gpt-j-6b.json"));
  const Geometry geometry = resolve_geometry(gptj.spec);
  EXPECT_EQ(geometry.rotary_dim(), 64);
  EXPECT_EQ(geometry.rope_style(), RopeStyle::interleaved);
  EXPECT_FALSE(geometry.qkv_bias());
  EXPECT_FALSE(geometry.out_bias());
  EXPECT_EQ(geometry.rope_theta(), 10000.0);
}

// hidden 2880 / 64 heads would be 45: head_dim 64 is stated. Sinks on every layer, layers alternate
// sliding (window 128) and full, q/k/v/o biases, yarn x32 over 4096 with truncate false.
TEST(HfConfig, GptOssHasSinksBiasesYarnAndAlternatingLayers) {
  const ImportedConfig sliding = import_hf_config_file(config_path("openai__gpt-oss-20b.json"), {.layer = 0});
  const ImportedConfig full = import_hf_config_file(config_path("openai__gpt-oss-20b.json"), {.layer = 1});
  for (const ImportedConfig* imported : {&sliding, &full}) {
    const Geometry geometry = resolve_geometry(imported->spec);
    EXPECT_TRUE(geometry.attention_sinks());
    EXPECT_TRUE(geometry.qkv_bias());
    EXPECT_TRUE(geometry.out_bias());
    EXPECT_EQ(geometry.query_width(), 4096);
    EXPECT_EQ(geometry.quotient_head_dim(), 45);
    EXPECT_EQ(geometry.rope_theta(), 150000.0);
    const RopeScaling& scaling = geometry.rope_scaling();
    EXPECT_EQ(scaling.type, RopeScalingType::yarn);
    EXPECT_EQ(scaling.factor, 32.0);
    EXPECT_EQ(scaling.original_max_position_embeddings, 4096);
    EXPECT_FALSE(scaling.truncate);
  }
  EXPECT_EQ(sliding.spec.sliding_window, 128);
  EXPECT_NE(sliding.layer_kind.find("sliding_attention"), std::string::npos) << sliding.layer_kind;
  EXPECT_FALSE(full.spec.sliding_window.has_value());
  EXPECT_NE(full.layer_kind.find("full_attention"), std::string::npos) << full.layer_kind;
}

TEST(HfConfig, DeepSeekV3IsLatentAttentionWithItsWidthsAndYarnScale) {
  const ImportedConfig imported = import_hf_config_file(config_path("deepseek-ai__DeepSeek-V3.json"));
  ASSERT_TRUE(imported.spec.latent.has_value());
  const LatentAttentionSpec& latent = *imported.spec.latent;
  EXPECT_EQ(latent.q_lora_rank, 1536);
  EXPECT_EQ(latent.kv_lora_rank, 512);
  EXPECT_EQ(latent.qk_nope_head_dim, 128);
  EXPECT_EQ(latent.qk_rope_head_dim, 64);
  EXPECT_EQ(latent.v_head_dim, 128);
  EXPECT_EQ(latent.latent_norm_eps, 1e-6);
  EXPECT_EQ(imported.spec.rope_style, RopeStyle::interleaved);  // rope_interleave, true by default
  const Geometry geometry = resolve_geometry(imported.spec);
  EXPECT_EQ(geometry.head_dim(), 192);
  EXPECT_EQ(geometry.v_head_dim(), 128);
  EXPECT_EQ(geometry.quotient_head_dim(), 56);  // hidden / heads: the width a framework must not use
  EXPECT_EQ(geometry.query_width(), 128 * 192);
  EXPECT_EQ(geometry.value_width(), 128 * 128);
  EXPECT_EQ(geometry.rotary_dim(), 64);
  // transformers 5.24.0: DeepseekV3Attention(config).scaling = 192^-0.5 * yarn_get_mscale(40, 1)^2.
  EXPECT_DOUBLE_EQ(geometry.scale(), 0.1352337788608801);
  EXPECT_EQ(geometry.scale_source(), ScaleSource::latent_qk_head_dim);
}

TEST(HfConfig, KimiK2IsReadAsDeepSeekV3) {
  const ImportedConfig imported = import_hf_config_file(config_path("moonshotai__Kimi-K2-Instruct.json"));
  EXPECT_EQ(imported.model_type, "kimi_k2");
  const Geometry geometry = resolve_geometry(imported.spec);
  EXPECT_EQ(geometry.num_heads(), 64);
  EXPECT_EQ(geometry.v_head_dim(), 128);
  EXPECT_EQ(geometry.rope_theta(), 50000.0);
  EXPECT_DOUBLE_EQ(geometry.scale(), std::pow(192.0, -0.5) * std::pow(0.1 * std::log(32.0) + 1.0, 2));
}

// DeepSeek-V2-Lite's shape (its config states q_lora_rank null: q_proj, not the 1536 default) and V2's keys.
const char* kDeepSeekV2Lite = R"({"model_type": "deepseek_v2", "hidden_size": 2048, "num_attention_heads": 16,
  "num_key_value_heads": 16, "num_hidden_layers": 27, "q_lora_rank": null, "kv_lora_rank": 512,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "rms_norm_eps": 1e-06, "rope_theta": 10000,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
  "original_max_position_embeddings": 4096, "type": "yarn"}, "attention_bias": false})";

TEST(HfConfig, DeepSeekV2WithANullQLoraRankProjectsQDirectly) {
  const ImportedConfig imported = import_hf_config_text(kDeepSeekV2Lite, "v2-lite");
  ASSERT_TRUE(imported.spec.latent.has_value());
  EXPECT_EQ(imported.spec.latent->q_lora_rank, std::nullopt);
  const Geometry geometry = resolve_geometry(imported.spec);
  EXPECT_EQ(geometry.value_width(), 2048);  // 16 x 128, equal to hidden_size here, while q is 16 x 192
  EXPECT_EQ(geometry.query_width(), 3072);
  EXPECT_DOUBLE_EQ(geometry.scale(), std::pow(192.0, -0.5) * std::pow(0.1 * 0.707 * std::log(40.0) + 1.0, 2));
  // Absent, q_lora_rank is DeepseekV2Config's default 1536.
  std::string without(kDeepSeekV2Lite);
  without.replace(without.find(R"("q_lora_rank": null, )"), std::string(R"("q_lora_rank": null, )").size(), "");
  EXPECT_EQ(import_hf_config_text(without, "v2").spec.latent->q_lora_rank, 1536);
}

// transformers (yarn_apply_mscale) multiplies latent attention's softmax scale by mscale(factor, mscale_all_dim)^2
// for every RoPE scaling but default; attncheck models it with yarn, and refuses the others by name (they used
// to import with a scale 1.8x too small, exit 0).
TEST(HfConfig, DeepSeekNonYarnScalingWithMscaleAllDimIsRefusedByName) {
  for (const char* replacement : {R"("factor": 4, "type": "linear"})",
                                  R"("factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
                                      "original_max_position_embeddings": 4096, "mscale_all_dim": 1, "type": "llama3"})"}) {
    std::string text(kDeepSeekV2Lite);
    const std::size_t begin = text.find(R"("beta_fast")");
    const std::size_t end = text.find('}', begin);
    std::string object = replacement;
    if (object.find("mscale_all_dim") == std::string::npos) object.insert(0, R"("mscale_all_dim": 0.707, )");
    text.replace(begin, end - begin + 1, object);
    try {
      (void)import_hf_config_text(text, "non-yarn");
      FAIL() << "accepted: " << text;
    } catch (const InputError& error) {
      EXPECT_TRUE(error.names_field("rope_scaling.mscale_all_dim")) << error.what();
      EXPECT_NE(std::string(error.what()).find("only with yarn"), std::string::npos) << error.what();
    }
    // Without mscale_all_dim transformers applies no factor, nor does attncheck: imported.
    const std::size_t at = text.find(R"("mscale_all_dim": )");
    text.erase(at, text.find(',', at) + 2 - at);
    EXPECT_NO_THROW((void)resolve_geometry(import_hf_config_text(text, "non-yarn, no mscale_all_dim").spec)) << text;
  }
}

TEST(HfConfig, DeepSeekRopePairingAndHeadDimAreReadAsTransformersReadsThem) {
  std::string text(kDeepSeekV2Lite);
  text.replace(text.find("deepseek_v2"), 11, "deepseek_v3");
  const auto with = [&](const std::string& extra) {
    std::string changed = text;
    changed.insert(1, extra + ", ");
    return import_hf_config_text(changed, "v3");
  };
  EXPECT_EQ(with(R"("rope_interleave": false)").spec.rope_style, RopeStyle::half_split);
  EXPECT_EQ(with(R"("rope_interleave": true)").spec.rope_style, RopeStyle::interleaved);
  EXPECT_THROW(with(R"("rope_interleave": null)"), InputError);  // transformers: None is false, not the default
  // transformers' config classes set head_dim = qk_rope_head_dim; a file stating it changes no width.
  const ImportedConfig stated = with(R"("head_dim": 64)");
  EXPECT_EQ(resolve_geometry(stated.spec).head_dim(), 192);
  EXPECT_EQ(stated.spec.head_dim, std::nullopt);
  std::string biased = text;
  biased.replace(biased.find(R"("attention_bias": false)"), 23, R"("attention_bias": true)");
  try {
    resolve_geometry(import_hf_config_text(biased, "v3").spec);
    FAIL() << "attention_bias true was accepted";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("attention_bias"));
  }
}

TEST(HfConfig, PerHeadLayerNormFamiliesAreRefusedByName) {
  for (const char* model_type : {"stablelm", "cohere"}) {
    const std::string text = std::string(R"({"model_type": ")") + model_type +
                             R"(", "hidden_size": 2048, "num_attention_heads": 32, "qk_layernorm": true})";
    try {
      import_hf_config_text(text, "inline");
      FAIL() << model_type << " was accepted";
    } catch (const InputError& error) {
      ASSERT_TRUE(error.names_field("model_type")) << model_type;
      EXPECT_NE(error.violations().front().rule.find("per-head LayerNorm"), std::string::npos) << model_type;
    }
  }
}

TEST(HfConfig, MistralSlidesOnEveryLayerAndNeoxHasBiasesAndPartialRope) {
  EXPECT_EQ(import_hf_config_file(config_path("mistralai__Mistral-7B-v0.1.json")).spec.sliding_window, 4096);
  const ImportedConfig neox = import_hf_config_file(config_path("EleutherAI__gpt-neox-20b.json"));
  EXPECT_TRUE(neox.spec.qkv_bias);
  EXPECT_TRUE(neox.spec.out_bias);
  EXPECT_EQ(neox.spec.rotary_pct, 0.25);
  EXPECT_EQ(resolve_geometry(neox.spec).rotary_dim(), 24);
  EXPECT_EQ(neox.spec.head_dim, std::nullopt);
}

TEST(HfConfig, Qwen2HardCodesQkvBias) {
  const ImportedConfig qwen2 = import_hf_config_text(
      R"({"model_type": "qwen2", "hidden_size": 896, "num_attention_heads": 14, "num_key_value_heads": 2,
          "use_sliding_window": false, "sliding_window": 32768})",
      "qwen2");
  EXPECT_TRUE(qwen2.spec.qkv_bias);
  EXPECT_FALSE(qwen2.spec.out_bias);
  EXPECT_EQ(qwen2.spec.sliding_window, std::nullopt);
}

TEST(HfConfig, MalformedJsonNamesThePosition) {
  const std::string text = R"({"model_type": "llama", "hidden_size": 1024,, })";
  const InputError error = import_rejection(text);
  ASSERT_TRUE(error.names_field("json"));
  EXPECT_EQ(error.violations().front().value, "byte " + std::to_string(text.find(",,") + 2));  // 1-based
  EXPECT_TRUE(import_rejection("[1, 2]").names_field("config"));
  EXPECT_TRUE(import_rejection("").names_field("json"));
}

TEST(HfConfig, MissingRequiredKeysAreNamed) {
  const InputError error = import_rejection(R"({"model_type": "llama", "num_key_value_heads": 8})");
  EXPECT_TRUE(error.names_field("hidden_size"));
  EXPECT_TRUE(error.names_field("num_attention_heads"));
  EXPECT_EQ(error.violations().front().rule, "is required");
  EXPECT_TRUE(import_rejection(R"({"model_type": "llama", "hidden_size": 1024, "num_attention_heads": null})")
                  .names_field("num_attention_heads"));
}

TEST(HfConfig, WrongTypesAreNamedWithTheirValue) {
  const InputError error = import_rejection(
      R"({"model_type": "llama", "hidden_size": "1024", "num_attention_heads": 16.5, "head_dim": true, "attention_bias": "no",
          "rope_theta": "big"})");
  ASSERT_EQ(error.violations().size(), 5u);
  EXPECT_EQ(error.violations()[0].field, "hidden_size");
  EXPECT_EQ(error.violations()[0].value, "\"1024\" (a string)");
  EXPECT_EQ(error.violations()[0].rule, "must be an integer");
  EXPECT_TRUE(error.names_field("num_attention_heads"));
  EXPECT_TRUE(error.names_field("head_dim"));
  EXPECT_TRUE(error.names_field("attention_bias"));
  EXPECT_TRUE(error.names_field("rope_theta"));
  // 1024.0 is an integer written as a float, which some exporters do.
  EXPECT_EQ(import_hf_config_text(R"({"model_type": "llama", "hidden_size": 1024.0, "num_attention_heads": 16})", "t")
                .spec.hidden_size,
            1024);
}

TEST(HfConfig, UnmodelledFeaturesAreRejectedNotDropped) {
  const InputError dynamic = import_rejection(R"({"model_type": "llama", "hidden_size": 4096,
      "num_attention_heads": 32, "rope_scaling": {"rope_type": "dynamic", "factor": 8.0}})");
  ASSERT_TRUE(dynamic.names_field("rope_scaling.rope_type"));
  EXPECT_NE(dynamic.violations().front().rule.find("dynamic NTK"), std::string::npos);
  EXPECT_TRUE(import_rejection(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "high_frequency_factor": 4}})")
                  .names_field("rope_scaling.high_frequency_factor"));
  EXPECT_TRUE(
      import_rejection(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
      "layer_types": ["linear_attention", "full_attention"]})")
          .names_field("layer_types[0]"));
  EXPECT_TRUE(
      import_rejection(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "text_config": "x"})")
          .names_field("text_config"));
}

TEST(HfConfig, RopeParametersOfTransformersV5AreRead) {
  const ImportedConfig imported = import_hf_config_text(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}})",
      "v5");
  EXPECT_EQ(imported.spec.rope_theta, 500000.0);
  // A yarn layer without a factor or a length to derive it from imports, and is refused as a geometry.
  const ImportedConfig yarn = import_hf_config_text(R"({"model_type": "llama", "hidden_size": 64,
      "num_attention_heads": 4, "rope_parameters": {"rope_type": "yarn", "rope_theta": 5e5}})",
                                                    "v5");
  EXPECT_EQ(yarn.spec.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_THROW(resolve_geometry(yarn.spec), InputError);
}

// Malformed values are refused, never dropped: a rope_parameters that is not an object used to read as
// "no RoPE settings" (base 10000 where the file says 1e6), and an unsigned 2^64 - 1 wrapped to -1.
TEST(HfConfig, MalformedValuesAreRefusedNotDropped) {
  for (const char* parameters : {"5", R"("abc")", "[]", "true"}) {
    const std::string text = std::string(R"({"model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 4,
        "rope_theta": 1000000.0, "rope_parameters": )") +
                             parameters + "}";
    EXPECT_TRUE(import_rejection(text).names_field("rope_parameters")) << parameters;
  }
  // An object without rope_theta takes the file's outer rope_theta; two that disagree are refused.
  const ImportedConfig outer = import_hf_config_text(R"({"model_type": "qwen3", "hidden_size": 64,
      "num_attention_heads": 4, "rope_theta": 1000000.0, "rope_parameters": {"rope_type": "default"}})",
                                                     "outer");
  EXPECT_EQ(outer.spec.rope_theta, 1e6);
  EXPECT_TRUE(import_rejection(R"({"model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 4,
      "rope_theta": 1000000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}})")
                  .names_field("rope_theta"));
  EXPECT_TRUE(import_rejection(R"({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
      "use_sliding_window": true, "sliding_window": 8, "max_window_layers": 18446744073709551615})")
                  .names_field("max_window_layers"));
  EXPECT_TRUE(import_rejection(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
      "num_hidden_layers": -1})")
                  .names_field("num_hidden_layers"));
}

// Issue items 5 and 6 of the hostile-input campaign. transformers 5.24.0 reads a RoPE object without
// rope_type and type as "default" and only logs "Unrecognized keys" for its factor: Llama 3.1's llama3
// x8, gpt-oss's yarn and Phi's longrope lists would run as plain RoPE. attncheck refuses, naming the key.
// original_max_position_embeddings both at the top level and in the RoPE object, different: transformers
// keeps the top-level one and drops the object's, so attncheck refuses rather than pick. Phi-3's config has
// a top-level default (4096) even when the file omits it. The same value in both places, or the object's
// alone where the family has no top-level default (Llama 3.1), is read as it is.
TEST(HfConfig, OriginalMaxPositionsStatedTwiceDifferentlyIsRefused) {
  const std::string longrope_object = R"("rope_scaling": {"type": "longrope", "original_max_position_embeddings": 20,
      "short_factor": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], "long_factor": [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]})";
  const std::string phi3 = R"({"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4,
      "max_position_embeddings": 160, )";
  EXPECT_NE(rule_of(import_rejection(phi3 + longrope_object + "}"), "original_max_position_embeddings")
                .find("drops the object's"),
            std::string::npos);
  EXPECT_TRUE(import_rejection(phi3 + R"("original_max_position_embeddings": 40, )" + longrope_object + "}")
                  .names_field("original_max_position_embeddings"));
  const ImportedConfig same =
      import_hf_config_text(phi3 + R"("original_max_position_embeddings": 20, )" + longrope_object + "}", "test");
  EXPECT_EQ(same.spec.rope_scaling.original_max_position_embeddings, 20);
  const ImportedConfig llama = import_hf_config_text(
      llama_with(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64})"),
      "test");
  EXPECT_EQ(llama.spec.rope_scaling.original_max_position_embeddings, 64);
}

TEST(HfConfig, ScalingParametersWithoutATypeAreRefused) {
  const std::string llama31 =
      R"("factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192)";
  const InputError untyped = import_rejection(llama_with(R"(, "rope_scaling": {)" + llama31 + "}"));
  EXPECT_NE(rule_of(untyped, "rope_scaling.rope_type")
                .find("is required, as the object states scaling parameters "
                      "(factor, high_freq_factor, low_freq_factor, "
                      "original_max_position_embeddings)"),
            std::string::npos);
  ASSERT_EQ(untyped.violations().size(), 1u) << untyped.what();
  EXPECT_EQ(untyped.violations().front().value, "absent");
  // transformers v5's rope_parameters, a multimodal text_config, gpt-oss's yarn, Phi's longrope lists.
  EXPECT_TRUE(import_rejection(llama_with(R"(, "rope_parameters": {"rope_theta": 500000.0, "factor": 8.0})"))
                  .names_field("rope_parameters.rope_type"));
  EXPECT_TRUE(import_rejection(R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
      "hidden_size": 2560, "rope_scaling": {"factor": 8.0}}})",
                               {.layer = 5})
                  .names_field("text_config.rope_scaling.rope_type"));
  EXPECT_TRUE(import_rejection(llama_with(R"(, "rope_scaling": {"factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
      "original_max_position_embeddings": 4096, "truncate": false})"))
                  .names_field("rope_scaling.rope_type"));
  EXPECT_TRUE(import_rejection(R"({"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32,
      "rope_scaling": {"short_factor": [1.0, 1.0], "long_factor": [2.0, 2.0]}})")
                  .names_field("rope_scaling.rope_type"));
  // An explicit "default" beside scaling parameters drops them just the same.
  const InputError plain = import_rejection(llama_with(R"(, "rope_scaling": {"rope_type": "default", "factor": 8.0})"));
  EXPECT_NE(rule_of(plain, "rope_scaling.rope_type")
                .find("names plain RoPE, yet the object states scaling parameters (factor)"),
            std::string::npos);
  EXPECT_TRUE(import_rejection(llama_with(R"(, "rope_scaling": {"type": "default", "factor": 8.0})"))
                  .names_field("rope_scaling.type"));
}

// A null or non-string type loads in transformers and fails building the model (ROPE_INIT_FUNCTIONS[None]);
// rope_type and type disagreeing is read as rope_type alone there. All refused.
TEST(HfConfig, ATypeThatIsNullNotAStringOrStatedTwiceDifferentlyIsRefused) {
  for (const char* key : {"rope_type", "type"}) {
    const InputError null_type =
        import_rejection(llama_with(fmt::format(R"(, "rope_scaling": {{"{}": null, "factor": 8.0}})", key)));
    ASSERT_EQ(null_type.violations().size(), 1u) << null_type.what();
    EXPECT_EQ(null_type.violations().front().field, fmt::format("rope_scaling.{}", key));
    EXPECT_EQ(null_type.violations().front().value, "null");
    EXPECT_NE(null_type.violations().front().rule.find("must be a string naming the RoPE type"), std::string::npos);
  }
  EXPECT_NE(rule_of(import_rejection(llama_with(R"(, "rope_parameters": {"rope_type": 5, "factor": 8.0})")),
                    "rope_parameters.rope_type")
                .find("must be a string"),
            std::string::npos);
  const InputError twice =
      import_rejection(llama_with(R"(, "rope_scaling": {"rope_type": "linear", "type": "yarn", "factor": 8.0})"));
  EXPECT_NE(rule_of(twice, "rope_scaling.type").find("disagrees with rope_type \"linear\""), std::string::npos);
  // The same type under both spellings is one statement.
  EXPECT_EQ(import_hf_config_text(
                llama_with(R"(, "rope_scaling": {"rope_type": "linear", "type": "linear", "factor": 2})"), "t")
                .spec.rope_scaling.type,
            RopeScalingType::linear);
}

// Objects that state no scaling parameter are plain RoPE, as in transformers: {} (whose rope_scaling then
// falls through to rope_parameters there), and v5's rope_parameters with only a base and rotary fraction.
TEST(HfConfig, RopeObjectsWithoutScalingParametersArePlainRope) {
  const GeometrySpec empty =
      import_hf_config_text(llama_with(R"(, "rope_theta": 500000.0, "rope_scaling": {})"), "t").spec;
  EXPECT_EQ(empty.rope_scaling.type, RopeScalingType::none);
  EXPECT_EQ(empty.rope_theta, 500000.0);
  const GeometrySpec base_only =
      import_hf_config_text(
          llama_with(R"(, "rope_parameters": {"rope_theta": 500000.0, "partial_rotary_factor": 0.5})"), "t")
          .spec;
  EXPECT_EQ(base_only.rope_scaling.type, RopeScalingType::none);
  EXPECT_EQ(base_only.rope_theta, 500000.0);
  EXPECT_EQ(base_only.rotary_pct, 0.5);
  EXPECT_EQ(
      import_hf_config_text(llama_with(R"(, "rope_theta": 500000.0, "rope_parameters": {})"), "t").spec.rope_theta,
      500000.0);
  // transformers reads a base and rotary fraction inside rope_scaling too (they used to be ignored here).
  const GeometrySpec legacy =
      import_hf_config_text(llama_with(R"(, "rope_scaling": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6,
                                           "partial_rotary_factor": 0.5})"),
                            "t")
          .spec;
  EXPECT_EQ(legacy.rope_theta, 1e6);  // Llama's default 10000 is not filled in beside it
  EXPECT_EQ(legacy.rotary_pct, 0.5);
  EXPECT_NE(rule_of(import_rejection(llama_with(R"(, "rope_theta": 10000.0, "rope_scaling": {"rope_type": "linear",
                                                   "factor": 2.0, "rope_theta": 1e6})")),
                    "rope_theta")
                .find("disagrees with rope_scaling.rope_theta = 1000000"),
            std::string::npos);
}

// Both rope_scaling and rope_parameters: transformers 5.24.0 reads rope_scaling in their place and drops
// rope_parameters (its rope_theta too). A key stated in both must agree; one stated only in
// rope_parameters is refused, as transformers would drop it; one only in rope_scaling is read.
TEST(HfConfig, RopeScalingAndRopeParametersMustStateTheSame) {
  const InputError factor = import_rejection(llama_with(R"(, "rope_theta": 5e5,
      "rope_parameters": {"rope_type": "linear", "rope_theta": 5e5, "factor": 4.0},
      "rope_scaling": {"rope_type": "linear", "factor": 8.0})"));
  ASSERT_EQ(factor.violations().size(), 1u) << factor.what();
  EXPECT_EQ(factor.violations().front().field, "rope_scaling.factor");
  EXPECT_EQ(factor.violations().front().value, "8.0");
  EXPECT_EQ(factor.violations().front().rule, "disagrees with rope_parameters.factor = 4.0");
  EXPECT_NE(factor.violations().front().suggestion.find("or the same in both places"), std::string::npos);
  const InputError type = import_rejection(llama_with(R"(, "rope_theta": 5e5,
      "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}, "rope_scaling": {"type": "linear", "factor": 8.0})"));
  EXPECT_EQ(rule_of(type, "rope_scaling.type"), "disagrees with rope_parameters.rope_type = \"default\" (a string)");
  EXPECT_TRUE(import_rejection(llama_with(R"(,
      "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096})"))
                  .names_field("rope_scaling.original_max_position_embeddings"));

  // Stated only in rope_parameters: dropped by transformers, so refused.
  const InputError theta = import_rejection(llama_with(R"(,
      "rope_parameters": {"rope_type": "linear", "rope_theta": 5e5, "factor": 8.0},
      "rope_scaling": {"rope_type": "linear", "factor": 8.0})"));
  ASSERT_EQ(theta.violations().size(), 1u) << theta.what();
  EXPECT_EQ(theta.violations().front().field, "rope_parameters.rope_theta");
  EXPECT_NE(theta.violations().front().rule.find("it would be dropped"), std::string::npos);
  const InputError untyped = import_rejection(llama_with(R"(,
      "rope_parameters": {"rope_type": "linear", "factor": 8.0}, "rope_scaling": {"factor": 8.0})"));
  EXPECT_TRUE(untyped.names_field("rope_parameters.rope_type"));
  EXPECT_TRUE(untyped.names_field("rope_scaling.rope_type"));

  // The same statements twice, a base the top level states too, and a length stated only in rope_scaling.
  const GeometrySpec agreed = import_hf_config_text(llama_with(R"(, "rope_theta": 5e5,
      "rope_parameters": {"rope_type": "yarn", "rope_theta": 5e5, "factor": 4},
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})"),
                                                    "t")
                                  .spec;
  EXPECT_EQ(agreed.rope_theta, 5e5);
  EXPECT_EQ(agreed.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_EQ(agreed.rope_scaling.factor, 4.0);
  EXPECT_EQ(agreed.rope_scaling.original_max_position_embeddings, 32768);

  // An empty rope_scaling is none, in transformers too (`rope_scaling or rope_parameters`).
  EXPECT_EQ(import_hf_config_text(llama_with(R"(, "rope_scaling": {},
                                      "rope_parameters": {"rope_type": "linear", "rope_theta": 5e5, "factor": 8.0})"),
                                  "t")
                .spec.rope_scaling.factor,
            8.0);

  // Per layer kind: this layer's entry is the one compared.
  const std::string per_kind = R"({"model_type": "gemma3_text", "hidden_size": 640, "num_hidden_layers": 6,
      "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                          "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}},
      "rope_theta": 1e6, "rope_scaling": {"rope_type": "linear", "factor": 4.0}})";
  EXPECT_EQ(rule_of(import_rejection(per_kind, {.layer = 5}), "rope_scaling.factor"),
            "disagrees with rope_parameters.full_attention.factor = 8.0");
}

// Per-layer-kind rope_parameters without this layer's kind: not read as "no RoPE settings".
TEST(HfConfig, RopeParametersPerLayerKindMustHaveThisLayersKind) {
  const InputError missing = import_rejection(R"({"model_type": "gemma2", "hidden_size": 2304, "num_hidden_layers": 2,
      "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6}}})",
                                              {.layer = 0});
  EXPECT_NE(rule_of(missing, "rope_parameters.sliding_attention").find("this layer is sliding_attention"),
            std::string::npos);
}

// A null inside the RoPE object is never its default: transformers reads truncate: null as false
// (rope_parameters.get("truncate", True) is None), factor: null as max / original or a TypeError.
TEST(HfConfig, NullsInsideTheRopeObjectAreRefused) {
  const std::string yarn =
      R"("rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "truncate": false)";
  const InputError truncate = import_rejection(
      llama_with(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
      "truncate": null})"));
  ASSERT_EQ(truncate.violations().size(), 1u) << truncate.what();
  EXPECT_EQ(truncate.violations().front().field, "rope_scaling.truncate");
  EXPECT_EQ(truncate.violations().front().value, "null");
  EXPECT_NE(truncate.violations().front().rule.find("must be true or false"), std::string::npos);
  EXPECT_NE(truncate.violations().front().rule.find("a null is not read as the default"), std::string::npos);
  for (const char* key : {"factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor",
                          "original_max_position_embeddings", "rope_theta", "partial_rotary_factor"}) {
    const std::string object = fmt::format(R"({{"rope_type": "yarn", "{}": null}})", key);
    EXPECT_TRUE(
        import_rejection(llama_with(R"(, "rope_scaling": )" + object)).names_field(std::string("rope_scaling.") + key))
        << key;
    EXPECT_TRUE(import_rejection(llama_with(R"(, "rope_parameters": )" + object))
                    .names_field(std::string("rope_parameters.") + key))
        << key;
  }
  for (const char* key : {"short_factor", "long_factor"}) {
    EXPECT_TRUE(import_rejection(fmt::format(R"({{"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4,
        "rope_scaling": {{"type": "longrope", "short_factor": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], "{}": null}}}})",
                                             key))
                    .names_field(std::string("rope_scaling.") + key))
        << key;
  }
  EXPECT_FALSE(
      import_hf_config_text(llama_with(R"(, "rope_scaling": {)" + yarn + "}"), "t").spec.rope_scaling.truncate);
}

// Top-level nulls that transformers 5.24.0 refuses (its strict config fields) or fails on when it builds
// the model were read as the key's default (rope_theta: null as 10000). Refused where read; the nulls
// that mean what transformers means (head_dim, sliding_window, num_key_value_heads, a softcap) still pass.
TEST(HfConfig, NullsTransformersDoesNotReadAsDefaultsAreRefused) {
  struct Case {
    const char* config;
    std::int64_t layer;
    const char* field;
  };
  const Case cases[] = {
      {R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": null})", 0, "rope_theta"},
      {R"({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 4, "rotary_emb_base": null})", 0,
       "rotary_emb_base"},
      {R"({"model_type": "gemma3_text", "hidden_size": 640, "rope_local_base_freq": null})", 0, "rope_local_base_freq"},
      {R"({"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4, "original_max_position_embeddings": null,
          "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1, 1, 1, 1, 1], "long_factor": [2, 2, 2, 2, 2, 2, 2, 2]}})",
       0, "original_max_position_embeddings"},
      {R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": null,
          "rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 4096}})",
       0, "max_position_embeddings"},
      {R"({"model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 4, "rms_norm_eps": null})", 0,
       "rms_norm_eps"},
      {R"({"model_type": "gemma2", "hidden_size": 64, "query_pre_attn_scalar": null})", 0, "query_pre_attn_scalar"},
      {R"({"model_type": "granite", "hidden_size": 64, "attention_multiplier": null})", 0, "attention_multiplier"},
      {R"({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4, "use_sliding_window": true,
          "sliding_window": 8, "max_window_layers": null})",
       0, "max_window_layers"},
      {R"({"model_type": "smollm3", "hidden_size": 64, "num_attention_heads": 4, "no_rope_layer_interval": null})", 0,
       "no_rope_layer_interval"},
      {R"({"model_type": "gemma3_text", "hidden_size": 640, "sliding_window_pattern": null})", 0,
       "sliding_window_pattern"},
      {R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": null})", 0,
       "num_hidden_layers"},
  };
  for (const Case& hostile : cases) {
    const InputError error = import_rejection(hostile.config, {.layer = hostile.layer});
    EXPECT_NE(rule_of(error, hostile.field).find("a null is not read as the default"), std::string::npos)
        << hostile.config;
  }
  const GeometrySpec meaningful = import_hf_config_text(R"({"model_type": "gemma2", "hidden_size": 64,
      "num_attention_heads": 4, "num_key_value_heads": null, "head_dim": null, "attn_logit_softcapping": null,
      "rope_scaling": null, "rope_parameters": null, "num_hidden_layers": 2})",
                                                        "t", {.layer = 1})
                                      .spec;
  EXPECT_EQ(meaningful.num_kv_heads, std::nullopt);
  EXPECT_EQ(meaningful.head_dim, std::nullopt);
  EXPECT_EQ(meaningful.softcap, std::nullopt);
  EXPECT_EQ(meaningful.rope_scaling.type, RopeScalingType::none);
}

TEST(HfConfig, LayerOutOfRangeAndSlidingLayerWithoutWindow) {
  EXPECT_TRUE(import_rejection(
                  R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2})",
                  {.layer = 2})
                  .names_field("layer"));
  EXPECT_TRUE(import_rejection(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})", {.layer = -1})
                  .names_field("layer"));
  EXPECT_TRUE(
      import_rejection(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
      "layer_types": ["sliding_attention"]})")
          .names_field("sliding_window"));
}

TEST(HfConfig, ConflictingRotaryKeysAreRejected) {
  EXPECT_TRUE(import_rejection(
                  R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "partial_rotary_factor": 0.5,
      "rotary_pct": 0.25})")
                  .names_field("rotary_pct"));
}

TEST(HfConfig, OmittedKeysTakeTransformersDefaults) {
  // Qwen3Config: head_dim 128 (not hidden / heads = 64), num_key_value_heads 32.
  const GeometrySpec qwen3 =
      import_hf_config_text(R"({"model_type": "qwen3", "hidden_size": 1024, "num_attention_heads": 16})", "t").spec;
  EXPECT_EQ(qwen3.head_dim, 128);
  EXPECT_EQ(qwen3.num_kv_heads, 32);
  EXPECT_EQ(qwen3.qk_norm, QkNorm::rms);
  // An explicit null means "derive", as transformers' getattr(..., None) or hidden // heads.
  EXPECT_EQ(import_hf_config_text(
                R"({"model_type": "qwen3", "hidden_size": 1024, "num_attention_heads": 16, "head_dim": null})", "t")
                .spec.head_dim,
            std::nullopt);

  // GPTNeoXConfig: rotary_pct 0.25, biases on; either rotary spelling overrides it.
  const GeometrySpec neox =
      import_hf_config_text(R"({"model_type": "gpt_neox", "hidden_size": 1024, "num_attention_heads": 16})", "t").spec;
  EXPECT_EQ(neox.rotary_pct, 0.25);
  EXPECT_TRUE(neox.qkv_bias);
  EXPECT_EQ(import_hf_config_text(R"({"model_type": "gpt_neox", "hidden_size": 1024, "num_attention_heads": 16,
                                      "partial_rotary_factor": 0.5})",
                                  "t")
                .spec.rotary_pct,
            0.5);
  EXPECT_EQ(import_hf_config_text(R"({"model_type": "gpt_neox", "hidden_size": 1024, "num_attention_heads": 16,
                                      "rope_parameters": {"rope_type": "default", "rope_theta": 10000,
                                                          "partial_rotary_factor": 0.5}})",
                                  "t")
                .spec.rotary_pct,
            0.5);

  // MistralConfig: sliding_window 4096 when omitted, none when null.
  EXPECT_EQ(import_hf_config_text(R"({"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32})", "t")
                .spec.sliding_window,
            4096);
  EXPECT_EQ(
      import_hf_config_text(
          R"({"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "sliding_window": null})", "t")
          .spec.sliding_window,
      std::nullopt);
}

TEST(HfConfig, Qwen2SlidesOnlyFromMaxWindowLayers) {
  const std::string config = R"({"model_type": "qwen2", "hidden_size": 896, "num_attention_heads": 14,
      "num_key_value_heads": 2, "num_hidden_layers": 32, "use_sliding_window": true, "sliding_window": 1024})";
  EXPECT_EQ(import_hf_config_text(config, "t", {.layer = 0}).spec.sliding_window, std::nullopt);  // default 28
  EXPECT_EQ(import_hf_config_text(config, "t", {.layer = 27}).spec.sliding_window, std::nullopt);
  EXPECT_EQ(import_hf_config_text(config, "t", {.layer = 28}).spec.sliding_window, 1024);
  // Llama ignores a sliding_window key.
  EXPECT_EQ(import_hf_config_text(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                                      "sliding_window": 16})",
                                  "t")
                .spec.sliding_window,
            std::nullopt);
}

TEST(HfConfig, UnknownArchitecturesAreRefused) {
  for (const char* config : {R"({"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71})",
                             R"({"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32})",
                             R"({"hidden_size": 1024, "num_attention_heads": 16})"}) {
    const InputError error = import_rejection(config);
    ASSERT_TRUE(error.names_field("model_type")) << config;
    EXPECT_NE(error.violations().front().rule.find("qwen3, qwen3_moe"), std::string::npos);
  }
}

TEST(HfConfig, HostileJsonIsAnInputError) {
  std::string deep = R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "junk": )";
  deep += std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_TRUE(import_rejection(deep).names_field("config"));
  EXPECT_TRUE(import_rejection(R"({"model_type": "llama", "hidden_size": 1e400, "num_attention_heads": 4})")
                  .names_field("json"));
}

TEST(HfConfig, UnreadableFilesAreInputErrors) {
  try {
    import_hf_config_file("/nonexistent/config.json");
    FAIL();
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("--hf-config"));
    EXPECT_EQ(error.violations().front().rule, "must name an existing file");
  }
  try {
    import_hf_config_file(source_tree_path("core/config/hf_configs"));
    FAIL();
  } catch (const InputError& error) {
    EXPECT_NE(error.violations().front().rule.find("regular file"), std::string::npos);
  }
}

TEST(HfConfig, ImportKeepsAnInvalidGeometryForValidationToReject) {
  // The importer reports file problems; geometry rules are resolve_geometry's, with nearby values.
  const ImportedConfig imported =
      import_hf_config_text(R"({"model_type": "llama", "hidden_size": 1000, "num_attention_heads": 16})", "t");
  EXPECT_THROW(resolve_geometry(imported.spec), InputError);
}

}  // namespace
}  // namespace attncheck
