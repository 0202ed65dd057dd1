// Precision: the element types attncheck's implementations compute and store in.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace attncheck {

enum class Precision { fp64, fp32, bf16, fp16 };

inline constexpr std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::fp64:
      return "fp64";
    case Precision::fp32:
      return "fp32";
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
  }
  return "fp64";
}

inline constexpr std::int64_t bytes_per_element(Precision precision) {
  switch (precision) {
    case Precision::fp64:
      return 8;
    case Precision::fp32:
      return 4;
    case Precision::bf16:
    case Precision::fp16:
      return 2;
  }
  return 8;
}

// How a candidate below fp64 forms its RoPE angles, part of the precision contract it declares
// (golden/SCHEMA.md, "Precision contract"): position x inv_freq in float32 arithmetic, as transformers
// computes it (at position 4.4e5 that is off by ~0.03 rad), or in float64 (a table; attncheck's LibTorch
// and CUDA implementations), cos and sin then rounded to the precision. The yardstick forms its angles
// the same way, so a candidate with float64 angles is held to the tighter tolerance they earn.
enum class RopeAngles { float32, float64 };

inline constexpr std::string_view to_string(RopeAngles angles) {
  return angles == RopeAngles::float64 ? "float64" : "float32";
}

inline constexpr std::optional<RopeAngles> parse_rope_angles(std::string_view text) {
  if (text == "float32") return RopeAngles::float32;
  if (text == "float64") return RopeAngles::float64;
  return std::nullopt;
}

inline constexpr std::optional<Precision> parse_precision(std::string_view text) {
  for (Precision precision : {Precision::fp64, Precision::fp32, Precision::bf16, Precision::fp16}) {
    if (to_string(precision) == text) return precision;
  }
  return std::nullopt;
}

}  // namespace attncheck
