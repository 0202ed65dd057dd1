// The kinds a layer's features come in, apart from the rest of the geometry so that device code (the
// CUDA kernels' parameter blocks) can use the same names without the Geometry class.
#pragma once

#include <optional>
#include <string_view>

namespace attncheck {

// RoPE pairing of channels. half_split: channel i pairs with i + rotary_dim/2 (GPT-NeoX, Llama,
// Qwen, Gemma: "rotate_half"). interleaved: channel 2i pairs with 2i+1 (GPT-J, Meta's original Llama).
enum class RopeStyle { half_split, interleaved };

// Per-head normalisation of q and k over head_dim before RoPE. rms: x / rms(x) * w (Qwen3).
// rms_one_plus: x / rms(x) * (1 + w) (Gemma 3, whose stored weight is centred on 0).
enum class QkNorm { none, rms, rms_one_plus };

std::string_view to_string(RopeStyle style);  // "half-split" | "interleaved"
std::string_view to_string(QkNorm norm);      // "none" | "rms" | "rms-one-plus"
std::optional<RopeStyle> parse_rope_style(std::string_view text);
std::optional<QkNorm> parse_qk_norm(std::string_view text);

}  // namespace attncheck
