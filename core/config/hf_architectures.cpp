#include "core/config/hf_architectures.hpp"

#include <array>
#include <vector>

#include <fmt/format.h>

namespace attncheck {

namespace {

// Defaults of transformers' config classes (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config,
// GemmaConfig, Gemma3TextConfig, GPTNeoXConfig) for the keys the importer reads. hidden_size is never
// defaulted: every real config states it, and a file without it is more likely broken than minimal.
// Gemma 3 also defaults the head counts, because its official multimodal configs omit them.
// GPT-NeoX's rotary_pct default (0.25) is applied by the importer only when neither rotary_pct nor
// partial_rotary_factor is stated, since newer files spell it the second way.
struct Family {
  HfFamily family;
  std::string_view name;
  QkNorm qk_norm;
  nlohmann::json defaults;
  HfBiasRule bias_rule = HfBiasRule::attention_bias;
  RopeStyle rope_style = RopeStyle::half_split;
  std::string_view not_modelled;
  bool attention_sinks = false;
};

const std::vector<Family>& families() {
  static const std::vector<Family> table = {
      {HfFamily::llama, "Llama", QkNorm::none, {{"rope_theta", 10000.0}, {"attention_bias", false}}},
      {HfFamily::mistral,
       "Mistral",
       QkNorm::none,
       {{"num_key_value_heads", 8}, {"sliding_window", 4096}, {"rope_theta", 10000.0}}},
      {HfFamily::qwen2,
       "Qwen2",
       QkNorm::none,
       {{"num_key_value_heads", 32},
        {"use_sliding_window", false},
        {"sliding_window", 4096},
        {"max_window_layers", 28},
        {"rope_theta", 10000.0}},
       HfBiasRule::qwen2},
      {HfFamily::qwen3,
       "Qwen3",
       QkNorm::rms,
       {{"num_key_value_heads", 32},
        {"head_dim", 128},
        {"use_sliding_window", false},
        {"sliding_window", 4096},
        {"max_window_layers", 28},
        {"rope_theta", 10000.0},
        {"attention_bias", false},
        {"rms_norm_eps", 1e-6}}},
      {HfFamily::gemma,
       "Gemma",
       QkNorm::none,
       {{"num_key_value_heads", 16}, {"head_dim", 256}, {"rope_theta", 10000.0}, {"attention_bias", false}}},
      {HfFamily::gemma3,
       "Gemma 3",
       QkNorm::rms_one_plus,
       {{"num_hidden_layers", 26},
        {"num_attention_heads", 8},
        {"num_key_value_heads", 4},
        {"head_dim", 256},
        {"query_pre_attn_scalar", 256},
        {"rope_theta", 1000000.0},
        {"rope_local_base_freq", 10000.0},
        {"sliding_window", 4096},
        {"sliding_window_pattern", 6},
        {"rms_norm_eps", 1e-6},
        {"attention_bias", false}}},
      {HfFamily::gpt_neox, "GPT-NeoX", QkNorm::none, {{"rotary_emb_base", 10000}, {"attention_bias", true}}},
      // Gemma2Config: layer_types alternate sliding (even layers) and full (odd) when the file has none.
      {HfFamily::gemma2,
       "Gemma 2",
       QkNorm::none,
       {{"num_hidden_layers", 26},
        {"num_attention_heads", 8},
        {"num_key_value_heads", 4},
        {"head_dim", 256},
        {"query_pre_attn_scalar", 256},
        {"sliding_window", 4096},
        {"attn_logit_softcapping", 50.0},
        {"rope_theta", 10000.0},
        {"attention_bias", false}}},
      // Phi3Config: the fused qkv_proj and o_proj have no bias; a sliding_window applies to every layer.
      {HfFamily::phi3,
       "Phi-3",
       QkNorm::none,
       {{"num_hidden_layers", 32},
        {"num_attention_heads", 32},
        {"max_position_embeddings", 4096},
        {"original_max_position_embeddings", 4096},
        {"rope_theta", 10000.0}},
       HfBiasRule::none},
      // Olmo2Attention: q_norm = RMSNorm(num_heads * head_dim), k_norm = RMSNorm(num_kv_heads * head_dim)
      // over the whole projections, before the split into heads and before RoPE (rms-full-width).
      {HfFamily::olmo2,
       "OLMo-2",
       QkNorm::rms_full_width,
       {{"num_hidden_layers", 32},
        {"num_attention_heads", 32},
        {"max_position_embeddings", 2048},
        {"rope_theta", 10000.0},
        {"attention_bias", false},
        {"rms_norm_eps", 1e-5}},
       HfBiasRule::attention_bias},
      // GraniteConfig: the score scale is attention_multiplier itself (1.0 when omitted).
      {HfFamily::granite,
       "Granite",
       QkNorm::none,
       {{"num_hidden_layers", 32},
        {"num_attention_heads", 32},
        {"max_position_embeddings", 2048},
        {"attention_multiplier", 1.0},
        {"rope_theta", 10000.0},
        {"attention_bias", false}}},
      // SmolLM3Config: no_rope_layers (1 = RoPE, 0 = none) from no_rope_layer_interval when absent.
      {HfFamily::smollm3,
       "SmolLM3",
       QkNorm::none,
       {{"num_hidden_layers", 36},
        {"num_attention_heads", 16},
        {"num_key_value_heads", 4},
        {"max_position_embeddings", 32768},
        {"use_sliding_window", false},
        {"no_rope_layer_interval", 4},
        {"rope_theta", 2000000.0},
        {"attention_bias", false}}},
      // GPTJConfig (keys n_embd, n_head, n_layer, n_positions; read under the usual names): rotary_dim 64
      // of the head, interleaved pairs, base 10000 fixed in its create_sinusoidal_positions; no biases.
      {HfFamily::gptj,
       "GPT-J",
       QkNorm::none,
       {{"n_layer", 28}, {"n_positions", 2048}, {"rotary_dim", 64}, {"rope_theta", 10000.0}},
       HfBiasRule::none,
       RopeStyle::interleaved},
      // GptOssConfig: layer_types alternate sliding (even layers) and full (odd) when the file has none;
      // q/k/v/o biases; yarn RoPE; every attention layer has its sinks (GptOssAttention.sinks).
      {HfFamily::gpt_oss,
       "gpt-oss",
       QkNorm::none,
       {{"num_hidden_layers", 36},
        {"num_attention_heads", 64},
        {"num_key_value_heads", 8},
        {"head_dim", 64},
        {"sliding_window", 128},
        {"rope_theta", 150000.0},
        {"attention_bias", true}},
       HfBiasRule::attention_bias,
       RopeStyle::half_split,
       "",
       true},
      // DeepseekV2Config / DeepseekV3Config (transformers 5.24.0): multi-head latent attention with these
      // widths when omitted. A null q_lora_rank is None (q_proj, DeepSeek-V2-Lite), not the default. RoPE
      // on interleaved pairs (V2's complex form; V3's rope_interleave, true unless the file says false).
      {HfFamily::deepseek_v2,
       "DeepSeek-V2",
       QkNorm::none,
       {{"num_hidden_layers", 32},
        {"num_attention_heads", 32},
        {"num_key_value_heads", 32},
        {"q_lora_rank", 1536},
        {"kv_lora_rank", 512},
        {"qk_nope_head_dim", 128},
        {"qk_rope_head_dim", 64},
        {"v_head_dim", 128},
        {"rope_theta", 10000.0},
        {"attention_bias", false}},
       HfBiasRule::attention_bias,
       RopeStyle::interleaved},
      {HfFamily::deepseek_v3,
       "DeepSeek-V3",
       QkNorm::none,
       {{"num_hidden_layers", 61},
        {"num_attention_heads", 128},
        {"num_key_value_heads", 128},
        {"q_lora_rank", 1536},
        {"kv_lora_rank", 512},
        {"qk_nope_head_dim", 128},
        {"qk_rope_head_dim", 64},
        {"v_head_dim", 128},
        {"rope_theta", 10000.0},
        {"rope_interleave", true},
        {"attention_bias", false}},
       HfBiasRule::attention_bias,
       RopeStyle::interleaved},
  };
  return table;
}

const Family& family_entry(HfFamily family) {
  for (const Family& entry : families()) {
    if (entry.family == family) return entry;
  }
  return families().front();  // unreachable: every HfFamily has an entry
}

struct ModelType {
  std::string_view model_type;
  HfFamily family;
};

// kimi_k2: Moonshot's Kimi K2 (architectures DeepseekV3ForCausalLM; transformers 5.24.0 has no kimi_k2
// config class, and Moonshot's deployment guide says to rename model_type to deepseek_v3).
constexpr std::array<ModelType, 20> kModelTypes = {{{"llama", HfFamily::llama},
                                                    {"mistral", HfFamily::mistral},
                                                    {"qwen2", HfFamily::qwen2},
                                                    {"qwen2_moe", HfFamily::qwen2},
                                                    {"qwen3", HfFamily::qwen3},
                                                    {"qwen3_moe", HfFamily::qwen3},
                                                    {"gemma", HfFamily::gemma},
                                                    {"gemma2", HfFamily::gemma2},
                                                    {"gemma3", HfFamily::gemma3},
                                                    {"gemma3_text", HfFamily::gemma3},
                                                    {"gpt_neox", HfFamily::gpt_neox},
                                                    {"phi3", HfFamily::phi3},
                                                    {"olmo2", HfFamily::olmo2},
                                                    {"granite", HfFamily::granite},
                                                    {"smollm3", HfFamily::smollm3},
                                                    {"gptj", HfFamily::gptj},
                                                    {"gpt_oss", HfFamily::gpt_oss},
                                                    {"deepseek_v2", HfFamily::deepseek_v2},
                                                    {"deepseek_v3", HfFamily::deepseek_v3},
                                                    {"kimi_k2", HfFamily::deepseek_v3}}};

}  // namespace

const nlohmann::json& HfArchitecture::defaults() const {
  return family_entry(family).defaults;
}

std::optional<HfArchitecture> hf_architecture(std::string_view model_type) {
  for (const ModelType& entry : kModelTypes) {
    if (entry.model_type != model_type) continue;
    const Family& family = family_entry(entry.family);
    return HfArchitecture{family.family,     family.name,         family.qk_norm,        family.bias_rule,
                          family.rope_style, family.not_modelled, family.attention_sinks};
  }
  return std::nullopt;
}

std::string_view refused_architecture(std::string_view model_type) {
  // Per-head LayerNorm of q and k (StableLM-2's and Cohere's qk_layernorm: mean subtracted, a weight per
  // head, [num_heads, head_dim]) is a norm kind attncheck does not model; refused by name rather than read
  // as a layer without it.
  if (model_type == "stablelm" || model_type == "cohere" || model_type == "cohere2") {
    return "per-head LayerNorm of q and k (StableLM-2's and Cohere's qk_layernorm: mean subtracted, one "
           "weight per head, [num_heads, head_dim]) is not a QK-norm kind attncheck models (it has rms, "
           "rms-one-plus and rms-full-width); describe the layer with flags without it, knowing the norm is left out";
  }
  return "";
}

std::string supported_model_types() {
  std::vector<std::string_view> names;
  for (const ModelType& entry : kModelTypes) names.push_back(entry.model_type);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace attncheck
