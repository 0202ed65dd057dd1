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
        {"rope_theta", 10000.0}}},
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

constexpr std::array<ModelType, 10> kModelTypes = {{{"llama", HfFamily::llama},
                                                    {"mistral", HfFamily::mistral},
                                                    {"qwen2", HfFamily::qwen2},
                                                    {"qwen2_moe", HfFamily::qwen2},
                                                    {"qwen3", HfFamily::qwen3},
                                                    {"qwen3_moe", HfFamily::qwen3},
                                                    {"gemma", HfFamily::gemma},
                                                    {"gemma3", HfFamily::gemma3},
                                                    {"gemma3_text", HfFamily::gemma3},
                                                    {"gpt_neox", HfFamily::gpt_neox}}};

}  // namespace

const nlohmann::json& HfArchitecture::defaults() const {
  return family_entry(family).defaults;
}

std::optional<HfArchitecture> hf_architecture(std::string_view model_type) {
  for (const ModelType& entry : kModelTypes) {
    if (entry.model_type != model_type) continue;
    const Family& family = family_entry(entry.family);
    return HfArchitecture{family.family, family.name, family.qk_norm};
  }
  return std::nullopt;
}

std::string supported_model_types() {
  std::vector<std::string_view> names;
  for (const ModelType& entry : kModelTypes) names.push_back(entry.model_type);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace attncheck
