#include "cuda_impl/rope_table.hpp"

#include <cmath>

namespace attncheck::cuda_impl {

std::vector<double> rope_table(const Geometry& geometry, std::span<const std::int64_t> positions) {
  const std::int64_t pairs = geometry.rotary_dim() / 2;
  std::vector<double> table(positions.size() * pairs * 2);
  for (std::int64_t i = 0; i < pairs; ++i) {
    const double inv_freq = std::pow(geometry.rope_theta(), -2.0 * static_cast<double>(i) / geometry.rotary_dim());
    for (std::size_t t = 0; t < positions.size(); ++t) {
      const double angle = static_cast<double>(positions[t]) * inv_freq;
      table[(t * pairs + i) * 2] = std::cos(angle);
      table[(t * pairs + i) * 2 + 1] = std::sin(angle);
    }
  }
  return table;
}

}  // namespace attncheck::cuda_impl
