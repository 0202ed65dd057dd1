// RoPE scaling: how a layer's rotary frequencies depart from plain theta^(-2i/rotary_dim), as
// transformers' modeling_rope_utils computes them (rope_type linear, llama3, yarn, longrope). The
// frequencies themselves, step by step: core/model/rope_frequencies.hpp.
//
// `dynamic` NTK scaling (frequencies that change with the sequence length seen so far) and any other
// type are not modelled: the config importer refuses them by name rather than dropping them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace attncheck {

enum class RopeScalingType { none, linear, llama3, yarn, longrope };

std::string_view to_string(RopeScalingType type);  // "none" | "linear" | "llama3" | "yarn" | "longrope"
std::optional<RopeScalingType> parse_rope_scaling_type(std::string_view text);

// Fields a type does not use stay at their defaults (resolve_geometry refuses them set).
struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  // linear, llama3, yarn: the context extension factor (> 0). longrope: the factor its attention
  // factor is derived from (max_position_embeddings / original_max_position_embeddings when the file
  // states none); ignored when attention_factor is given.
  std::optional<double> factor;
  std::optional<double> low_freq_factor, high_freq_factor;       // llama3: the band's edges, low < high
  std::optional<std::int64_t> original_max_position_embeddings;  // llama3, yarn, longrope: pretraining length
  std::optional<double> beta_fast, beta_slow;                    // yarn: ramp edges in rotations (32, 1)
  std::optional<double> mscale, mscale_all_dim;                  // yarn: attention factor's numerator, denominator
  bool truncate = true;                                          // yarn: floor/ceil the ramp's edges
  std::optional<double> attention_factor;                        // yarn, longrope: explicit, else derived
  std::vector<double> short_factor, long_factor;                 // longrope: one per channel pair

  friend bool operator==(const RopeScaling&, const RopeScaling&) = default;
};

}  // namespace attncheck
