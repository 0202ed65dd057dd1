#include "core/model/geometry.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/errors/input_error.hpp"
#include "core/errors/nearby.hpp"

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
  }
  return "none";
}

std::string_view to_string(HeadDimSource source) {
  return source == HeadDimSource::explicit_value ? "explicit" : "derived";
}

std::string_view to_string(ScaleSource source) {
  return source == ScaleSource::head_dim ? "head_dim" : "query_pre_attn_scalar";
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
  return std::nullopt;
}

std::optional<HeadDimResolution> resolve_head_dim(const GeometrySpec& spec, ViolationList& violations) {
  const bool divides = spec.hidden_size % spec.num_heads == 0;
  const std::optional<std::int64_t> quotient =
      divides ? std::optional(spec.hidden_size / spec.num_heads) : std::nullopt;
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

}  // namespace

Geometry resolve_geometry(const GeometrySpec& spec) {
  ViolationList violations;
  const bool hidden_ok = check_count(violations, "hidden_size", spec.hidden_size, kMaxDimension);
  const bool heads_ok = check_count(violations, "num_heads", spec.num_heads, kMaxHeads);
  const bool kv_ok = !spec.num_kv_heads || check_count(violations, "num_kv_heads", *spec.num_kv_heads, kMaxHeads);
  const bool head_dim_ok = !spec.head_dim || check_count(violations, "head_dim", *spec.head_dim, kMaxDimension);

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
  if (hidden_ok && heads_ok && head_dim_ok) head_dim = resolve_head_dim(spec, violations);
  if (head_dim) {
    geometry.head_dim_ = *head_dim;
    if (auto rotary_dim = resolve_rotary_dim(spec, head_dim->head_dim, violations)) {
      geometry.rotary_dim_ = *rotary_dim;
    }
  }

  check_positive_finite(violations, "rope_theta", spec.rope_theta, "nearby valid: rope_theta = 10000");
  check_positive_finite(violations, "query_pre_attn_scalar", spec.query_pre_attn_scalar,
                        "nearby valid: omit it (scale = head_dim^-0.5) or use head_dim");
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
  } else {
    geometry.scale_ = std::pow(static_cast<double>(geometry.head_dim()), -0.5);
    geometry.scale_source_ = ScaleSource::head_dim;
  }
  return geometry;
}

}  // namespace attncheck
