#include "core/hf_architectures.hpp"

#include <array>
#include <utility>

#include <fmt/format.h>

namespace attncheck {

namespace {

struct Entry {
  std::string_view model_type;
  HfFamily family;
};

constexpr std::array<Entry, 10> kModelTypes = {{{"llama", HfFamily::llama},
                                                {"mistral", HfFamily::mistral},
                                                {"qwen2", HfFamily::qwen2},
                                                {"qwen2_moe", HfFamily::qwen2},
                                                {"qwen3", HfFamily::qwen3},
                                                {"qwen3_moe", HfFamily::qwen3},
                                                {"gemma", HfFamily::gemma},
                                                {"gemma3", HfFamily::gemma3},
                                                {"gemma3_text", HfFamily::gemma3},
                                                {"gpt_neox", HfFamily::gpt_neox}}};

// Defaults of transformers' config classes (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config,
// GemmaConfig, Gemma3TextConfig, GPTNeoXConfig) for the keys the importer reads. hidden_size is never
// defaulted: every real config states it, and a file without it is more likely broken than minimal.
// Gemma 3 also defaults the head counts, because its official multimodal configs omit them.
const nlohmann::json& defaults_for(HfFamily family) {
  static const nlohmann::json llama = {{"rope_theta", 10000.0}, {"attention_bias", false}};
  static const nlohmann::json mistral = {{"num_key_value_heads", 8}, {"sliding_window", 4096}, {"rope_theta", 10000.0}};
  static const nlohmann::json qwen2 = {{"num_key_value_heads", 32},
                                       {"use_sliding_window", false},
                                       {"sliding_window", 4096},
                                       {"max_window_layers", 28},
                                       {"rope_theta", 10000.0}};
  static const nlohmann::json qwen3 = {
      {"num_key_value_heads", 32}, {"head_dim", 128},       {"use_sliding_window", false}, {"sliding_window", 4096},
      {"max_window_layers", 28},   {"rope_theta", 10000.0}, {"attention_bias", false},     {"rms_norm_eps", 1e-6}};
  static const nlohmann::json gemma = {
      {"num_key_value_heads", 16}, {"head_dim", 256}, {"rope_theta", 10000.0}, {"attention_bias", false}};
  static const nlohmann::json gemma3 = {{"num_hidden_layers", 26},         {"num_attention_heads", 8},
                                        {"num_key_value_heads", 4},        {"head_dim", 256},
                                        {"query_pre_attn_scalar", 256},    {"rope_theta", 1000000.0},
                                        {"rope_local_base_freq", 10000.0}, {"sliding_window", 4096},
                                        {"sliding_window_pattern", 6},     {"rms_norm_eps", 1e-6},
                                        {"attention_bias", false}};
  // rotary_pct's default (0.25) is applied by the importer only when neither rotary_pct nor
  // partial_rotary_factor is stated, since newer files spell it the second way.
  static const nlohmann::json gpt_neox = {{"rotary_emb_base", 10000}, {"attention_bias", true}};
  switch (family) {
    case HfFamily::llama:
      return llama;
    case HfFamily::mistral:
      return mistral;
    case HfFamily::qwen2:
      return qwen2;
    case HfFamily::qwen3:
      return qwen3;
    case HfFamily::gemma:
      return gemma;
    case HfFamily::gemma3:
      return gemma3;
    case HfFamily::gpt_neox:
      return gpt_neox;
  }
  return llama;
}

HfArchitecture describe(HfFamily family) {
  switch (family) {
    case HfFamily::llama:
      return {family, "Llama", QkNorm::none};
    case HfFamily::mistral:
      return {family, "Mistral", QkNorm::none};
    case HfFamily::qwen2:
      return {family, "Qwen2", QkNorm::none};
    case HfFamily::qwen3:
      return {family, "Qwen3", QkNorm::rms};
    case HfFamily::gemma:
      return {family, "Gemma", QkNorm::none};
    case HfFamily::gemma3:
      return {family, "Gemma 3", QkNorm::rms_one_plus};
    case HfFamily::gpt_neox:
      return {family, "GPT-NeoX", QkNorm::none};
  }
  return {family, "Llama", QkNorm::none};
}

}  // namespace

const nlohmann::json& HfArchitecture::defaults() const {
  return defaults_for(family);
}

std::optional<HfArchitecture> hf_architecture(std::string_view model_type) {
  for (const Entry& entry : kModelTypes) {
    if (entry.model_type == model_type) return describe(entry.family);
  }
  return std::nullopt;
}

std::string supported_model_types() {
  std::vector<std::string_view> names;
  for (const Entry& entry : kModelTypes) names.push_back(entry.model_type);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace attncheck
