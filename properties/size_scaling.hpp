// How a generator bound follows RapidCheck's size: the smallest value at size 0, the largest at 100.
#pragma once

#include <algorithm>
#include <cstdint>

namespace attncheck::properties {

// low at size 0, high at size 100 and above.
inline std::int64_t bound_at(int size, std::int64_t low, std::int64_t high) {
  return low + (high - low) * std::clamp(size, 0, 100) / 100;
}

}  // namespace attncheck::properties
