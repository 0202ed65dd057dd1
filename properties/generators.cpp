#include "properties/generators.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/errors/input_error.hpp"
#include "core/model/tp_plan.hpp"
#include "core/tp/tp_convention.hpp"
#include "properties/long_sequences.hpp"
#include "properties/shrinking_choice.hpp"
#include "properties/size_scaling.hpp"

namespace attncheck::properties {

namespace gen = rc::gen;
using rc::Gen;

std::string_view to_string(SizeProfile profile) {
  switch (profile) {
    case SizeProfile::long_sequences:
      return "long";
    case SizeProfile::latent_attention:
      return "latent";
    case SizeProfile::context_parallel:
      return "context-parallel";
    case SizeProfile::short_sequences:
      break;
  }
  return "short";
}

std::optional<SizeProfile> parse_size_profile(std::string_view text) {
  if (text == "short") return SizeProfile::short_sequences;
  if (text == "long") return SizeProfile::long_sequences;
  if (text == "latent") return SizeProfile::latent_attention;
  if (text == "context-parallel") return SizeProfile::context_parallel;
  return std::nullopt;
}

GenLimits GenLimits::for_profile(SizeProfile profile) {
  if (profile == SizeProfile::short_sequences) return {};
  if (profile == SizeProfile::latent_attention) return {.profile = SizeProfile::latent_attention};
  if (profile == SizeProfile::context_parallel) return {.profile = SizeProfile::context_parallel};
  return {.max_kv_heads = 2,
          .max_group = 2,
          .max_head_dim = 256,
          .max_hidden = 256,
          .max_batch = 2,
          .min_seq = 48,
          .max_seq = 4096,
          .profile = SizeProfile::long_sequences};
}

GenLimits GenLimits::scaled(double factor) const {
  const auto times = [factor](std::int64_t value, std::int64_t minimum) {
    return std::max(minimum, static_cast<std::int64_t>(static_cast<double>(value) * factor));
  };
  GenLimits limits = *this;
  limits.max_kv_heads = times(max_kv_heads, 1);
  limits.max_group = times(max_group, 1);
  limits.max_head_dim = times(max_head_dim, 2) / 2 * 2;
  limits.max_hidden = times(max_hidden, 2);
  limits.max_batch = times(max_batch, 1);
  limits.max_seq = times(max_seq, min_seq);
  return limits;
}

namespace {

bool features_allow_no_rope(const Capabilities& capabilities) {
  return capabilities.features.contains(Feature::no_rope);
}

}  // namespace

rc::Gen<std::optional<std::int64_t>> position_offsets(const Capabilities& capabilities) {
  if (!capabilities.features.contains(Feature::position_offsets)) return gen::just(std::optional<std::int64_t>(0));
  return weighted_one_of<std::optional<std::int64_t>>(
      {{2, gen::just(std::optional<std::int64_t>())},
       {2, gen::just(std::optional<std::int64_t>(0))},
       {1, gen::map(gen::inRange<std::int64_t>(0, 100001), [](std::int64_t o) { return std::optional<std::int64_t>(o); })}});
}

std::int64_t head_dim_step(const Capabilities& capabilities) {
  return std::lcm<std::int64_t>(2, capabilities.head_dim_multiple_of);
}

GenLimits GenLimits::within(const Capabilities& stated, const std::string& implementation) const {
  GenLimits limits = *this;
  limits.capabilities = stated;
  const auto lower = [](std::int64_t& bound, const std::optional<std::int64_t>& limit) {
    if (limit) bound = std::min(bound, *limit);
  };
  lower(limits.max_head_dim, stated.max_head_dim);
  lower(limits.max_hidden, stated.max_hidden_size);
  lower(limits.max_batch, stated.max_batch);
  lower(limits.max_seq, stated.max_seq);
  ViolationList violations;
  const std::string who = fmt::format("--impl {}", implementation);
  if (profile == SizeProfile::latent_attention && !stated.features.contains(Feature::latent)) {
    violations.add("--profile", "latent",
                   fmt::format("draws multi-head latent attention, which {} does not state", implementation),
                   "short or long");
  }
  if (profile == SizeProfile::latent_attention && stated.max_head_dim) {
    // A latent q/k head is a multiple of head_dim_multiple_of at most max_head_dim, and holds a RoPE pair unless
    // no-rope is stated.
    const std::int64_t widest = *stated.max_head_dim / stated.head_dim_multiple_of * stated.head_dim_multiple_of;
    if (widest < (features_allow_no_rope(stated) ? 1 : 2)) {
      violations.add(who, fmt::format("max_head_dim {}", *stated.max_head_dim),
                     fmt::format("must admit a latent head that is a multiple of {}{}", stated.head_dim_multiple_of,
                                 features_allow_no_rope(stated) ? "" : " and holds a RoPE pair"),
                     std::to_string(std::max<std::int64_t>(2, stated.head_dim_multiple_of)));
    }
  }
  if (profile == SizeProfile::context_parallel && !stated.features.contains(Feature::context_parallel)) {
    violations.add("--profile", "context-parallel",
                   fmt::format("draws context-parallel layouts, which {} does not state", implementation),
                   "short (the layout changes no expected tensor)");
  }
  if (profile != SizeProfile::latent_attention) {
    const std::int64_t step = head_dim_step(stated);
    if (stated.max_head_dim && *stated.max_head_dim < step) {
      violations.add(who, fmt::format("max_head_dim {}", *stated.max_head_dim),
                     fmt::format("must admit an even head_dim that is a multiple of {}", stated.head_dim_multiple_of),
                     std::to_string(step));
    }
    // A hidden_size that must equal the query width (no explicit-head-dim) needs room for one head of that step.
    if (stated.max_hidden_size && *stated.max_hidden_size < step) {
      violations.add(
          who, fmt::format("max_hidden_size {}", *stated.max_hidden_size),
          fmt::format("must admit one head of an even head_dim that is a multiple of {}", stated.head_dim_multiple_of),
          std::to_string(step));
    }
  }
  const FeatureSet& features = stated.features;
  if (!features.contains(Feature::causal) && !features.contains(Feature::bidirectional)) {
    violations.add(who, to_string(features), "must state causal or bidirectional: every case has a mask", "causal");
  }
  if (!features.contains(Feature::rope_half_split) && !features.contains(Feature::rope_interleaved) &&
      !features.contains(Feature::no_rope)) {
    violations.add(who, to_string(features),
                   "must state rope-half-split, rope-interleaved or no-rope: every case has a RoPE form",
                   "rope-half-split");
  }
  if (stated.max_seq && *stated.max_seq < min_seq) {
    violations.add(who, fmt::format("max_seq {}", *stated.max_seq),
                   fmt::format("must reach the {} profile's shortest sequence, {}", to_string(profile), min_seq),
                   profile == SizeProfile::long_sequences ? "--profile short" : std::to_string(min_seq));
  }
  violations.throw_if_any("no case to draw");
  return limits;
}

namespace {

// head_dim a multiple of step (even) in [step, max]: small ones most often (mask and RoPE bugs show at any
// width), any such width up to max sometimes (the fuzzer must reach 80, 96, 256, ...). Shrinks towards step.
Gen<std::int64_t> head_dims(std::int64_t max_head_dim, std::int64_t step) {
  const std::int64_t max_units = std::max<std::int64_t>(1, max_head_dim / step);
  return gen::map(
      weighted_one_of<std::int64_t>({{5, gen::inRange<std::int64_t>(1, std::min<std::int64_t>(8, max_units) + 1)},
                                     {3, gen::inRange<std::int64_t>(1, std::min<std::int64_t>(32, max_units) + 1)},
                                     {2, gen::inRange<std::int64_t>(1, max_units + 1)}}),
      [step](std::int64_t units) { return step * units; });
}

// What a statement allows, as the choices below ask it.
bool has(const Capabilities& capabilities, Feature feature) {
  return capabilities.features.contains(feature);
}

// A choice of weighted elements, less those whose feature is not stated (kept: no feature). With every
// feature stated, the list and so the draws are the ones the generators always made.
template <typename T>
Gen<T> allowed_elements(const Capabilities& capabilities,
                        std::initializer_list<std::tuple<std::size_t, T, std::optional<Feature>>> choices) {
  std::vector<std::pair<std::size_t, T>> kept;
  for (const auto& [weight, value, feature] : choices) {
    if (!feature || has(capabilities, *feature)) kept.emplace_back(weight, value);
  }
  return weighted_element(kept);
}

// gen, or none when the feature is not stated.
template <typename T>
Gen<std::optional<T>> if_stated(const Capabilities& capabilities, Feature feature, Gen<std::optional<T>> gen) {
  return has(capabilities, feature) ? std::move(gen) : gen::just(std::optional<T>());
}

Gen<bool> flag_if_stated(const Capabilities& capabilities, Feature feature, Gen<bool> gen) {
  return has(capabilities, feature) ? std::move(gen) : gen::just(false);
}

// Heads and widths cut to the statement's num_heads and hidden_size limits (a no-op without them): query
// heads kv * group at most max_num_heads; where hidden_size must be the query width (an omitted head_dim,
// or explicit-head-dim not stated), kv * group * head_dim at most max_hidden_size.
void fit_heads(const Capabilities& capabilities, bool hidden_is_query_width, std::int64_t step, std::int64_t& kv,
               std::int64_t& group, std::int64_t& head_dim) {
  if (const auto most = capabilities.max_num_heads) {
    kv = std::min(kv, *most);
    group = std::max<std::int64_t>(1, std::min(group, *most / kv));
  }
  if (const auto widest = capabilities.max_hidden_size; widest && hidden_is_query_width) {
    while (kv * group * step > *widest && group > 1) --group;
    while (kv * group * step > *widest && kv > 1) --kv;
    head_dim = std::min(head_dim, std::max(step, *widest / (kv * group) / step * step));
  }
}

// hidden_size for a query width: the same (the old assumption), smaller, larger, or anything.
Gen<std::int64_t> hidden_sizes(std::int64_t query_width, std::int64_t max_hidden) {
  return weighted_one_of<std::int64_t>({{2, gen::just(query_width)},
                                        {1, gen::just(std::max<std::int64_t>(1, query_width / 2))},
                                        {1, gen::just(std::min(2 * query_width, std::max(max_hidden, query_width)))},
                                        {4, gen::inRange<std::int64_t>(1, max_hidden + 1)}});
}

// How RoPE covers a head: 0 full (rotary_dim absent), 1 partial (an even rotary_dim), 2 none
// (rotary_dim 0), 3 half through rotary_pct 0.5 (the GPT-NeoX spelling), when that is even.
struct Rotary {
  int kind = 0;
  std::int64_t pairs = 0;
};

// Kinds without a stated form are not drawn: full and partial need a pairing, partial ones partial-rope,
// none no-rope (and without no-rope, a partial rotary_dim is never drawn as 0).
Gen<Rotary> rotaries(std::int64_t head_dim, const Capabilities& capabilities) {
  const bool pairing = has(capabilities, Feature::rope_half_split) || has(capabilities, Feature::rope_interleaved);
  const bool partial = pairing && has(capabilities, Feature::partial_rope);
  std::vector<std::pair<std::size_t, int>> kinds;
  if (pairing) kinds.emplace_back(5, 0);
  if (partial) kinds.emplace_back(3, 1);
  if (has(capabilities, Feature::no_rope)) kinds.emplace_back(1, 2);
  if (partial) kinds.emplace_back(1, 3);
  const std::int64_t fewest_pairs = has(capabilities, Feature::no_rope) ? 0 : 1;
  return gen::map(gen::tuple(weighted_element(kinds), gen::inRange<std::int64_t>(fewest_pairs, head_dim / 2 + 1)),
                  [](const std::tuple<int, std::int64_t>& t) {
                    return Rotary{std::get<0>(t), std::get<1>(t)};
                  });
}

void apply_rotary(const Rotary& rotary, std::int64_t head_dim, GeometrySpec& spec) {
  if (rotary.kind == 1) spec.rotary_dim = 2 * rotary.pairs;
  if (rotary.kind == 2) spec.rotary_dim = 0;
  if (rotary.kind == 3) {
    if (head_dim % 4 == 0) {
      spec.rotary_pct = 0.5;
    } else {
      spec.rotary_dim = 2 * rotary.pairs;
    }
  }
}

// Everything about a geometry that does not depend on its widths.
struct Features {
  Rotary rotary;
  RopeStyle rope_style = RopeStyle::half_split;
  QkNorm qk_norm = QkNorm::none;
  bool qkv_bias = false;
  bool out_bias = false;
  std::optional<double> query_pre_attn_scalar;
  std::optional<double> softcap;
  std::optional<std::int64_t> window;
  bool causal = true;
  double rope_theta = 10000.0;
};

// Sliding windows of the short profile: none, or 1 .. max_seq + 1 (a window longer than the sequence).
Gen<std::optional<std::int64_t>> short_windows(std::int64_t max_seq) {
  return weighted_one_of<std::optional<std::int64_t>>(
      {{3, gen::just(std::optional<std::int64_t>())},
       {1, gen::map(gen::inRange<std::int64_t>(1, max_seq + 2),
                    [](std::int64_t w) { return std::optional<std::int64_t>(w); })}});
}

// Either RoPE pairing, as stated (none stated: no-rope only, whose cases have no pairing to draw).
Gen<RopeStyle> rope_styles(const Capabilities& capabilities) {
  if (!has(capabilities, Feature::rope_half_split) && !has(capabilities, Feature::rope_interleaved)) {
    return gen::just(RopeStyle::half_split);
  }
  return allowed_elements<RopeStyle>(capabilities, {{1, RopeStyle::half_split, Feature::rope_half_split},
                                                    {1, RopeStyle::interleaved, Feature::rope_interleaved}});
}

// Causal (6 in 7) or not, as stated.
Gen<bool> causal_masks(const Capabilities& capabilities) {
  return allowed_elements<bool>(capabilities, {{6, true, Feature::causal}, {1, false, Feature::bidirectional}});
}

Gen<Features> features(std::int64_t head_dim, const Gen<std::optional<std::int64_t>>& windows,
                       const Capabilities& capabilities) {
  using enum Feature;
  return gen::map(gen::tuple(
                      rotaries(head_dim, capabilities), rope_styles(capabilities),
                      allowed_elements<QkNorm>(capabilities, {{3, QkNorm::none, std::nullopt},
                                                              {2, QkNorm::rms, qk_norm_rms},
                                                              {1, QkNorm::rms_one_plus, qk_norm_rms_one_plus}}),
                      flag_if_stated(capabilities, qkv_bias, gen::arbitrary<bool>()),
                      flag_if_stated(capabilities, out_bias, gen::arbitrary<bool>()),
                      if_stated(capabilities, custom_scale,
                                weighted_one_of<std::optional<double>>(
                                    {{4, gen::just(std::optional<double>())},
                                     {1, gen::map(element(2.0, 0.5),
                                                  [head_dim](double f) {
                                                    return std::optional<double>(f * static_cast<double>(head_dim));
                                                  })}})),
                      if_stated(
                          capabilities, softcap,
                          weighted_one_of<std::optional<double>>(
                              {{3, gen::just(std::optional<double>())},
                               {1, gen::map(element(5.0, 30.0), [](double c) { return std::optional<double>(c); })}})),
                      if_stated(capabilities, sliding_window, windows), causal_masks(capabilities),
                      element(10000.0, 1e6)),
                  [](const auto& t) {
                    return Features{.rotary = std::get<0>(t),
                                    .rope_style = std::get<1>(t),
                                    .qk_norm = std::get<2>(t),
                                    .qkv_bias = std::get<3>(t),
                                    .out_bias = std::get<4>(t),
                                    .query_pre_attn_scalar = std::get<5>(t),
                                    .softcap = std::get<6>(t),
                                    .window = std::get<7>(t),
                                    .causal = std::get<8>(t),
                                    .rope_theta = std::get<9>(t)};
                  });
}

GeometrySpec build_geometry(std::int64_t kv, std::int64_t group, std::int64_t head_dim, bool omit_head_dim,
                            std::int64_t hidden, const Features& f) {
  GeometrySpec spec{.hidden_size = hidden, .num_heads = kv * group, .num_kv_heads = kv};
  // An omitted head_dim is derived as hidden / num_heads, so hidden is the query width there.
  if (!omit_head_dim) spec.head_dim = head_dim;
  apply_rotary(f.rotary, head_dim, spec);
  spec.rope_theta = f.rope_theta;
  spec.rope_style = f.rope_style;
  spec.qk_norm = f.qk_norm;
  spec.qkv_bias = f.qkv_bias;
  spec.out_bias = f.out_bias;
  spec.query_pre_attn_scalar = f.query_pre_attn_scalar;
  spec.softcap = f.softcap;
  spec.sliding_window = f.window;
  spec.causal = f.causal;
  return spec;
}

// RoPE scaling, Granite's score multiplier, gpt-oss's attention sinks and OLMo-2's whole-width QK-norm on a
// built geometry: mostly none; otherwise
// each rope_type with parameters that bite at the generator's positions (pretraining lengths of 8 .. 4096 against
// positions up to ~1e6: llama3's band and yarn's ramp fall inside small rotary dims, longrope switches factors).
// longrope's factor lists are one per rotated pair, so this follows the rotary choice.
//
// Every optional field real configs carry is drawn in both forms, stated and left to be derived or
// defaulted, so that a framework that misreads either form meets it: yarn's attention_factor (stated as 1.0,
// the "no scaling" of Laguna-style configs, 1.2079 as OLMo-3 states it, or 0.8), its mscale / mscale_all_dim
// (none, both as DeepSeek states them, both 1, or mscale alone, which transformers ignores), beta_fast /
// beta_slow (defaults 32 / 1, or stated), truncate (true or false, gpt-oss's), and longrope's
// attention_factor (stated or derived from factor).
struct OptionalRopeFields {
  std::optional<double> attention_factor;
  int mscale_form = 0;  // 0 none, 1 (1.0, 0.707), 2 (1.0, 1.0), 3 mscale 1.0 alone
  std::optional<std::pair<double, double>> betas;
  bool truncate = true;
};

Gen<OptionalRopeFields> optional_rope_fields() {
  return gen::map(
      gen::tuple(weighted_one_of<std::optional<double>>(
                     {{2, gen::just(std::optional<double>())},
                      {1, gen::map(element(1.0, 1.2079, 0.8), [](double f) { return std::optional<double>(f); })}}),
                 weighted_element<int>({{3, 0}, {1, 1}, {1, 2}, {1, 3}}),
                 weighted_one_of<std::optional<std::pair<double, double>>>(
                     {{3, gen::just(std::optional<std::pair<double, double>>())},
                      {1, gen::map(element(std::pair{16.0, 2.0}, std::pair{64.0, 0.5}),
                                   [](std::pair<double, double> b) { return std::optional(b); })}}),
                 weighted_element<bool>({{3, true}, {1, false}})),
      [](const auto& t) {
        return OptionalRopeFields{.attention_factor = std::get<0>(t),
                                  .mscale_form = std::get<1>(t),
                                  .betas = std::get<2>(t),
                                  .truncate = std::get<3>(t)};
      });
}

Gen<GeometrySpec> with_scaling(const GeometrySpec& built, const Capabilities& capabilities) {
  using enum Feature;
  const Geometry resolved = resolve_geometry(built);
  const std::int64_t pairs = resolved.rotary_dim() / 2;
  using Parameters = std::tuple<double, std::int64_t, double, bool, std::vector<double>, std::vector<double>>;
  const Gen<Parameters> parameters =
      gen::tuple(element(2.0, 8.0, 32.0), element<std::int64_t>(8, 64, 4096), element(2.0, 4.0), gen::arbitrary<bool>(),
                 gen::container<std::vector<double>>(static_cast<std::size_t>(pairs), element(1.0, 1.05, 1.25)),
                 gen::container<std::vector<double>>(static_cast<std::size_t>(pairs), element(1.5, 4.0, 16.0, 40.0)));
  const Gen<RopeScalingType> types =
      pairs == 0
          ? gen::just(RopeScalingType::none)
          : allowed_elements<RopeScalingType>(capabilities, {{8, RopeScalingType::none, std::nullopt},
                                                             {1, RopeScalingType::linear, rope_scaling_linear},
                                                             {1, RopeScalingType::llama3, rope_scaling_llama3},
                                                             {1, RopeScalingType::yarn, rope_scaling_yarn},
                                                             {1, RopeScalingType::longrope, rope_scaling_longrope}});
  const Gen<std::optional<double>> multipliers =
      built.query_pre_attn_scalar || !has(capabilities, custom_scale)
          ? gen::just(std::optional<double>())
          : weighted_one_of<std::optional<double>>(
                {{6, gen::just(std::optional<double>())},
                 {1, gen::map(element(0.0078125, 0.25, 1.0), [](double m) { return std::optional<double>(m); })}});
  return gen::map(
      gen::tuple(types, parameters, multipliers,
                 flag_if_stated(capabilities, sinks, weighted_element<bool>({{5, false}, {1, true}})),
                 flag_if_stated(capabilities, qk_norm_full_width, weighted_element<bool>({{5, false}, {1, true}})),
                 optional_rope_fields()),
      [built](const auto& t) {
        GeometrySpec spec = built;
        spec.attention_sinks = std::get<3>(t);
        if (std::get<4>(t)) spec.qk_norm = QkNorm::rms_full_width;  // OLMo-2's norm over the whole width
        const auto& [factor, original, high_freq_factor, variant, short_factor, long_factor] = std::get<1>(t);
        RopeScaling& scaling = spec.rope_scaling;
        scaling.type = std::get<0>(t);
        switch (scaling.type) {
          case RopeScalingType::none:
            break;
          case RopeScalingType::linear:
            scaling.factor = factor;
            break;
          case RopeScalingType::llama3:
            scaling.factor = factor;
            scaling.low_freq_factor = 1.0;
            scaling.high_freq_factor = high_freq_factor;
            scaling.original_max_position_embeddings = original;
            break;
          case RopeScalingType::yarn: {
            const OptionalRopeFields& fields = std::get<5>(t);
            scaling.factor = factor;
            scaling.original_max_position_embeddings = original;
            scaling.attention_factor = fields.attention_factor;
            if (fields.mscale_form != 0) scaling.mscale = 1.0;
            if (fields.mscale_form == 1) scaling.mscale_all_dim = 0.707;
            if (fields.mscale_form == 2) scaling.mscale_all_dim = 1.0;
            if (fields.betas) {
              scaling.beta_fast = fields.betas->first;
              scaling.beta_slow = fields.betas->second;
            }
            scaling.truncate = fields.truncate;
            break;
          }
          case RopeScalingType::longrope:
            scaling.factor = variant ? 32.0 : 1.0;  // an attention factor of sqrt(1 + ln 32 / ln original), or 1
            scaling.original_max_position_embeddings = original;
            scaling.short_factor = short_factor;
            scaling.long_factor = long_factor;
            scaling.attention_factor = std::get<5>(t).attention_factor;  // stated, or derived from factor
            break;
        }
        spec.attention_multiplier = std::get<2>(t);
        return spec;
      });
}

Gen<GeometrySpec> geometries(const GenLimits& limits, int size) {
  const Capabilities& capabilities = limits.capabilities;
  const std::int64_t step = head_dim_step(capabilities);
  const std::int64_t max_kv = bound_at(size, 1, limits.max_kv_heads);
  // Without gqa a KV head per query head (the draw is still made, so that every other draw stays as it was).
  const std::int64_t max_group = has(capabilities, Feature::gqa) ? bound_at(size, 1, limits.max_group) : 1;
  const std::int64_t max_head_dim = std::max<std::int64_t>(2, bound_at(size, 2, limits.max_head_dim));
  const std::int64_t max_hidden = bound_at(size, 2, limits.max_hidden);
  const std::int64_t max_seq = bound_at(size, limits.min_seq, limits.max_seq);
  const bool long_profile = limits.profile == SizeProfile::long_sequences;
  const Gen<std::optional<std::int64_t>> windows =
      long_profile ? long_sequences::windows(max_seq) : short_windows(max_seq);
  return gen::mapcat(
      gen::tuple(gen::inRange<std::int64_t>(1, max_kv + 1), gen::inRange<std::int64_t>(1, max_group + 1),
                 long_profile ? long_sequences::head_dims(max_head_dim, step) : head_dims(max_head_dim, step),
                 weighted_element<bool>({{5, false}, {1, true}})),
      [=](const std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>& heads) {
        auto [kv, group, head_dim, omit_head_dim] = heads;
        // Without explicit-head-dim, hidden_size is the query width: head_dim is hidden / num_heads.
        const bool hidden_is_query_width = omit_head_dim || !has(capabilities, Feature::explicit_head_dim);
        fit_heads(capabilities, hidden_is_query_width, step, kv, group, head_dim);
        const std::int64_t query_width = kv * group * head_dim;
        Gen<std::int64_t> hidden =
            hidden_is_query_width ? gen::just(query_width) : hidden_sizes(query_width, max_hidden);
        if (const auto widest = capabilities.max_hidden_size; widest && !hidden_is_query_width) {
          hidden = gen::map(hidden, [widest = *widest](std::int64_t h) { return std::min(h, widest); });
        }
        const auto build = [=](const std::tuple<std::int64_t, Features>& rest) {
          return build_geometry(kv, group, head_dim, omit_head_dim, std::get<0>(rest), std::get<1>(rest));
        };
        const auto widths_and_features = gen::tuple(hidden, features(head_dim, windows, capabilities));
        // The long profile hunts kernel bugs past the first key tile, which RoPE scaling does not touch:
        // drawn as before, its case sequence (and the long mutants' kill times) stay as they were.
        if (long_profile) return gen::map(widths_and_features, build);
        return gen::mapcat(widths_and_features, [=](const std::tuple<std::int64_t, Features>& rest) {
          return with_scaling(build(rest), capabilities);
        });
      });
}

// A decode schedule for seq tokens from shrinkable codes: prefill 1 .. seq - 1, then steps of 1 .. 3
// tokens while tokens remain (all of them decoded when the codes allow).
DecodeSchedule schedule_from(std::int64_t seq, std::int64_t prefill_code, const std::vector<std::int64_t>& step_codes) {
  DecodeSchedule schedule{.prefill = 1 + prefill_code % (seq - 1), .steps = {}};
  std::int64_t remaining = seq - schedule.prefill;
  for (const std::int64_t code : step_codes) {
    if (remaining == 0) break;
    const std::int64_t step = 1 + code % std::min<std::int64_t>(remaining, 3);
    schedule.steps.push_back(step);
    remaining -= step;
  }
  if (schedule.steps.empty()) schedule.steps.push_back(1);
  return schedule;
}

Gen<InputOptions> input_options(const GeometrySpec& geometry, std::int64_t tp_size, const GenLimits& limits, int size) {
  const Capabilities& capabilities = limits.capabilities;
  const std::int64_t max_batch = bound_at(size, 1, limits.max_batch);
  const std::int64_t max_seq = bound_at(size, 3, limits.max_seq);
  const std::int64_t kv = geometry.num_kv_heads.value_or(geometry.num_heads);
  const std::int64_t head_dim = resolve_geometry(geometry).head_dim();
  // Degenerate equalities on purpose: batch == num_kv_heads, seq == head_dim (an index mixed up between
  // them is invisible otherwise... and visible only then).
  const Gen<std::int64_t> batch = weighted_one_of<std::int64_t>(
      {{4, gen::inRange<std::int64_t>(1, max_batch + 1)}, {1, gen::just(std::min(kv, max_batch))}});
  const Gen<std::int64_t> seq =
      weighted_one_of<std::int64_t>({{6, gen::inRange<std::int64_t>(3, max_seq + 1)},
                                     {1, gen::just(std::clamp<std::int64_t>(head_dim, 3, max_seq))}});
  const Gen<std::optional<std::int64_t>> offset = position_offsets(capabilities);
  using DecodeCodes = std::tuple<std::int64_t, std::vector<std::int64_t>>;
  // KV-cache decoding is causal by nature (validate_case refuses it otherwise).
  const Gen<std::optional<DecodeCodes>> decode = if_stated(
      capabilities, Feature::decode,
      weighted_one_of<std::optional<DecodeCodes>>(
          {{1, gen::just(std::optional<DecodeCodes>())},
           {1, gen::map(gen::tuple(gen::inRange<std::int64_t>(0, 64),
                                   gen::container<std::vector<std::int64_t>>(gen::inRange<std::int64_t>(0, 64))),
                        [](const DecodeCodes& codes) { return std::optional<DecodeCodes>(codes); })}}));
  const bool every_query_sees_a_key = !has(capabilities, Feature::keyless_rows);
  return gen::map(
      gen::tuple(gen::noShrink(gen::arbitrary<std::uint64_t>()), batch, seq,
                 element(ActivationDistribution::uniform, ActivationDistribution::heavy_tailed,
                         ActivationDistribution::outliers),
                 offset,
                 flag_if_stated(capabilities, Feature::position_gaps, weighted_element<bool>({{2, false}, {1, true}})),
                 flag_if_stated(capabilities, Feature::key_padding, gen::arbitrary<bool>()), decode),
      [tp_size, causal = geometry.causal, every_query_sees_a_key](const auto& t) {
        InputOptions options{.seed = std::get<0>(t),
                             .batch = std::get<1>(t),
                             .seq = std::get<2>(t),
                             .activations = std::get<3>(t),
                             .position_offset = std::get<4>(t),
                             .position_gaps = std::get<5>(t),
                             .pad_keys = std::get<6>(t),
                             .every_query_sees_a_key = every_query_sees_a_key,
                             .decode = {},
                             .tp_size = tp_size};
        if (const auto& codes = std::get<7>(t); codes && causal) {
          options.decode = schedule_from(options.seq, std::get<0>(*codes), std::get<1>(*codes));
        }
        return options;
      });
}

// The TP sizes to draw for a geometry: the valid ones, 1 first (shrinking goes there), P > H_kv replicating KV
// heads; of those the statement runs: 1 alone without tensor-parallel (an unsharded layer is judged on the
// full tensors, which TP does not change), at most max_tp_size, none above num_kv_heads without
// kv-replication, and only plans its tp_convention can partition.
std::vector<std::int64_t> stated_tp_sizes(const GeometrySpec& spec, const Capabilities& capabilities) {
  const Geometry geometry = resolve_geometry(spec);
  std::vector<std::int64_t> sizes = valid_tp_sizes(geometry);
  // Per-rank gradients need both parts: a plan it would not run per rank is drawn as TP 1.
  if (!has(capabilities, Feature::tensor_parallel) || !has(capabilities, Feature::backward)) return {1};
  std::erase_if(sizes, [&](std::int64_t size) {
    if (size == 1) return false;
    if (capabilities.max_tp_size && size > *capabilities.max_tp_size) return true;
    if (size > geometry.num_kv_heads() && !has(capabilities, Feature::kv_replication)) return true;
    return capabilities.tp_convention &&
           !partition_problem(make_tp_plan(geometry, size), *capabilities.tp_convention).empty();
  });
  return sizes;
}

}  // namespace

rc::Gen<CaseSpec> case_specs(const GenLimits& limits) {
  if (limits.profile == SizeProfile::latent_attention) return latent_case_specs(limits);
  if (limits.profile == SizeProfile::context_parallel) return context_parallel_case_specs(limits);
  return gen::withSize([limits](int size) {
    return gen::mapcat(geometries(limits, size), [limits, size](const GeometrySpec& geometry) {
      const std::vector<std::int64_t> tp_sizes = stated_tp_sizes(geometry, limits.capabilities);
      return gen::mapcat(element_of(tp_sizes), [geometry, limits, size](std::int64_t tp_size) {
        const Gen<InputOptions> input_generator = limits.profile == SizeProfile::long_sequences
                                                      ? long_sequences::input_options(geometry, tp_size, limits, size)
                                                      : input_options(geometry, tp_size, limits, size);
        return gen::map(input_generator, [geometry](const InputOptions& inputs) {
          return CaseSpec{.geometry = geometry, .inputs = inputs};
        });
      });
    });
  });
}


namespace {

Gen<GeometrySpec> latent_geometries(const Capabilities& capabilities) {
  const Gen<std::optional<std::int64_t>> q_lora_rank = weighted_one_of<std::optional<std::int64_t>>(
      {{1, gen::just(std::optional<std::int64_t>())},
       {2, gen::map(gen::inRange<std::int64_t>(1, 9), [](std::int64_t r) { return std::optional<std::int64_t>(r); })}});
  // YaRN as DeepSeek-V3 states it (factor 40, original 4096, betas 32 and 1), its mscale and mscale_all_dim each
  // absent, 0.707 or 1 (drawn apart: an equal pair makes RoPE's attention factor 1, hiding a layer that swaps
  // them or drops one), and one case in four with a stated attention_factor (1, OLMo-3's 1.2079, or 0.8), which
  // replaces the mscale ratio on RoPE but not mscale_all_dim's factor on the softmax scale.
  using OptionalNumber = std::optional<double>;
  const Gen<OptionalNumber> mscales = gen::element(OptionalNumber(), OptionalNumber(0.707), OptionalNumber(1.0));
  const Gen<OptionalNumber> attention_factors = weighted_one_of<OptionalNumber>(
      {{3, gen::just(OptionalNumber())},
       {1, gen::element(OptionalNumber(1.0), OptionalNumber(1.2079), OptionalNumber(0.8))}});
  const Gen<RopeScaling> scaling =
      !has(capabilities, Feature::rope_scaling_yarn)
          ? gen::just(RopeScaling{})
          : weighted_one_of<RopeScaling>(
                {{2, gen::just(RopeScaling{})},
                 {1, gen::map(gen::tuple(mscales, mscales, attention_factors), [](const auto& drawn) {
                    const auto& [mscale, mscale_all_dim, attention_factor] = drawn;
                    return RopeScaling{.type = RopeScalingType::yarn,
                                       .factor = 40.0,
                                       .original_max_position_embeddings = 4096,
                                       .beta_fast = 32.0,
                                       .beta_slow = 1.0,
                                       .mscale = mscale,
                                       .mscale_all_dim = mscale_all_dim,
                                       .attention_factor = attention_factor};
                  })}});
  const Gen<std::optional<double>> softcap =
      if_stated(capabilities, Feature::softcap,
                weighted_one_of<std::optional<double>>(
                    {{3, gen::just(std::optional<double>())}, {1, gen::just(std::optional<double>(2.0))}}));
  const Gen<std::optional<std::int64_t>> window = if_stated(
      capabilities, Feature::sliding_window,
      weighted_one_of<std::optional<std::int64_t>>({{3, gen::just(std::optional<std::int64_t>())},
                                                    {1, gen::map(gen::inRange<std::int64_t>(1, 6), [](std::int64_t w) {
                                                       return std::optional<std::int64_t>(w);
                                                     })}}));
  // The RoPE part's pairs: none only with no-rope, some only with a pairing.
  const bool pairing = has(capabilities, Feature::rope_half_split) || has(capabilities, Feature::rope_interleaved);
  const Gen<std::int64_t> rope_pair_counts = !pairing                              ? gen::just(std::int64_t{0})
                                             : has(capabilities, Feature::no_rope) ? gen::inRange<std::int64_t>(0, 5)
                                                                                   : gen::inRange<std::int64_t>(1, 5);
  const Gen<RopeStyle> styles = !has(capabilities, Feature::rope_interleaved) ? gen::just(RopeStyle::half_split)
                                : !has(capabilities, Feature::rope_half_split)
                                    ? gen::just(RopeStyle::interleaved)
                                    : gen::element(RopeStyle::interleaved, RopeStyle::half_split);
  const bool causal = has(capabilities, Feature::causal);
  const std::int64_t multiple = capabilities.head_dim_multiple_of;
  // The statement's limits, applied to what is drawn (without them, these are no-ops): head widths at most the
  // widest multiple of `multiple` it allows, heads and hidden_size at most its maxima.
  constexpr std::int64_t kUnlimited = std::int64_t{1} << 30;
  const std::int64_t widest = capabilities.max_head_dim ? *capabilities.max_head_dim / multiple * multiple : kUnlimited;
  const std::int64_t most_heads = capabilities.max_num_heads.value_or(kUnlimited);
  const std::int64_t widest_hidden = capabilities.max_hidden_size.value_or(kUnlimited);
  return gen::map(
      gen::tuple(gen::inRange<std::int64_t>(1, 5), gen::inRange<std::int64_t>(1, 17), q_lora_rank,
                 gen::inRange<std::int64_t>(1, 9), gen::inRange<std::int64_t>(0, 9), rope_pair_counts,
                 gen::inRange<std::int64_t>(1, 9), styles, scaling, softcap, window,
                 flag_if_stated(capabilities, Feature::sinks, weighted_element<bool>({{3, false}, {1, true}}))),
      [causal, multiple, widest, most_heads, widest_hidden](const auto& t) {
        const auto& [heads, hidden, q_lora, kv_lora, nope, drawn_pairs, v_dim, style, rope_scaling, cap, slide, sinks] =
            t;
        GeometrySpec spec{.hidden_size = std::min(hidden, widest_hidden), .num_heads = std::min(heads, most_heads)};
        spec.causal = causal;
        spec.rope_style = style;
        spec.rope_scaling = rope_scaling;
        spec.softcap = cap;
        spec.sliding_window = slide;
        spec.attention_sinks = sinks;
        // A q/k head needs a channel: with no RoPE part, at least one no-RoPE channel. Under a head_dim multiple,
        // the no-RoPE part and the value heads grow to the next width it allows, and under a maximum they are cut to
        // the widest (the RoPE part first keeping the pair it needs, GenLimits::within checks one fits).
        const auto rounded_up = [multiple](std::int64_t width) { return (width + multiple - 1) / multiple * multiple; };
        const std::int64_t qk_width =
            std::min(rounded_up((drawn_pairs == 0 ? std::max<std::int64_t>(nope, 1) : nope) + 2 * drawn_pairs), widest);
        const std::int64_t rope_pairs = std::min(drawn_pairs, qk_width / 2);  // >= 1 whenever no-rope is not stated
        const std::int64_t nope_dim = qk_width - 2 * rope_pairs;
        spec.latent = LatentAttentionSpec{.q_lora_rank = q_lora,
                                          .kv_lora_rank = kv_lora,
                                          .qk_nope_head_dim = nope_dim,
                                          .qk_rope_head_dim = 2 * rope_pairs,
                                          .v_head_dim = std::min(rounded_up(v_dim), widest)};
        return spec;
      });
}

}  // namespace

namespace {

// Latent layers at the short profile's sizes, within the statement (no layout).
Gen<CaseSpec> latent_layers(const GenLimits& latent_limits) {
  GenLimits limits = latent_limits;  // the short profile's sizes and the statement
  limits.profile = SizeProfile::short_sequences;
  return gen::withSize([limits](int size) {
    return gen::mapcat(latent_geometries(limits.capabilities), [limits, size](const GeometrySpec& geometry) {
      const std::vector<std::int64_t> tp_sizes = stated_tp_sizes(geometry, limits.capabilities);
      return gen::mapcat(element_of(tp_sizes), [geometry, limits, size](std::int64_t tp_size) {
        return gen::map(input_options(geometry, tp_size, limits, size), [geometry](const InputOptions& inputs) {
          return CaseSpec{.geometry = geometry, .inputs = inputs};
        });
      });
    });
  });
}

// Logits of order 10^2, as attention-logit growth gives (the reason QK-norm exists): a softmax scale of 100.
// Beyond fp32's exp range (88.7), where a ring merge that does not shift by the larger log-sum-exp overflows in
// fp32 code (mutant-cp-ring-lse-merge-without-max-shift). One case in four; shrinking drops it. Not larger, and
// only over uniform activations: in a saturated softmax the fp64 rounding of the backward grows with the scale
// (scale 1000, or outlier channels x 32, took two correct fp64 orders, reference-cp and reference-tp, past the
// fp64 contract's 2^16 ulps: 0.7-4e5 ulps in 3 of 8 x 300 cases).
Gen<GeometrySpec> with_logit_scale(const GeometrySpec& geometry, ActivationDistribution activations,
                                   const Capabilities& capabilities) {
  return gen::map(flag_if_stated(capabilities, Feature::custom_scale, weighted_element<bool>({{3, false}, {1, true}})),
                  [geometry, activations](bool large) {
                    GeometrySpec spec = geometry;
                    if (large && activations == ActivationDistribution::uniform) {
                      spec.query_pre_attn_scalar.reset();
                      spec.attention_multiplier = 100.0;
                    }
                    return spec;
                  });
}

// A context-parallel layout over the drawn case's TP plan: the scheme, CP size (above 1 wherever the heads or the
// ring admit it) and the ring's chunking. Where Ulysses admits only CP 1 (one query head per TP rank: it splits
// heads) the ring is drawn nine times in ten: otherwise a third of the cases were Ulysses over one rank, no
// parallelism at all; the rest keep that degenerate layout a small share. A latent layer gets no logit scale
// (its softmax scale is its own: qk_head_dim^-0.5 and yarn's mscale).
Gen<CaseSpec> with_cp_layout(const CaseSpec& drawn_spec, const Capabilities& capabilities) {
  const Gen<GeometrySpec> geometries =
      drawn_spec.geometry.latent ? gen::just(drawn_spec.geometry)
                                 : with_logit_scale(drawn_spec.geometry, drawn_spec.inputs.activations, capabilities);
  return gen::mapcat(
      gen::tuple(gen::element(CpScheme::ring, CpScheme::ulysses), weighted_element<bool>({{9, true}, {1, false}}),
                 geometries),
      [drawn_spec](const auto& drawn) {
        const auto& [drawn_scheme, prefer_parallel, geometry] = drawn;
        CaseSpec spec = drawn_spec;
        spec.geometry = geometry;
        const TpPlan plan = make_tp_plan(resolve_geometry(spec.geometry), spec.inputs.tp_size);
        const auto sizes_of = [&plan](CpScheme scheme) {
          std::vector<std::int64_t> sizes = valid_cp_sizes(plan, scheme, 8);
          if (sizes.size() > 1) sizes.erase(sizes.begin());  // CP 1 only where nothing else is valid
          return sizes;
        };
        CpScheme scheme = drawn_scheme;
        if (scheme == CpScheme::ulysses && sizes_of(scheme) == std::vector<std::int64_t>{1} && prefer_parallel) {
          scheme = CpScheme::ring;
        }
        return gen::map(gen::pair(element_of(sizes_of(scheme)), gen::arbitrary<bool>()),
                        [spec, scheme](const auto& cp) {
                          CaseSpec with_layout = spec;
                          with_layout.inputs.context_parallel =
                              CpSpec{.cp_size = cp.first, .scheme = scheme, .load_balanced = cp.second};
                          return with_layout;
                        });
      });
}

}  // namespace

rc::Gen<CaseSpec> context_parallel_case_specs(const GenLimits& context_parallel_limits) {
  GenLimits limits = context_parallel_limits;  // the short profile's cases, then a layout
  limits.profile = SizeProfile::short_sequences;
  const Capabilities capabilities = limits.capabilities;
  // A statement with latent attention gets latent layers too, one case in four (a CP bug in latent decoding is
  // otherwise out of reach).
  const Gen<CaseSpec> drawn = has(capabilities, Feature::latent)
                                  ? weighted_one_of<CaseSpec>({{3, case_specs(limits)}, {1, latent_case_specs(limits)}})
                                  : case_specs(limits);
  return gen::mapcat(drawn, [capabilities](const CaseSpec& spec) { return with_cp_layout(spec, capabilities); });
}

rc::Gen<CaseSpec> latent_case_specs(const GenLimits& latent_limits) {
  // The latent profile for a statement with context parallelism: one case in four under a layout.
  if (!has(latent_limits.capabilities, Feature::context_parallel)) return latent_layers(latent_limits);
  const Capabilities capabilities = latent_limits.capabilities;
  return gen::mapcat(weighted_element<bool>({{3, false}, {1, true}}), [latent_limits, capabilities](bool layout) {
    return layout ? gen::mapcat(latent_layers(latent_limits),
                                [capabilities](const CaseSpec& spec) { return with_cp_layout(spec, capabilities); })
                  : latent_layers(latent_limits);
  });
}

}  // namespace attncheck::properties
