// The features of an attention case that an implementation may or may not support, each with the one name
// that statements of capabilities (a worker's `supports` line, `attncheck.Capabilities`), `fuzz --only /
// --without`, reports and the support matrix spell it (docs/CAPABILITIES.md lists them).
//
// Two kinds. A requirement is something the layer must compute for the case to mean anything (softcap, a
// partial RoPE): a case that uses one an implementation does not support is not run for it at all ("not
// stated"). A part is something that can be left out and the rest still judged: backward (grads/*), decode
// (decode/out), tensor-parallel (the per-rank gradients ranks/*, and kv-replication, the TP sizes above
// num_kv_heads), context-parallel (running the case's CP layout, which changes no expected tensor): a case
// using a part an implementation does not support is run without it, and those tensors are reported as
// declined (never passed).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

enum class Feature : std::uint8_t {
  // heads
  gqa,                // fewer KV heads than query heads (grouped-query, multi-query)
  explicit_head_dim,  // head_dim is not hidden_size / num_heads
  // RoPE
  rope_half_split,
  rope_interleaved,
  partial_rope,  // 0 < rotary_dim < head_dim
  no_rope,       // rotary_dim 0
  rope_scaling_linear,
  rope_scaling_llama3,
  rope_scaling_yarn,
  rope_scaling_longrope,
  // the score path
  qk_norm_rms,
  qk_norm_rms_one_plus,
  qk_norm_full_width,
  qkv_bias,
  out_bias,
  custom_scale,  // a softmax scale other than head_dim^-0.5 (query_pre_attn_scalar, attention_multiplier)
  softcap,
  sliding_window,
  sinks,
  causal,
  bidirectional,
  // inputs
  key_padding,       // some row has fewer keys than tokens
  keyless_rows,      // some query sees no key (its output is 0)
  position_offsets,  // some row's position ids start above 0
  position_gaps,     // position ids skip values within a row
  // parts
  backward,
  decode,
  tensor_parallel,
  kv_replication,
  context_parallel,
  // another kind of layer
  latent,
};

enum class FeatureKind { requirement, part };

struct FeatureInfo {
  Feature feature;
  std::string_view name;  // "explicit-head-dim"
  FeatureKind kind;
  std::string_view meaning;  // one line, for listings and messages
};

// Every feature, in declaration order (the order sets, listings and tallies use).
std::span<const FeatureInfo> all_features();
const FeatureInfo& info(Feature feature);
std::string_view to_string(Feature feature);
std::optional<Feature> parse_feature(std::string_view name);
// "gqa, explicit-head-dim, ..." of every feature: what an error about an unknown name suggests.
std::string feature_names();

// A set of features, iterated in declaration order.
class FeatureSet {
 public:
  FeatureSet() = default;
  FeatureSet(std::initializer_list<Feature> features);
  static FeatureSet all();
  static FeatureSet parts();

  bool contains(Feature feature) const { return (bits_ >> bit(feature)) & 1U; }
  void insert(Feature feature) { bits_ |= std::uint64_t{1} << bit(feature); }
  void erase(Feature feature) { bits_ &= ~(std::uint64_t{1} << bit(feature)); }
  bool empty() const { return bits_ == 0; }
  std::vector<Feature> list() const;
  // Those of this set that `other` lacks.
  FeatureSet minus(const FeatureSet& other) const { return from_bits(bits_ & ~other.bits_); }
  FeatureSet intersect(const FeatureSet& other) const { return from_bits(bits_ & other.bits_); }
  bool includes(const FeatureSet& other) const { return (other.bits_ & ~bits_) == 0; }
  friend bool operator==(const FeatureSet&, const FeatureSet&) = default;

 private:
  static unsigned bit(Feature feature) { return static_cast<unsigned>(feature); }
  static FeatureSet from_bits(std::uint64_t bits);
  std::uint64_t bits_ = 0;
};

// "softcap, qkv-bias" (declaration order), or "" for an empty set.
std::string to_string(const FeatureSet& features);

}  // namespace attncheck
