// Number and head-range formats shared by the `attncheck plan` text renderers.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "core/model/tp_plan.hpp"

namespace attncheck::cli {

// 3145728 -> "3,145,728"
// (Built by appending: GCC 12 at -O3 reports a false -Wrestrict overlap in string::insert here.)
inline std::string grouped_digits(std::int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string grouped = value < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

// Heads [4, 8) -> "4-7"; a single head -> "4".
inline std::string head_list(const IndexRange& heads) {
  return heads.size() == 1 ? std::to_string(heads.begin) : fmt::format("{}-{}", heads.begin, heads.end - 1);
}

}  // namespace attncheck::cli
