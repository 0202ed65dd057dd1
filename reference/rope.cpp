#include "reference/rope.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/model/rope_frequencies.hpp"

namespace attncheck::reference {

namespace {

void rotate(MatrixRef rows, std::span<const std::int64_t> positions, std::int64_t heads, const Geometry& geometry,
            const RopeFrequencies& frequencies, RopeLayout layout, RopeDirection direction) {
  const std::int64_t pairs = geometry.rotary_dim() / 2;
  if (pairs == 0) return;
  const std::int64_t head_dim = layout.head_width;
  const bool interleaved = geometry.rope_style() == RopeStyle::interleaved;
  const double sign = direction == RopeDirection::forward ? 1.0 : -1.0;
  const std::vector<double>& inv_freq = frequencies.inv_freq;
  const double factor = frequencies.attention_factor;
  std::vector<double> cos_values(pairs);
  std::vector<double> sin_values(pairs);
  for (std::int64_t t = 0; t < rows.rows(); ++t) {
    for (std::int64_t i = 0; i < pairs; ++i) {
      const double angle = static_cast<double>(positions[t]) * inv_freq[i];
      // The attention factor scales cos and sin (yarn, longrope): factor * R(angle), whose transpose is
      // factor * R(-angle). Unscaled layers multiply by exactly 1.
      cos_values[i] = std::cos(angle) * factor;
      sin_values[i] = sign * std::sin(angle) * factor;
    }
    double* row = rows.row(t).data();
    for (std::int64_t head = 0; head < heads; ++head) {
      double* channels = row + head * head_dim + layout.first_channel;
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

}  // namespace

void apply_rope(MatrixRef rows, std::span<const std::int64_t> positions, std::int64_t heads, const Geometry& geometry,
                RopeLayout layout, RopeDirection direction) {
  if (geometry.rotary_dim() == 0) return;
  // The rows are one forward call's tokens (every batch row), so their largest position is the call's,
  // from which longrope chooses its factors as transformers does.
  rotate(rows, positions, heads, geometry, call_rope_frequencies(geometry, positions), layout, direction);
}

void apply_rope(MatrixRef rows, std::span<const std::int64_t> positions, std::int64_t heads, const Geometry& geometry,
                RopeDirection direction) {
  apply_rope(rows, positions, heads, geometry, RopeLayout::of(geometry), direction);
}

void apply_rope(MatrixRef rows, std::span<const std::int64_t> positions, std::int64_t heads, const Geometry& geometry,
                const RopeFrequencies& frequencies, RopeDirection direction) {
  rotate(rows, positions, heads, geometry, frequencies, RopeLayout::of(geometry), direction);
}

}  // namespace attncheck::reference
