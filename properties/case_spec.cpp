#include "properties/case_spec.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace attncheck::properties {

bool operator==(const CaseSpec& a, const CaseSpec& b) {
  // InputOptions has no operator== of its own (core/generation): its fields one by one.
  const InputOptions& x = a.inputs;
  const InputOptions& y = b.inputs;
  return a.geometry == b.geometry && x.seed == y.seed && x.batch == y.batch && x.seq == y.seq &&
         x.activations == y.activations && x.position_offset == y.position_offset &&
         x.position_gaps == y.position_gaps && x.pad_keys == y.pad_keys && x.key_lengths == y.key_lengths &&
         x.every_query_sees_a_key == y.every_query_sees_a_key && x.decode == y.decode && x.tp_size == y.tp_size &&
         x.context_parallel == y.context_parallel;
}

Case make_case(const CaseSpec& spec) {
  return generate_case(resolve_geometry(spec.geometry), spec.inputs);
}

std::string describe(const CaseSpec& spec) {
  const GeometrySpec& g = spec.geometry;
  const InputOptions& in = spec.inputs;
  const std::int64_t kv = g.num_kv_heads.value_or(g.num_heads);
  std::string text;
  if (const auto& latent = g.latent) {
    text = fmt::format("latent attention: heads {}, q/k {} + {} rope, v {}, q_lora_rank {}, kv_lora_rank {}, hidden {}, {}",
                       g.num_heads, latent->qk_nope_head_dim, latent->qk_rope_head_dim, latent->v_head_dim,
                       latent->q_lora_rank ? std::to_string(*latent->q_lora_rank) : "none", latent->kv_lora_rank,
                       g.hidden_size, to_string(g.rope_style));
  } else {
    text = fmt::format("heads {}/{}, head_dim {}, hidden {}, rotary {} {}", g.num_heads, kv,
                                 g.head_dim ? std::to_string(*g.head_dim) : "omitted", g.hidden_size,
                                 g.rotary_dim   ? std::to_string(*g.rotary_dim)
                                 : g.rotary_pct ? fmt::format("pct {}", *g.rotary_pct)
                                                : "full",
                                 to_string(g.rope_style));
  }
  if (g.rope_theta != 10000.0) text += fmt::format(", theta {}", g.rope_theta);  // a base-10000 bug shows only then
  if (g.qk_norm != QkNorm::none) text += fmt::format(", qk_norm {}", to_string(g.qk_norm));
  if (g.qkv_bias || g.out_bias) text += fmt::format(", bias {}/{}", g.qkv_bias, g.out_bias);
  if (g.query_pre_attn_scalar) text += fmt::format(", query_pre_attn_scalar {}", *g.query_pre_attn_scalar);
  if (g.attention_multiplier) text += fmt::format(", attention_multiplier {}", *g.attention_multiplier);
  if (const RopeScaling& scaling = g.rope_scaling; scaling.type != RopeScalingType::none) {
    text += fmt::format(", {} RoPE scaling", to_string(scaling.type));
    if (scaling.factor) text += fmt::format(" factor {}", *scaling.factor);
    if (scaling.original_max_position_embeddings)
      text += fmt::format(" original {}", *scaling.original_max_position_embeddings);
    if (scaling.attention_factor) text += fmt::format(" attention_factor {} (stated)", *scaling.attention_factor);
    if (scaling.mscale) text += fmt::format(" mscale {}", *scaling.mscale);
    if (scaling.mscale_all_dim) text += fmt::format(" mscale_all_dim {}", *scaling.mscale_all_dim);
    if (scaling.beta_fast) text += fmt::format(" beta_fast {}", *scaling.beta_fast);
    if (scaling.beta_slow) text += fmt::format(" beta_slow {}", *scaling.beta_slow);
    if (!scaling.truncate) text += " truncate false";
  }
  if (g.softcap) text += fmt::format(", softcap {}", *g.softcap);
  if (g.attention_sinks) text += ", attention sinks";
  if (g.sliding_window) text += fmt::format(", window {}", *g.sliding_window);
  if (!g.causal) text += ", not causal";
  text += fmt::format("; tp {}", in.tp_size);
  if (const auto& cp = in.context_parallel) {
    text += fmt::format(", cp {} {}{}", cp->cp_size, to_string(cp->scheme),
                        cp->scheme == CpScheme::ring ? (cp->load_balanced ? " load-balanced" : " contiguous") : "");
  }
  text += fmt::format("; batch {}, seq {}, {}", in.batch, in.seq, to_string(in.activations));
  if (in.position_offset) text += fmt::format(", positions from {}", *in.position_offset);
  if (in.position_gaps) text += ", position gaps";
  if (in.pad_keys) text += ", padded keys";
  if (!in.key_lengths.empty()) text += fmt::format(", key lengths [{}]", fmt::join(in.key_lengths, ", "));
  if (in.every_query_sees_a_key && (in.pad_keys || !in.key_lengths.empty())) text += ", every query sees a key";
  if (!in.decode.empty()) {
    text += fmt::format(", decode {}", in.decode.prefill);
    for (const std::int64_t step : in.decode.steps) text += fmt::format("+{}", step);
  }
  text += fmt::format(", seed {}", in.seed);
  return text;
}

std::int64_t work(const CaseSpec& spec) {
  const Geometry geometry = resolve_geometry(spec.geometry);
  const std::int64_t tokens = spec.inputs.batch * spec.inputs.seq;
  const std::int64_t projections =
      tokens * geometry.hidden_size() * (2 * geometry.query_width() + 2 * geometry.kv_width());
  const std::int64_t attention =
      2 * spec.inputs.batch * geometry.num_heads() * spec.inputs.seq * spec.inputs.seq * geometry.head_dim();
  return projections + attention;
}

void showValue(const CaseSpec& spec, std::ostream& os) {
  os << describe(spec);
}

}  // namespace attncheck::properties
