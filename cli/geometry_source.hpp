// Where `attncheck plan` and `attncheck golden make` get a geometry: a preset, an HF config.json, a
// GPT-NeoX YAML, or explicit flags — exactly one of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/model/geometry.hpp"

namespace attncheck::cli {

// The options, as CLI11 fills them.
struct GeometryOptions {
  std::string preset;
  std::string hf_config;
  std::int64_t hf_layer = 0;
  std::string neox_config;
  // Explicit geometry (--hidden and --heads required, the rest optional).
  std::optional<std::int64_t> hidden_size, num_heads, num_kv_heads, head_dim, rotary_dim, sliding_window;
  std::optional<double> rotary_pct, rope_theta, qk_norm_eps, query_pre_attn_scalar, softcap;
  std::string rope_style = "half-split";
  std::string qk_norm = "none";
  bool qkv_bias = false, out_bias = false, non_causal = false, attention_sinks = false;
};

struct ResolvedGeometry {
  Geometry geometry;
  std::string title;                           // "Qwen/Qwen3-0.6B (preset qwen3-0.6b)"
  std::string source_kind;                     // "preset" | "hf-config" | "neox-config" | "flags"
  std::optional<std::int64_t> config_tp_size;  // a TP size the config file states
  std::vector<std::string> notes;
  std::string layer_kind;                 // an HF config's layer: "layer 3 of 36: full_attention, no RoPE ..."
  std::vector<std::string> not_modelled;  // what the source's layer does that the geometry leaves out
};

// Adds the geometry options to a subcommand.
void add_geometry_options(CLI::App& command, GeometryOptions& options);

// Builds and validates the geometry; throws InputError (exit 2) with the source named.
ResolvedGeometry resolve_geometry_source(const GeometryOptions& options);

}  // namespace attncheck::cli
