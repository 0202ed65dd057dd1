#include "core/model/geometry.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/errors/input_error.hpp"
#include "core/errors/nearby.hpp"
#include "core/model/rope_frequencies.hpp"

namespace attncheck {

std::string_view to_string(RopeStyle style) {
  return style == RopeStyle::half_split ? "half-split" : "interleaved";
}

std::string_view to_string(QkNorm norm) {
  switch (norm) {
    case QkNorm::none:
      return "none";
    case QkNorm::rms:
      return "rms";
    case QkNorm::rms_one_plus:
      return "rms-one-plus";
    case QkNorm::rms_full_width:
      return "rms-full-width";
  }
  return "none";
}

std::string_view to_string(HeadDimSource source) {
  return source == HeadDimSource::explicit_value ? "explicit" : "derived";
}

std::string_view to_string(ScaleSource source) {
  switch (source) {
    case ScaleSource::head_dim:
      return "head_dim";
    case ScaleSource::query_pre_attn_scalar:
      return "query_pre_attn_scalar";
    case ScaleSource::attention_multiplier:
      return "attention_multiplier";
    case ScaleSource::latent_qk_head_dim:
      return "latent_qk_head_dim";
  }
  return "head_dim";
}

std::string_view to_string(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::none:
      return "none";
    case RopeScalingType::linear:
      return "linear";
    case RopeScalingType::llama3:
      return "llama3";
    case RopeScalingType::yarn:
      return "yarn";
    case RopeScalingType::longrope:
      return "longrope";
  }
  return "none";
}

std::optional<RopeScalingType> parse_rope_scaling_type(std::string_view text) {
  for (RopeScalingType type : {RopeScalingType::none, RopeScalingType::linear, RopeScalingType::llama3,
                               RopeScalingType::yarn, RopeScalingType::longrope}) {
    if (text == to_string(type)) return type;
  }
  return std::nullopt;
}

std::optional<RopeStyle> parse_rope_style(std::string_view text) {
  if (text == "half-split") return RopeStyle::half_split;
  if (text == "interleaved") return RopeStyle::interleaved;
  return std::nullopt;
}

std::optional<QkNorm> parse_qk_norm(std::string_view text) {
  if (text == "none") return QkNorm::none;
  if (text == "rms") return QkNorm::rms;
  if (text == "rms-one-plus") return QkNorm::rms_one_plus;
  if (text == "rms-full-width") return QkNorm::rms_full_width;
  return std::nullopt;
}

std::optional<HeadDimResolution> resolve_head_dim(const GeometrySpec& spec, ViolationList& violations) {
  const bool divides = spec.hidden_size % spec.num_heads == 0;
  const std::optional<std::int64_t> quotient =
      divides ? std::optional(spec.hidden_size / spec.num_heads) : std::nullopt;
  // Latent attention states its q/k head width as two parts (resolve_geometry refuses a head_dim beside them).
  if (spec.latent) return HeadDimResolution{spec.latent->qk_head_dim(), HeadDimSource::explicit_value, quotient};
  if (spec.head_dim) return HeadDimResolution{*spec.head_dim, HeadDimSource::explicit_value, quotient};
  if (quotient) return HeadDimResolution{*quotient, HeadDimSource::derived, quotient};
  violations.add("head_dim", "absent",
                 fmt::format("an omitted head_dim is derived as hidden_size / num_heads, so hidden_size ({}) must "
                             "be divisible by num_heads ({})",
                             spec.hidden_size, spec.num_heads),
                 fmt::format("nearby valid: set head_dim explicitly, or {}, or {}",
                             alternatives("hidden_size", nearest_multiples(spec.num_heads, spec.hidden_size)),
                             alternatives("num_heads", nearest_divisors(spec.hidden_size, spec.num_heads))));
  return std::nullopt;
}

namespace {

// Checks 1 <= value <= max; returns whether it holds.
bool check_count(ViolationList& violations, const char* field, std::int64_t value, std::int64_t max) {
  if (value >= 1 && value <= max) return true;
  violations.add(field, std::to_string(value), fmt::format("must be an integer in [1, {}]", max),
                 fmt::format("nearby valid: {} = {}", field, value < 1 ? 1 : max));
  return false;
}

void check_positive_finite(ViolationList& violations, const char* field, std::optional<double> value,
                           const char* suggestion) {
  if (!value || (std::isfinite(*value) && *value > 0)) return;
  violations.add(field, format_number(*value), "must be a finite number > 0", suggestion);
}

// rotary_dim from rotary_pct / rotary_dim (absent both: the whole head rotates). Adds violations and
// returns nullopt when the rotary settings are invalid for this head_dim.
std::optional<std::int64_t> resolve_rotary_dim(const GeometrySpec& spec, std::int64_t head_dim,
                                               ViolationList& violations) {
  std::optional<std::int64_t> from_pct;
  if (spec.rotary_pct) {
    const double pct = *spec.rotary_pct;
    if (!std::isfinite(pct) || pct < 0.0 || pct > 1.0) {
      violations.add("rotary_pct", format_number(pct), "must be a fraction in [0, 1]",
                     "nearby valid: rotary_pct = 1 (whole head) or 0.25 (GPT-NeoX-20B)");
      return std::nullopt;
    }
    // Truncation, as GPT-NeoX and transformers compute int(head_dim * rotary_pct).
    from_pct = static_cast<std::int64_t>(static_cast<double>(head_dim) * pct);
  }
  if (spec.rotary_dim && *spec.rotary_dim < 0) {
    violations.add("rotary_dim", std::to_string(*spec.rotary_dim), "must be >= 0",
                   fmt::format("nearby valid: rotary_dim = 0 (no RoPE) or {} (whole head)", head_dim));
    return std::nullopt;
  }
  if (spec.rotary_dim && from_pct && *spec.rotary_dim != *from_pct) {
    violations.add("rotary_dim", std::to_string(*spec.rotary_dim),
                   fmt::format("must agree with rotary_pct {} (int({} * {}) = {}) when both are given",
                               format_number(*spec.rotary_pct), head_dim, format_number(*spec.rotary_pct), *from_pct),
                   "give only one of rotary_dim and rotary_pct");
    return std::nullopt;
  }
  const std::int64_t rotary_dim = spec.rotary_dim ? *spec.rotary_dim : from_pct.value_or(head_dim);
  const char* field = spec.rotary_dim ? "rotary_dim" : (spec.rotary_pct ? "rotary_pct" : "head_dim");
  const std::string value = spec.rotary_dim || !spec.rotary_pct
                                ? std::to_string(spec.rotary_dim.value_or(head_dim))
                                : fmt::format("{} (rotary_dim {})", format_number(*spec.rotary_pct), rotary_dim);
  if (rotary_dim > head_dim) {
    violations.add(field, value, fmt::format("rotary_dim ({}) must be <= head_dim ({})", rotary_dim, head_dim),
                   fmt::format("nearby valid: rotary_dim = {}", head_dim - head_dim % 2));
    return std::nullopt;
  }
  if (rotary_dim % 2 != 0) {
    std::vector<std::int64_t> even = {rotary_dim - 1};
    if (rotary_dim + 1 <= head_dim) even.push_back(rotary_dim + 1);
    const std::string suggestion =
        spec.rotary_pct && !spec.rotary_dim
            ? fmt::format("nearby valid: rotary_pct = {} (rotary_dim {})",
                          format_number(static_cast<double>(rotary_dim - 1) / static_cast<double>(head_dim)),
                          rotary_dim - 1)
            : (spec.rotary_dim ? "nearby valid: " + alternatives("rotary_dim", even)
                               : "nearby valid: rotary_dim = " + std::to_string(rotary_dim - 1) +
                                     " (rotate all but the last channel) or an even head_dim");
    violations.add(field, value,
                   fmt::format("rotary_dim ({}) must be even: RoPE rotates channels in pairs", rotary_dim), suggestion);
    return std::nullopt;
  }
  return rotary_dim;
}

// Each type's parameters present and in range, and no parameter of another type set (a field that
// would be silently ignored is refused).
void check_rope_scaling(ViolationList& violations, const RopeScaling& scaling, std::int64_t rotary_dim) {
  const std::string type(to_string(scaling.type));
  const auto unused = [&](bool set, const char* field) {
    if (set) {
      violations.add(std::string("rope_scaling.") + field, "set", "is not a parameter of rope_type " + type,
                     "omit it, or choose the rope_type it belongs to");
    }
  };
  const auto positive = [&](std::optional<double> value, const char* field, bool required, const char* example) {
    if (!value) {
      if (required)
        violations.add(std::string("rope_scaling.") + field, "absent", "is required by rope_type " + type, example);
      return;
    }
    if (!std::isfinite(*value) || *value <= 0) {
      violations.add(std::string("rope_scaling.") + field, format_number(*value), "must be a finite number > 0",
                     example);
    }
  };
  const bool llama3 = scaling.type == RopeScalingType::llama3, yarn = scaling.type == RopeScalingType::yarn,
             longrope = scaling.type == RopeScalingType::longrope, linear = scaling.type == RopeScalingType::linear;
  unused(!(linear || llama3 || yarn || longrope) && scaling.factor.has_value(), "factor");
  unused(!llama3 && (scaling.low_freq_factor || scaling.high_freq_factor), "low_freq_factor/high_freq_factor");
  unused(!(llama3 || yarn || longrope) && scaling.original_max_position_embeddings.has_value(),
         "original_max_position_embeddings");
  unused(!yarn &&
             (scaling.beta_fast || scaling.beta_slow || scaling.mscale || scaling.mscale_all_dim || !scaling.truncate),
         "beta_fast/beta_slow/mscale/mscale_all_dim/truncate");
  unused(!(yarn || longrope) && scaling.attention_factor.has_value(), "attention_factor");
  unused(!longrope && (!scaling.short_factor.empty() || !scaling.long_factor.empty()), "short_factor/long_factor");
  if (scaling.type == RopeScalingType::none) return;
  positive(scaling.factor, "factor", linear || llama3 || yarn, "e.g. factor = 8");
  positive(scaling.attention_factor, "attention_factor", false, "omit it (derived from factor) or e.g. 1.2");
  if (llama3 || yarn || longrope) {
    const auto& original = scaling.original_max_position_embeddings;
    // longrope's attention factor divides by log(original): a length of 1 makes it infinite.
    const std::int64_t shortest = longrope ? 2 : 1;
    if (!original || *original < shortest) {
      violations.add("rope_scaling.original_max_position_embeddings", original ? std::to_string(*original) : "absent",
                     fmt::format("must be a length >= {} for rope_type {}", shortest, type), "e.g. 8192 (Llama 3.1)");
    }
  }
  if (llama3) {
    positive(scaling.low_freq_factor, "low_freq_factor", true, "e.g. low_freq_factor = 1 (Llama 3.1)");
    positive(scaling.high_freq_factor, "high_freq_factor", true, "e.g. high_freq_factor = 4 (Llama 3.1)");
    if (scaling.low_freq_factor && scaling.high_freq_factor &&
        !(*scaling.high_freq_factor > *scaling.low_freq_factor)) {
      violations.add("rope_scaling.high_freq_factor", format_number(*scaling.high_freq_factor),
                     fmt::format("must exceed low_freq_factor ({})", format_number(*scaling.low_freq_factor)),
                     "e.g. low 1, high 4 (Llama 3.1)");
    }
  }
  if (yarn) {
    for (const auto& [value, field] :
         {std::pair{scaling.beta_fast, "beta_fast"}, std::pair{scaling.beta_slow, "beta_slow"},
          std::pair{scaling.mscale, "mscale"}, std::pair{scaling.mscale_all_dim, "mscale_all_dim"}}) {
      if (value && (!std::isfinite(*value) || *value < 0)) {
        violations.add(std::string("rope_scaling.") + field, format_number(*value), "must be a finite number >= 0",
                       "omit it for transformers' default");
      }
    }
  }
  if (longrope) {
    const std::size_t pairs = static_cast<std::size_t>(rotary_dim / 2);
    for (const auto& [factors, field] :
         {std::pair{&scaling.short_factor, "short_factor"}, std::pair{&scaling.long_factor, "long_factor"}}) {
      if (factors->size() != pairs) {
        violations.add(std::string("rope_scaling.") + field, fmt::format("{} values", factors->size()),
                       fmt::format("must hold one factor per rotated channel pair: rotary_dim / 2 = {}", pairs),
                       "give rotary_dim / 2 factors");
      } else if (std::any_of(factors->begin(), factors->end(), [](double f) { return !std::isfinite(f) || f <= 0; })) {
        violations.add(std::string("rope_scaling.") + field, "a value <= 0 or non-finite", "every factor must be > 0",
                       "e.g. 1.0");
      }
    }
  }
}

// The factors derived from stated ones, each finite attributes can still make overflow: RoPE's attention factor
// (multiplies q and k, so the scores by its square; stated, or yarn's mscale(factor, mscale) / mscale(factor,
// mscale_all_dim)) and latent attention's mscale(factor, mscale_all_dim)^2 on the softmax scale. A value of 1e308
// makes the scores Inf, and the reference would then blame the inputs. Refused by the attribute that set them.
// The bound: real models have 1 to 2; 1e6 already multiplies scores by 1e12.
constexpr double kLargestDerivedFactor = 1e6;

void check_derived_factors(const Geometry& geometry, const GeometrySpec& spec) {
  const RopeScaling& scaling = spec.rope_scaling;
  ViolationList violations;
  const auto bounded = [](double value) { return std::isfinite(value) && value <= kLargestDerivedFactor; };
  if (geometry.rotary_dim() > 0 &&
      (scaling.type == RopeScalingType::yarn || scaling.type == RopeScalingType::longrope)) {
    const double attention_factor = rope_frequencies(geometry, 0).attention_factor;
    if (!bounded(attention_factor)) {
      const char* field = scaling.attention_factor ? "rope_scaling.attention_factor"
                          : scaling.type == RopeScalingType::yarn && scaling.mscale.value_or(0.0) != 0.0 &&
                                  scaling.mscale_all_dim.value_or(0.0) != 0.0
                              ? "rope_scaling.mscale"
                              : "rope_scaling.factor";
      violations.add(
          field,
          format_number(scaling.attention_factor                           ? *scaling.attention_factor
                        : std::string_view(field) == "rope_scaling.mscale" ? *scaling.mscale
                                                                           : scaling.factor.value_or(0.0)),
          fmt::format("gives RoPE an attention factor of {} (q and k are multiplied by it): it must be finite "
                      "and at most {:g}",
                      format_number(attention_factor), kLargestDerivedFactor),
          "e.g. 1.2 (real models: 1 to 2)");
    }
  }
  if (spec.latent && scaling.type == RopeScalingType::yarn && scaling.mscale_all_dim &&
      *scaling.mscale_all_dim != 0.0) {
    const double mscale = yarn_mscale(*scaling.factor, *scaling.mscale_all_dim);
    if (!bounded(mscale * mscale)) {
      violations.add("rope_scaling.mscale_all_dim", format_number(*scaling.mscale_all_dim),
                     fmt::format("multiplies latent attention's softmax scale by mscale(factor, mscale_all_dim)^2 = "
                                 "{}: it must be finite and at most {:g}",
                                 format_number(mscale * mscale), kLargestDerivedFactor),
                     "e.g. 1 (DeepSeek-V3)");
    }
  }
  violations.throw_if_any("invalid geometry");
}

// Latent attention's own widths, and the plain-layer fields it has no room for (each would be silently
// ignored, or would contradict the latent widths).
void check_latent_geometry(ViolationList& violations, const GeometrySpec& spec) {
  const LatentAttentionSpec& latent = *spec.latent;
  check_latent_attention(latent, kMaxDimension, violations);
  const std::string widths = fmt::format("qk_nope_head_dim + qk_rope_head_dim = {} + {}", latent.qk_nope_head_dim,
                                         latent.qk_rope_head_dim);
  const auto refuse = [&](bool set, const char* field, std::string value, const std::string& rule) {
    if (set) violations.add(field, std::move(value), rule, "omit it for a latent-attention layer");
  };
  refuse(spec.head_dim.has_value(), "head_dim", spec.head_dim ? std::to_string(*spec.head_dim) : "",
         "latent attention's q/k head width is " + widths + " and its value head width v_head_dim; a head_dim "
         "beside them is ambiguous (DeepSeek-V3's transformers config sets head_dim = qk_rope_head_dim)");
  refuse(spec.rotary_pct.has_value() || spec.rotary_dim.has_value(), "rotary_dim", "set",
         "latent attention rotates the last qk_rope_head_dim channels of each q/k head; no other rotary width applies");
  refuse(spec.num_kv_heads && *spec.num_kv_heads != spec.num_heads, "num_kv_heads",
         spec.num_kv_heads ? std::to_string(*spec.num_kv_heads) : "",
         fmt::format("latent attention's expanded form has one K/V head per query head: num_kv_heads must be "
                     "num_heads ({}) or absent",
                     spec.num_heads));
  refuse(spec.qk_norm != QkNorm::none, "qk_norm", std::string(to_string(spec.qk_norm)),
         "latent attention normalises its latents (q_a_layernorm, kv_a_layernorm), not q and k");
  refuse(spec.qkv_bias || spec.out_bias, "attention_bias", "true",
         "latent attention with biases (q_a_proj, kv_a_proj_with_mqa, o_proj) is not modelled; every released "
         "DeepSeek-V2/V3 and Kimi K2 config has attention_bias false");
  refuse(spec.query_pre_attn_scalar.has_value() || spec.attention_multiplier.has_value(), "query_pre_attn_scalar",
         "set", "latent attention's scale is qk_head_dim^-0.5 (times yarn's mscale(factor, mscale_all_dim)^2)");
}

}  // namespace

Geometry resolve_geometry(const GeometrySpec& spec) {
  ViolationList violations;
  const bool hidden_ok = check_count(violations, "hidden_size", spec.hidden_size, kMaxDimension);
  const bool heads_ok = check_count(violations, "num_heads", spec.num_heads, kMaxHeads);
  const bool kv_ok = !spec.num_kv_heads || check_count(violations, "num_kv_heads", *spec.num_kv_heads, kMaxHeads);
  const bool head_dim_ok =
      spec.latent || !spec.head_dim || check_count(violations, "head_dim", *spec.head_dim, kMaxDimension);
  const std::size_t before_latent = violations.size();
  if (spec.latent) check_latent_geometry(violations, spec);
  const bool latent_ok = violations.size() == before_latent;

  Geometry geometry;
  geometry.spec_ = spec;
  geometry.num_kv_heads_ = spec.num_kv_heads.value_or(spec.num_heads);

  if (heads_ok && kv_ok && spec.num_heads % geometry.num_kv_heads_ != 0) {
    violations.add(
        "num_kv_heads", std::to_string(geometry.num_kv_heads_),
        fmt::format("num_heads ({}) must be a multiple of num_kv_heads: each KV head serves a "
                    "whole group of query heads",
                    spec.num_heads),
        "nearby valid: " + alternatives("num_kv_heads", nearest_divisors(spec.num_heads, geometry.num_kv_heads_)));
  }

  std::optional<HeadDimResolution> head_dim;
  if (hidden_ok && heads_ok && head_dim_ok && latent_ok) head_dim = resolve_head_dim(spec, violations);
  if (head_dim && spec.latent) {
    geometry.head_dim_ = *head_dim;
    geometry.rotary_dim_ = spec.latent->qk_rope_head_dim;
  } else if (head_dim) {
    geometry.head_dim_ = *head_dim;
    if (auto rotary_dim = resolve_rotary_dim(spec, head_dim->head_dim, violations)) {
      geometry.rotary_dim_ = *rotary_dim;
    }
  }

  // A base at or below 1 makes no frequency slower than one radian per position, and one near 0 (4.9e-324)
  // overflows the frequencies themselves; real models use 1e4 .. 1e7.
  if (!(std::isfinite(spec.rope_theta) && spec.rope_theta > 1.0)) {
    violations.add("rope_theta", format_number(spec.rope_theta), "must be a finite number > 1",
                   "nearby valid: rope_theta = 10000 (real models use 1e4 .. 1e7)");
  }
  check_positive_finite(violations, "query_pre_attn_scalar", spec.query_pre_attn_scalar,
                        "nearby valid: omit it (scale = head_dim^-0.5) or use head_dim");
  check_positive_finite(violations, "attention_multiplier", spec.attention_multiplier,
                        "nearby valid: omit it (scale = head_dim^-0.5), or 0.0078125 (Granite 3.3)");
  if (spec.query_pre_attn_scalar && spec.attention_multiplier) {
    violations.add("attention_multiplier", format_number(*spec.attention_multiplier),
                   "a layer has one score scale: query_pre_attn_scalar and attention_multiplier both set it",
                   "give one of them");
  }
  if (head_dim) check_rope_scaling(violations, spec.rope_scaling, geometry.rotary_dim_);
  check_positive_finite(violations, "softcap", spec.softcap, "nearby valid: omit it, or 50 (Gemma 2)");
  if (!std::isfinite(spec.qk_norm_eps) || spec.qk_norm_eps < 0) {
    violations.add("qk_norm_eps", format_number(spec.qk_norm_eps), "must be a finite number >= 0",
                   "nearby valid: qk_norm_eps = 1e-06");
  }
  if (spec.sliding_window && *spec.sliding_window < 1) {
    violations.add("sliding_window", std::to_string(*spec.sliding_window),
                   "must be >= 1 (the number of keys a query sees, itself included)",
                   "nearby valid: omit it (no window) or sliding_window = 4096");
  }
  violations.throw_if_any("invalid geometry");

  // pow(x, -0.5) rather than 1/sqrt(x): the same rounding as Python's x**-0.5 in the frameworks.
  if (spec.query_pre_attn_scalar) {
    geometry.scale_ = std::pow(*spec.query_pre_attn_scalar, -0.5);
    geometry.scale_source_ = ScaleSource::query_pre_attn_scalar;
  } else if (spec.attention_multiplier) {
    geometry.scale_ = *spec.attention_multiplier;  // Granite: the scores' multiplier, as stated
    geometry.scale_source_ = ScaleSource::attention_multiplier;
  } else if (spec.latent) {
    // transformers' DeepseekV3Attention: qk_head_dim ** -0.5, times mscale * mscale with
    // mscale = yarn_get_mscale(factor, mscale_all_dim) when the RoPE scaling states a non-zero
    // mscale_all_dim (DeepSeek-V3, Kimi K2: yarn, mscale_all_dim 1); the two factors multiply in that order.
    geometry.scale_ = std::pow(static_cast<double>(geometry.head_dim()), -0.5);
    const RopeScaling& scaling = spec.rope_scaling;
    if (scaling.type == RopeScalingType::yarn && scaling.mscale_all_dim && *scaling.mscale_all_dim != 0.0) {
      const double mscale = yarn_mscale(*scaling.factor, *scaling.mscale_all_dim);
      geometry.scale_ = geometry.scale_ * mscale * mscale;
    }
    geometry.scale_source_ = ScaleSource::latent_qk_head_dim;
  } else {
    geometry.scale_ = std::pow(static_cast<double>(geometry.head_dim()), -0.5);
    geometry.scale_source_ = ScaleSource::head_dim;
  }
  check_derived_factors(geometry, spec);
  return geometry;
}

}  // namespace attncheck
