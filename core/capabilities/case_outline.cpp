#include "core/capabilities/case_outline.hpp"

#include <algorithm>

namespace attncheck {

CaseOutline outline_of(const Case& test_case) {
  const Inputs& inputs = test_case.inputs;
  return {.plan = test_case.plan,
          .batch = inputs.batch,
          .seq = inputs.seq,
          .positions = inputs.positions,
          .key_lengths = inputs.key_lengths,
          .decode = inputs.decode,
          .context_parallel = test_case.context_parallel};
}

bool has_keyless_queries(const CaseOutline& outline) {
  const Geometry& geometry = outline.geometry();
  const std::optional<std::int64_t> window = geometry.sliding_window();
  for (std::int64_t b = 0; b < outline.batch; ++b) {
    const std::int64_t keys = outline.key_lengths.at(static_cast<std::size_t>(b));
    for (std::int64_t i = 0; i < outline.seq; ++i) {
      // Query i sees keys j with j < keys, j <= i when causal, j > i - window.
      const std::int64_t first = window ? std::max<std::int64_t>(0, i - *window + 1) : 0;
      const std::int64_t end = geometry.causal() ? std::min(keys, i + 1) : keys;
      if (first >= end) return true;
    }
  }
  return false;
}

namespace {

void add_rope_features(const Geometry& geometry, FeatureSet& features) {
  // A latent layer's RoPE part is qk_rope_head_dim wide; a plain layer's rotary_dim of head_dim.
  const std::int64_t rotated = geometry.is_latent() ? geometry.latent()->qk_rope_head_dim : geometry.rotary_dim();
  if (rotated == 0) {
    features.insert(Feature::no_rope);
    return;
  }
  features.insert(geometry.rope_style() == RopeStyle::half_split ? Feature::rope_half_split
                                                                 : Feature::rope_interleaved);
  if (!geometry.is_latent() && rotated < geometry.head_dim()) features.insert(Feature::partial_rope);
  switch (geometry.rope_scaling().type) {
    case RopeScalingType::none:
      break;
    case RopeScalingType::linear:
      features.insert(Feature::rope_scaling_linear);
      break;
    case RopeScalingType::llama3:
      features.insert(Feature::rope_scaling_llama3);
      break;
    case RopeScalingType::yarn:
      features.insert(Feature::rope_scaling_yarn);
      break;
    case RopeScalingType::longrope:
      features.insert(Feature::rope_scaling_longrope);
      break;
  }
}

}  // namespace

FeatureSet features_of(const CaseOutline& outline) {
  const Geometry& geometry = outline.geometry();
  FeatureSet features{Feature::backward};
  if (geometry.is_latent()) {
    features.insert(Feature::latent);
  } else {
    if (geometry.num_kv_heads() < geometry.num_heads()) features.insert(Feature::gqa);
    const std::int64_t hidden = geometry.hidden_size(), heads = geometry.num_heads();
    if (hidden % heads != 0 || hidden / heads != geometry.head_dim()) features.insert(Feature::explicit_head_dim);
    switch (geometry.qk_norm()) {
      case QkNorm::none:
        break;
      case QkNorm::rms:
        features.insert(Feature::qk_norm_rms);
        break;
      case QkNorm::rms_one_plus:
        features.insert(Feature::qk_norm_rms_one_plus);
        break;
      case QkNorm::rms_full_width:
        features.insert(Feature::qk_norm_full_width);
        break;
    }
    if (geometry.qkv_bias()) features.insert(Feature::qkv_bias);
    if (geometry.out_bias()) features.insert(Feature::out_bias);
    if (geometry.scale_source() != ScaleSource::head_dim) features.insert(Feature::custom_scale);
  }
  add_rope_features(geometry, features);
  if (geometry.softcap()) features.insert(Feature::softcap);
  if (geometry.sliding_window()) features.insert(Feature::sliding_window);
  if (geometry.attention_sinks()) features.insert(Feature::sinks);
  features.insert(geometry.causal() ? Feature::causal : Feature::bidirectional);
  if (std::any_of(outline.key_lengths.begin(), outline.key_lengths.end(),
                  [&](std::int64_t keys) { return keys < outline.seq; })) {
    features.insert(Feature::key_padding);
  }
  if (has_keyless_queries(outline)) features.insert(Feature::keyless_rows);
  for (std::int64_t b = 0; b < outline.batch; ++b) {
    const auto row = outline.positions.begin() + b * outline.seq;
    if (row[0] != 0) features.insert(Feature::position_offsets);
    for (std::int64_t i = 1; i < outline.seq; ++i) {
      if (row[i] != row[i - 1] + 1) features.insert(Feature::position_gaps);
    }
  }
  if (!outline.decode.empty()) features.insert(Feature::decode);
  if (outline.plan.tp_size > 1) features.insert(Feature::tensor_parallel);
  if (outline.plan.tp_size > geometry.num_kv_heads()) features.insert(Feature::kv_replication);
  if (outline.context_parallel) features.insert(Feature::context_parallel);
  return features;
}

}  // namespace attncheck
