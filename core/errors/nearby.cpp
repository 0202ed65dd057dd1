#include "core/errors/nearby.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace attncheck {

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> low, high;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

std::vector<std::int64_t> nearest_divisors(std::int64_t n, std::int64_t target) {
  const std::vector<std::int64_t> all = divisors(n);
  std::vector<std::int64_t> result;
  auto above = std::lower_bound(all.begin(), all.end(), target);
  if (above != all.end() && *above == target) return {target};
  if (above != all.begin()) result.push_back(*std::prev(above));
  if (above != all.end()) result.push_back(*above);
  return result;
}

std::vector<std::int64_t> nearest_multiples(std::int64_t step, std::int64_t target) {
  const std::int64_t below = (target / step) * step;
  if (below == target && below > 0) return {target};
  if (below < step) return {step};
  return {below, below + step};
}

std::string join(const std::vector<std::int64_t>& values) {
  return fmt::format("{}", fmt::join(values, ", "));
}

std::string alternatives(const std::string& name, const std::vector<std::int64_t>& values) {
  return fmt::format("{} = {}", name, fmt::join(values, " or "));
}

std::string format_number(double value) {
  return fmt::format("{}", value);
}

}  // namespace attncheck
