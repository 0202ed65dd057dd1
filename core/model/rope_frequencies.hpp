// The rotary frequencies and attention factor of a layer, in float64, exactly as golden/SCHEMA.md
// ("RoPE frequencies") specifies them so that another language reproduces them to the ulp.
//
// For pair i of P = rotary_dim / 2 (0 <= i < P), with d = rotary_dim and theta = rope_theta:
//   base_i = pow(theta, -2.0 * i / d)                     C's pow, correctly rounded in practice
// none:     inv_freq_i = base_i;                          attention factor 1
// linear:   inv_freq_i = base_i / factor;                 1
// llama3:   wavelength w_i = 2 * pi / base_i, L = original / low_freq_factor, H = original /
//           high_freq_factor; w_i < H: base_i; w_i > L: base_i / factor; otherwise, with
//           s = (original / w_i - low_freq_factor) / (high_freq_factor - low_freq_factor),
//           (1 - s) * base_i / factor + s * base_i;       1
// yarn:     edge(n) = d * log(original / (n * 2 * pi)) / (2 * log(theta)); low = edge(beta_fast), high =
//           edge(beta_slow), floored / ceiled when truncate; low = max(low, 0), high = min(high, d - 1),
//           high += 0.001 when low == high; ramp_i = clamp((i - low) / (high - low), 0, 1);
//           inv_freq_i = (base_i / factor) * ramp_i + base_i * (1 - ramp_i);
//           attention factor: the stated one, else with m(s, k) = (s <= 1 ? 1 : 0.1 * k * log(s) + 1)
//           m(factor, mscale) / m(factor, mscale_all_dim) when both are non-zero, else m(factor, 1);
//           beta_fast, beta_slow default to 32 and 1 (also when 0, as transformers' `or`)
// longrope: f = long_factor when the call's largest position + 1 > original, else short_factor;
//           inv_freq_i = base_i / f_i; attention factor: the stated one, else factor <= 1 ? 1 :
//           sqrt(1 + log(factor) / log(original))
// The attention factor multiplies cos and sin, so it scales the rotated channels of q and k (not the
// channels past rotary_dim), and scores by its square on those channels.
// Everything is float64, as transformers computes it in float64 (its float32 requests made float64,
// as attncheck.adapters.hf_transformers runs it): its default float32 run rounds the base frequencies,
// yarn's ramp and longrope's factors to float32, precision artifacts the fp64 layer does not have.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/model/case.hpp"
#include "core/model/geometry.hpp"

namespace attncheck {

struct RopeFrequencies {
  std::vector<double> inv_freq;  // [rotary_dim / 2]
  double attention_factor = 1.0;
  bool long_factors = false;  // longrope: the long factors were chosen
};

// largest_position: the largest position of the forward call being rotated (longrope chooses its
// factors from it; the other types ignore it).
RopeFrequencies rope_frequencies(const Geometry& geometry, std::int64_t largest_position);

// yarn's m(s, k) = (s <= 1 ? 1 : 0.1 * k * log(s) + 1): the attention factor's building block.
double yarn_mscale(double scale, double mscale);

// The frequencies of one forward call whose tokens sit at `positions` (every batch row): its largest
// position chooses longrope's factors.
RopeFrequencies call_rope_frequencies(const Geometry& geometry, std::span<const std::int64_t> positions);

// The first call of the case's decode schedule (prefill = 0, then its steps) whose frequencies differ from
// the full forward's, or -1: only longrope, when its calls fall on different sides of
// original_max_position_embeddings than the whole sequence. Then decode/out is not the full forward's
// first rows (the cache holds keys rotated with the prefill's factors), as in transformers.
std::int64_t decode_call_with_other_frequencies(const Case& test_case);

// Per token (b * seq + s), the largest position of the decode call it belongs to (over every batch row
// of that call): the prefill, then each step; tokens past the schedule get the full forward's. Empty
// without a decode schedule.
std::vector<std::int64_t> decode_call_largest_positions(const Case& test_case);

}  // namespace attncheck
