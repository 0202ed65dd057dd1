// HF config.json import: every official config in core/config/hf_configs imports with the right head_dim and
// features; malformed files are rejected with the key, value and rule named.
#include "core/config/hf_config.hpp"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/errors/input_error.hpp"

namespace attncheck {
namespace {

std::string config_path(const std::string& file) {
  return std::string(ATTNCHECK_HF_CONFIG_DIR) + "/" + file;
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
  };
  std::size_t files_in_folder = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ATTNCHECK_HF_CONFIG_DIR)) {
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

TEST(HfConfig, Gemma3_4bFillsTransformersDefaultsAndRejectsRopeScalingOnFullLayers) {
  const ImportedConfig imported = import_hf_config_file(config_path("google__gemma-3-4b-pt.json"));
  EXPECT_EQ(imported.model_type, "gemma3_text");
  EXPECT_EQ(imported.spec.num_heads, 8);
  EXPECT_EQ(imported.spec.num_kv_heads, 4);
  EXPECT_EQ(imported.spec.head_dim, 256);
  EXPECT_EQ(imported.spec.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(imported.spec.sliding_window, 1024);  // layer 0 is sliding; linear rope_scaling is for full layers

  try {
    import_hf_config_file(config_path("google__gemma-3-4b-pt.json"), {.layer = 5});
    FAIL() << "rope_scaling linear on a full layer was accepted";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("text_config.rope_scaling"));
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
  EXPECT_TRUE(import_rejection(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})")
                  .names_field("rope_scaling"));
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
  EXPECT_TRUE(import_rejection(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
      "rope_parameters": {"rope_type": "yarn", "rope_theta": 5e5}})")
                  .names_field("rope_parameters"));
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
  for (const char* config : {R"({"model_type": "gemma2", "hidden_size": 2304, "num_attention_heads": 8})",
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
    import_hf_config_file(ATTNCHECK_HF_CONFIG_DIR);
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
