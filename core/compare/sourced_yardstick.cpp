#include "core/compare/sourced_yardstick.hpp"

#include <fmt/format.h>

namespace attncheck {

std::string_view source_name(YardstickSource source) {
  switch (source) {
    case YardstickSource::none:
      return "none";
    case YardstickSource::stored:
      return "stored";
    case YardstickSource::recomputed:
      return "recomputed";
    case YardstickSource::computed:
      return "computed";
  }
  return "none";
}

std::string describe(const SourcedYardstick& yardstick) {
  switch (yardstick.source) {
    case YardstickSource::none:
      return "";
    case YardstickSource::stored:
      return fmt::format("yardstick {}: stored in the golden, bound to its integrity digest", yardstick.contract);
    case YardstickSource::recomputed:
      return fmt::format(
          "yardstick {}: computed now; the golden's stored one is not bound to a verified integrity digest, and "
          "equals this recomputation",
          yardstick.contract);
    case YardstickSource::computed:
      if (yardstick.contract == "fp64") {
        return "yardstick fp64: computed now, a tensor being beyond 65536 ulps of its scale (never stored)";
      }
      return fmt::format("yardstick {}: computed now (none current stored in the golden)", yardstick.contract);
  }
  return "";
}

}  // namespace attncheck
