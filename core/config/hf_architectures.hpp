// What attncheck knows about each Hugging Face architecture it imports: which model_type values it
// covers, its QK-norm, its bias rule, and transformers' config-class defaults for the keys that shape
// the attention layer. A config.json that omits such a key means the default, not "absent": Qwen3
// without head_dim has head_dim 128, GPT-NeoX without rotary_pct rotates 25%, Mistral without
// sliding_window slides over 4096 keys. Architectures not listed are refused rather than guessed at.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/model/geometry.hpp"

namespace attncheck {

enum class HfFamily {
  llama,
  mistral,
  qwen2,
  qwen3,
  gemma,
  gemma2,
  gemma3,
  gpt_neox,
  phi3,
  olmo2,
  granite,
  smollm3,
  gptj,
  gpt_oss,
  deepseek_v2,  // multi-head latent attention (core/model/latent_attention.hpp); RoPE on interleaved pairs
  deepseek_v3   // the same; rope_interleave (default true) chooses the pairing; Kimi K2 is this architecture
};

// Which projections carry a bias: attention_bias for all four (its default in defaults()); Qwen2's q, k
// and v always and o never; none whatever the file says (Phi-3's fused qkv_proj, GPT-J).
enum class HfBiasRule { attention_bias, qwen2, none };

struct HfArchitecture {
  HfFamily family;
  std::string_view name;  // for messages: "Qwen3"
  QkNorm qk_norm;         // fixed by the architecture, not a config key
  HfBiasRule bias_rule = HfBiasRule::attention_bias;
  RopeStyle rope_style = RopeStyle::half_split;  // GPT-J rotates interleaved pairs
  // What its attention does that attncheck cannot express yet (empty: nothing): `plan` shows the layer
  // and says this; golden files and checks are refused with it.
  std::string_view not_modelled;
  bool attention_sinks = false;  // a learned sink logit per query head (gpt-oss)
  // transformers' defaults for omitted keys, as a JSON object (keys as in config.json).
  const nlohmann::json& defaults() const;
};

// The architecture for a model_type, or nullopt when attncheck does not model it.
std::optional<HfArchitecture> hf_architecture(std::string_view model_type);

// Why a known model_type is refused outright (StableLM-2's and Cohere's per-head LayerNorm), or empty.
std::string_view refused_architecture(std::string_view model_type);

// "llama, mistral, qwen2, ..." for messages.
std::string supported_model_types();

}  // namespace attncheck
