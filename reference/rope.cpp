#include "reference/rope.hpp"

#include <cmath>
#include <vector>

namespace attncheck::reference {

void apply_rope(MatrixRef rows, std::span<const std::int64_t> positions, std::int64_t heads, const Geometry& geometry,
                RopeDirection direction) {
  const std::int64_t pairs = geometry.rotary_dim() / 2;
  if (pairs == 0) return;
  const std::int64_t head_dim = geometry.head_dim();
  const bool interleaved = geometry.rope_style() == RopeStyle::interleaved;
  const double sign = direction == RopeDirection::forward ? 1.0 : -1.0;

  std::vector<double> inv_freq(pairs);
  for (std::int64_t i = 0; i < pairs; ++i) {
    inv_freq[i] = std::pow(geometry.rope_theta(), -2.0 * static_cast<double>(i) / geometry.rotary_dim());
  }
  std::vector<double> cos_values(pairs);
  std::vector<double> sin_values(pairs);
  for (std::int64_t t = 0; t < rows.rows(); ++t) {
    for (std::int64_t i = 0; i < pairs; ++i) {
      const double angle = static_cast<double>(positions[t]) * inv_freq[i];
      cos_values[i] = std::cos(angle);
      sin_values[i] = sign * std::sin(angle);
    }
    double* row = rows.row(t).data();
    for (std::int64_t head = 0; head < heads; ++head) {
      double* channels = row + head * head_dim;
      for (std::int64_t i = 0; i < pairs; ++i) {
        double& a = channels[interleaved ? 2 * i : i];
        double& b = channels[interleaved ? 2 * i + 1 : i + pairs];
        const double rotated_a = a * cos_values[i] - b * sin_values[i];
        const double rotated_b = b * cos_values[i] + a * sin_values[i];
        a = rotated_a;
        b = rotated_b;
      }
    }
  }
}

}  // namespace attncheck::reference
