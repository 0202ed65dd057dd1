#include "cuda_impl/rope_table.hpp"

#include <algorithm>
#include <cmath>

#include "core/model/rope_frequencies.hpp"

namespace attncheck::cuda_impl {

std::vector<double> rope_table(const Geometry& geometry, std::span<const std::int64_t> positions) {
  const std::int64_t pairs = geometry.rotary_dim() / 2;
  std::vector<double> table(positions.size() * pairs * 2);
  // `positions` are one call's tokens (every batch row): longrope chooses its factors from their largest.
  const RopeFrequencies frequencies = call_rope_frequencies(geometry, positions);
  for (std::int64_t i = 0; i < pairs; ++i) {
    const double inv_freq = frequencies.inv_freq[i];
    for (std::size_t t = 0; t < positions.size(); ++t) {
      const double angle = static_cast<double>(positions[t]) * inv_freq;
      // The attention factor (yarn, longrope) scales cos and sin, so the kernels apply it with the rotation.
      table[(t * pairs + i) * 2] = std::cos(angle) * frequencies.attention_factor;
      table[(t * pairs + i) * 2 + 1] = std::sin(angle) * frequencies.attention_factor;
    }
  }
  return table;
}

}  // namespace attncheck::cuda_impl
