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

inline constexpr std::optional<Precision> parse_precision(std::string_view text) {
  for (Precision precision : {Precision::fp64, Precision::fp32, Precision::bf16, Precision::fp16}) {
    if (to_string(precision) == text) return precision;
  }
  return std::nullopt;
}

}  // namespace attncheck
