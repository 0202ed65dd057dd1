// Import of a Hugging Face config.json (one attention layer of the model).
//
// Keys read: hidden_size, num_attention_heads, num_key_value_heads (absent: the architecture's default, else num_attention_heads),
// head_dim (absent or null = derived), rope_theta / rope_parameters, partial_rotary_factor (or
// GPT-NeoX's rotary_pct and rotary_emb_base), sliding_window with use_sliding_window,
// max_window_layers, layer_types or Gemma 3's sliding-window pattern, query_pre_attn_scalar,
// attn_logit_softcapping, attention_bias, rms_norm_eps, num_hidden_layers and model_type. A nested
// text_config (multimodal wrappers such as Gemma 3 4B) is read instead of the top level when present.
//
// Decisions:
// - Only architectures whose attention attncheck knows are imported (core/config/hf_architectures.hpp:
//   llama, mistral, qwen2(_moe), qwen3(_moe), gemma, gemma2, gemma3(_text), gpt_neox, phi3, olmo2,
//   granite, smollm3, gptj). Others differ in ways a generic reading would get silently wrong, so they
//   are refused; deepseek_v2/v3 by name (multi-head latent attention). Describe others with flags.
// - What an architecture does that attncheck cannot express yet is listed in
//   ImportedConfig::not_modelled: `plan` shows the layer with it; goldens are refused. (No supported
//   family needs it today: OLMo-2's whole-width QK-norm, the last one, is modelled as rms-full-width.)
// - A key the file omits takes the default of that architecture's transformers config class (Qwen3:
//   head_dim 128; GPT-NeoX: rotary_pct 0.25 and biases on; Mistral: sliding_window 4096; Qwen2/3:
//   max_window_layers 28). An explicit null means what it means in transformers (head_dim null:
//   derived). hidden_size is always required.
// - QK-norm is fixed by the architecture: qwen3 RMSNorm, gemma3 RMSNorm with (1 + w); its epsilon is
//   rms_norm_eps.
// - Layers differ (Gemma 2/3 alternate sliding and full layers, Gemma 3 with different RoPE bases and
//   scaling only on full layers, SmolLM3 drops RoPE on every no_rope_layers 0), so one layer is
//   imported: HfImportOptions::layer, default 0; ImportedConfig::layer_kind says which kind it is.
// - rope_scaling (or rope_parameters) of type linear, llama3, yarn and longrope (Phi-3's "su"/"yarn"
//   names included) is read into GeometrySpec::rope_scaling as transformers reads it; dynamic NTK and
//   other types, unknown scaling keys, and layer kinds other than full/sliding attention are rejected
//   rather than silently dropped. Granite's attention_multiplier is its score scale.
// - A RoPE object whose scaling parameters (factor, long_factor, ...) have no type, or type "default",
//   is refused (transformers 5.24.0 runs plain RoPE and only warns); {} or a base alone is plain RoPE. A
//   type that is null, not a string, or stated as rope_type and type differently is refused.
// - rope_scaling beside rope_parameters: transformers reads rope_scaling in their place, so every key on
//   which they differ is refused (different values, or a key only rope_parameters states), like
//   rope_theta stated twice; the same statements twice are accepted.
// - A null is never read as a default where transformers does not read it so: inside a RoPE object
//   (truncate: null is false there) and for rope_theta, rope_local_base_freq, rotary_emb_base,
//   (original_)max_position_embeddings of a scaled layer, rms_norm_eps, query_pre_attn_scalar,
//   attention_multiplier, max_window_layers, no_rope_layer_interval, sliding_window_pattern and
//   num_hidden_layers. Nulls transformers reads as absent (head_dim, sliding_window,
//   num_key_value_heads, attn_logit_softcapping, rope_scaling) still are.
// - Biases: attention_bias covers q, k, v and o; Qwen2 hard-codes q/k/v bias on and o bias off.
#pragma once

#include <cstdint>
#include <string>

#include "core/config/imported_config.hpp"

namespace attncheck {

struct HfImportOptions {
  std::int64_t layer = 0;  // which decoder layer's attention to import
};

ImportedConfig import_hf_config_text(const std::string& text, const std::string& source,
                                     const HfImportOptions& options = {});
ImportedConfig import_hf_config_file(const std::string& path, const HfImportOptions& options = {});

}  // namespace attncheck
