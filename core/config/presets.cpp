#include "core/config/presets.hpp"

#include <algorithm>
#include <array>

namespace attncheck {

namespace {

GeometrySpec qwen3(std::int64_t hidden_size, std::int64_t num_heads) {
  return {.hidden_size = hidden_size,
          .num_heads = num_heads,
          .num_kv_heads = 8,
          .head_dim = 128,
          .rope_theta = 1000000.0,
          .qk_norm = QkNorm::rms,
          .qk_norm_eps = 1e-6};
}

// Layer 0 of Gemma 3 is a sliding layer: RoPE base rope_local_base_freq (10000), the model's window.
GeometrySpec gemma3(std::int64_t hidden_size, std::int64_t num_heads, std::int64_t num_kv_heads,
                    std::int64_t sliding_window) {
  return {.hidden_size = hidden_size,
          .num_heads = num_heads,
          .num_kv_heads = num_kv_heads,
          .head_dim = 256,
          .rope_theta = 10000.0,
          .qk_norm = QkNorm::rms_one_plus,
          .qk_norm_eps = 1e-6,
          .query_pre_attn_scalar = 256.0,
          .sliding_window = sliding_window};
}

// GPT-NeoX family: head_dim omitted (derived), a quarter of it rotated, biases on q/k/v and o.
GeometrySpec gpt_neox(std::int64_t hidden_size, std::int64_t num_heads) {
  return {.hidden_size = hidden_size,
          .num_heads = num_heads,
          .rotary_pct = 0.25,
          .rope_theta = 10000.0,
          .qkv_bias = true,
          .out_bias = true};
}

const std::array<Preset, 13> kPresets = {{
    {"qwen3-0.6b", "Qwen/Qwen3-0.6B", "Qwen__Qwen3-0.6B.json", qwen3(1024, 16)},
    {"qwen3-1.7b", "Qwen/Qwen3-1.7B", "Qwen__Qwen3-1.7B.json", qwen3(2048, 16)},
    {"qwen3-4b", "Qwen/Qwen3-4B", "Qwen__Qwen3-4B.json", qwen3(2560, 32)},
    {"qwen3-8b", "Qwen/Qwen3-8B", "Qwen__Qwen3-8B.json", qwen3(4096, 32)},
    {"qwen3-14b", "Qwen/Qwen3-14B", "Qwen__Qwen3-14B.json", qwen3(5120, 40)},
    {"qwen3-32b", "Qwen/Qwen3-32B", "Qwen__Qwen3-32B.json", qwen3(5120, 64)},
    {"gemma-3-270m", "google/gemma-3-270m", "google__gemma-3-270m.json", gemma3(640, 4, 1, 512)},
    {"gemma-3-4b", "google/gemma-3-4b-pt", "google__gemma-3-4b-pt.json", gemma3(2560, 8, 4, 1024)},
    // Gemma 1 (no official file held): no QK-norm, scale head_dim^-0.5, full attention.
    {"gemma-7b",
     "google/gemma-7b",
     "",
     {.hidden_size = 3072, .num_heads = 16, .num_kv_heads = 16, .head_dim = 256, .rope_theta = 10000.0}},
    {"llama-3-8b",
     "meta-llama/Meta-Llama-3-8B",
     "meta-llama__Meta-Llama-3-8B.json",
     {.hidden_size = 4096, .num_heads = 32, .num_kv_heads = 8, .rope_theta = 500000.0}},
    {"mistral-7b",
     "mistralai/Mistral-7B-v0.1",
     "mistralai__Mistral-7B-v0.1.json",
     {.hidden_size = 4096, .num_heads = 32, .num_kv_heads = 8, .rope_theta = 10000.0, .sliding_window = 4096}},
    {"gpt-neox-20b", "EleutherAI/gpt-neox-20b", "EleutherAI__gpt-neox-20b.json", gpt_neox(6144, 64)},
    {"pythia-410m", "EleutherAI/pythia-410m", "EleutherAI__pythia-410m.json", gpt_neox(1024, 16)},
}};

}  // namespace

std::span<const Preset> presets() {
  return kPresets;
}

const Preset* find_preset(std::string_view name) {
  auto it = std::find_if(kPresets.begin(), kPresets.end(), [&](const Preset& preset) { return preset.name == name; });
  return it == kPresets.end() ? nullptr : &*it;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& preset : kPresets) names.emplace_back(preset.name);
  return names;
}

}  // namespace attncheck
