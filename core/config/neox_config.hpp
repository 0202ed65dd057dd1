// Import of a GPT-NeoX YAML config (the model section of e.g. configs/20B.yml).
//
// Keys (either spelling, "hidden-size" or "hidden_size"): hidden_size, num_attention_heads,
// num_kv_heads, head_dim (the proposed explicit per-head width; absent = derived), rotary_pct
// (default 1.0), rotary_emb_base (default 10000), pos_emb (default "learned", as NeoX),
// use_bias_in_attn_linear (default true, as NeoX), sliding_window_width, use_qk_layernorm, use_mup,
// attention_config and model_parallel_size (reported as the config's TP size). Layer 0 is imported.
//
// Decisions:
// - pos_emb "rotary" rotates rotary_pct of head_dim in NeoX's half-split (rotate_half) style;
//   "learned", "sinusoidal" and "none" add nothing inside attention (rotary_dim 0); "rpe" and "alibi"
//   bias the scores and are rejected as not modelled.
// - use_qk_layernorm is rejected: NeoX normalises over [local heads, head_dim] jointly, which depends
//   on the TP size and is not the per-head QK-norm attncheck models.
// - attention_config may only name "global" or "flash" attention (the dense causal layer modelled).
// - sliding_window_width W acts only on "flash" layers, where NeoX's flash-attn call sees keys
//   i - W ... i: attncheck's sliding_window (keys a query sees, itself included) is W + 1.
// - use_mup is refused: NeoX then scales scores by 1/head_dim.
#pragma once

#include <string>

#include "core/config/imported_config.hpp"

namespace attncheck {

ImportedConfig import_neox_config_text(const std::string& text, const std::string& source);
ImportedConfig import_neox_config_file(const std::string& path);

}  // namespace attncheck
