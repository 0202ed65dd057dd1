// The kinds a layer's features come in, apart from the rest of the geometry so that device code (the
// CUDA kernels' parameter blocks) can use the same names without the Geometry class.
#pragma once

#include <optional>
#include <string_view>

namespace attncheck {

// RoPE pairing of channels. half_split: channel i pairs with i + rotary_dim/2 (GPT-NeoX, Llama,
// Qwen, Gemma: "rotate_half"). interleaved: channel 2i pairs with 2i+1 (GPT-J, Meta's original Llama).
enum class RopeStyle { half_split, interleaved };

// Normalisation of q and k before RoPE. rms: per head over head_dim, x / rms(x) * w (Qwen3).
// rms_one_plus: per head, x / rms(x) * (1 + w) (Gemma 3, whose stored weight is centred on 0).
// rms_full_width: over a token's whole projection, all num_heads * head_dim channels of q and all
// num_kv_heads * head_dim of k, x / rms(x) * w with a weight of that width (OLMo-2); under TP no rank
// holds the whole width, so the sum of squares is all-reduced (a replicated KV head counted once).
enum class QkNorm { none, rms, rms_one_plus, rms_full_width };

std::string_view to_string(RopeStyle style);  // "half-split" | "interleaved"
std::string_view to_string(QkNorm norm);      // "none" | "rms" | "rms-one-plus" | "rms-full-width"
std::optional<RopeStyle> parse_rope_style(std::string_view text);
std::optional<QkNorm> parse_qk_norm(std::string_view text);

}  // namespace attncheck
