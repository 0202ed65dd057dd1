// Import of a Hugging Face config.json (one attention layer of the model).
//
// Keys read: hidden_size, num_attention_heads, num_key_value_heads (absent = num_attention_heads),
// head_dim (absent or null = derived), rope_theta / rope_parameters, partial_rotary_factor (or
// GPT-NeoX's rotary_pct and rotary_emb_base), sliding_window with use_sliding_window,
// max_window_layers, layer_types or Gemma 3's sliding-window pattern, query_pre_attn_scalar,
// attn_logit_softcapping, attention_bias, rms_norm_eps, num_hidden_layers and model_type. A nested
// text_config (multimodal wrappers such as Gemma 3 4B) is read instead of the top level when present.
//
// Decisions:
// - QK-norm is not a config key; model_type fixes it: qwen3/qwen3_moe RMSNorm, gemma3/gemma3_text
//   RMSNorm with (1 + w). Its epsilon is rms_norm_eps.
// - Keys a model's transformers config class fills in when absent are filled the same way for
//   gemma3_text (the Gemma 3 defaults); other model types must state hidden_size and
//   num_attention_heads.
// - Layers differ (Gemma 3 alternates sliding and full layers with different RoPE bases), so one
//   layer is imported: HfImportOptions::layer, default 0.
// - rope_scaling other than the default, and layer kinds other than full/sliding attention, are not
//   modelled and are rejected rather than silently dropped.
// - Biases: attention_bias (default false; GPT-NeoX default true) covers q, k, v and o; Qwen2
//   hard-codes q/k/v bias on and o bias off.
#pragma once

#include <cstdint>
#include <string>

#include "core/imported_config.hpp"

namespace attncheck {

struct HfImportOptions {
  std::int64_t layer = 0;  // which decoder layer's attention to import
};

ImportedConfig import_hf_config_text(const std::string& text, const std::string& source,
                                     const HfImportOptions& options = {});
ImportedConfig import_hf_config_file(const std::string& path, const HfImportOptions& options = {});

}  // namespace attncheck
