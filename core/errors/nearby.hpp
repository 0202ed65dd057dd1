// Helpers that find nearby valid values for error messages ("nearby valid: num_kv_heads = 2 or 4").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attncheck {

// Divisors of n (n >= 1) in ascending order.
std::vector<std::int64_t> divisors(std::int64_t n);

// The divisors of n closest to target from below and from above (one value when they coincide or
// when target lies outside [1, n]); target itself is returned only if it divides n.
std::vector<std::int64_t> nearest_divisors(std::int64_t n, std::int64_t target);

// The positive multiples of step closest to target from below and above.
std::vector<std::int64_t> nearest_multiples(std::int64_t step, std::int64_t target);

// "name = a or b" / "name = a" for a list of candidate values.
std::string alternatives(const std::string& name, const std::vector<std::int64_t>& values);

// Joins values as "1, 2, 4, 8".
std::string join(const std::vector<std::int64_t>& values);

// Shortest round-trip text of a double ("0.25", "1000000", "0.08838834764831845").
std::string format_number(double value);

}  // namespace attncheck
