#include "core/capabilities/feature.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <stdexcept>

namespace attncheck {

namespace {

using enum Feature;
constexpr FeatureKind requirement = FeatureKind::requirement;
constexpr FeatureKind part = FeatureKind::part;

// In declaration order: all_features()[i].feature == Feature(i) (checked by FeatureNames.* tests).
constexpr std::array kFeatures{
    FeatureInfo{gqa, "gqa", requirement, "fewer KV heads than query heads (grouped-query or multi-query attention)"},
    FeatureInfo{explicit_head_dim, "explicit-head-dim", requirement, "head_dim is not hidden_size / num_heads"},
    FeatureInfo{rope_half_split, "rope-half-split", requirement, "RoPE pairs channel i with i + rotary_dim/2"},
    FeatureInfo{rope_interleaved, "rope-interleaved", requirement, "RoPE pairs channels 2i and 2i+1 (GPT-J)"},
    FeatureInfo{partial_rope, "partial-rope", requirement,
                "RoPE rotates only the first rotary_dim < head_dim channels"},
    FeatureInfo{no_rope, "no-rope", requirement, "no RoPE at all (rotary_dim 0)"},
    FeatureInfo{rope_scaling_linear, "rope-scaling-linear", requirement, "RoPE scaling of rope_type linear"},
    FeatureInfo{rope_scaling_llama3, "rope-scaling-llama3", requirement, "RoPE scaling of rope_type llama3"},
    FeatureInfo{rope_scaling_yarn, "rope-scaling-yarn", requirement, "RoPE scaling of rope_type yarn"},
    FeatureInfo{rope_scaling_longrope, "rope-scaling-longrope", requirement, "RoPE scaling of rope_type longrope"},
    FeatureInfo{qk_norm_rms, "qk-norm-rms", requirement, "RMSNorm of each q and k head, times its weight (Qwen3)"},
    FeatureInfo{qk_norm_rms_one_plus, "qk-norm-rms-one-plus", requirement,
                "RMSNorm of each q and k head, times 1 + its weight (Gemma 3)"},
    FeatureInfo{qk_norm_full_width, "qk-norm-full-width", requirement,
                "RMSNorm over a token's whole q and k width (OLMo-2)"},
    FeatureInfo{qkv_bias, "qkv-bias", requirement, "biases on q_proj, k_proj and v_proj"},
    FeatureInfo{out_bias, "out-bias", requirement, "a bias on o_proj"},
    FeatureInfo{custom_scale, "custom-scale", requirement,
                "a softmax scale other than head_dim^-0.5 (query_pre_attn_scalar, attention_multiplier)"},
    FeatureInfo{softcap, "softcap", requirement, "scores capped as softcap * tanh(scores / softcap)"},
    FeatureInfo{sliding_window, "sliding-window", requirement, "each query sees only the last sliding_window keys"},
    FeatureInfo{sinks, "sinks", requirement, "a learned sink logit per head in each softmax (gpt-oss)"},
    FeatureInfo{causal, "causal", requirement, "causal masking, bottom-right aligned"},
    FeatureInfo{bidirectional, "bidirectional", requirement, "no causal mask"},
    FeatureInfo{key_padding, "key-padding", requirement, "some batch row has fewer keys than tokens (key_lengths)"},
    FeatureInfo{keyless_rows, "keyless-rows", requirement, "some query sees no key at all (its output is 0)"},
    FeatureInfo{position_offsets, "position-offsets", requirement, "some row's position ids start above 0"},
    FeatureInfo{position_gaps, "position-gaps", requirement, "position ids skip values within a row"},
    FeatureInfo{backward, "backward", part, "gradients of x and every weight (grads/*)"},
    FeatureInfo{decode, "decode", part, "KV-cache decoding over the case's schedule (decode/out)"},
    FeatureInfo{tensor_parallel, "tensor-parallel", part, "each TP rank's gradients of the case's plan (ranks/*)"},
    FeatureInfo{kv_replication, "kv-replication", part,
                "TP sizes above num_kv_heads, each KV head replicated on several ranks"},
    FeatureInfo{context_parallel, "context-parallel", part, "runs the case's context-parallel layout"},
    FeatureInfo{latent, "latent", requirement, "multi-head latent attention (DeepSeek-V2/V3, Kimi K2)"},
};
static_assert(kFeatures.size() <= 64, "FeatureSet holds 64 features");

}  // namespace

std::span<const FeatureInfo> all_features() {
  return kFeatures;
}

const FeatureInfo& info(Feature feature) {
  const auto index = static_cast<std::size_t>(feature);
  if (index >= kFeatures.size() || kFeatures[index].feature != feature) {
    throw std::logic_error("feature table out of order");
  }
  return kFeatures[index];
}

std::string_view to_string(Feature feature) {
  return info(feature).name;
}

std::optional<Feature> parse_feature(std::string_view name) {
  for (const FeatureInfo& entry : kFeatures) {
    if (entry.name == name) return entry.feature;
  }
  return std::nullopt;
}

std::string feature_names() {
  std::vector<std::string_view> names;
  for (const FeatureInfo& entry : kFeatures) names.push_back(entry.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

FeatureSet::FeatureSet(std::initializer_list<Feature> features) {
  for (const Feature feature : features) insert(feature);
}

FeatureSet FeatureSet::from_bits(std::uint64_t bits) {
  FeatureSet set;
  set.bits_ = bits;
  return set;
}

FeatureSet FeatureSet::all() {
  return from_bits(kFeatures.size() == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << kFeatures.size()) - 1);
}

FeatureSet FeatureSet::parts() {
  FeatureSet set;
  for (const FeatureInfo& entry : kFeatures) {
    if (entry.kind == FeatureKind::part) set.insert(entry.feature);
  }
  return set;
}

std::vector<Feature> FeatureSet::list() const {
  std::vector<Feature> features;
  for (const FeatureInfo& entry : kFeatures) {
    if (contains(entry.feature)) features.push_back(entry.feature);
  }
  return features;
}

std::string to_string(const FeatureSet& features) {
  std::vector<std::string_view> names;
  for (const Feature feature : features.list()) names.push_back(to_string(feature));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace attncheck
