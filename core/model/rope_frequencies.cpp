#include "core/model/rope_frequencies.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace attncheck {

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

namespace {

// yarn's edge(n): the channel pair index at which a frequency completes n rotations over the original length.
double yarn_edge(double rotations, double dim, double theta, double original) {
  return dim * std::log(original / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
}

}  // namespace

RopeFrequencies rope_frequencies(const Geometry& geometry, std::int64_t largest_position) {
  const std::int64_t pairs = geometry.rotary_dim() / 2;
  const double dim = static_cast<double>(geometry.rotary_dim());
  const double theta = geometry.rope_theta();
  const RopeScaling& scaling = geometry.rope_scaling();
  RopeFrequencies frequencies;
  frequencies.inv_freq.resize(static_cast<std::size_t>(pairs));
  for (std::int64_t i = 0; i < pairs; ++i) {
    frequencies.inv_freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / dim);
  }
  const double factor = scaling.factor.value_or(1.0);
  const double original = static_cast<double>(scaling.original_max_position_embeddings.value_or(1));
  switch (scaling.type) {
    case RopeScalingType::none:
      break;
    case RopeScalingType::linear:
      for (double& value : frequencies.inv_freq) value /= factor;
      break;
    case RopeScalingType::llama3: {
      const double low_freq_factor = *scaling.low_freq_factor, high_freq_factor = *scaling.high_freq_factor;
      const double low_wavelength = original / low_freq_factor, high_wavelength = original / high_freq_factor;
      for (double& value : frequencies.inv_freq) {
        const double wavelength = 2.0 * std::numbers::pi / value;
        if (wavelength < high_wavelength) continue;
        if (wavelength > low_wavelength) {
          value /= factor;
          continue;
        }
        const double smooth = (original / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor);
        value = (1.0 - smooth) * value / factor + smooth * value;
      }
      break;
    }
    case RopeScalingType::yarn: {
      const double beta_fast = scaling.beta_fast.value_or(0.0) != 0.0 ? *scaling.beta_fast : 32.0;
      const double beta_slow = scaling.beta_slow.value_or(0.0) != 0.0 ? *scaling.beta_slow : 1.0;
      double low = yarn_edge(beta_fast, dim, theta, original), high = yarn_edge(beta_slow, dim, theta, original);
      if (scaling.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, dim - 1.0);
      if (low == high) high += 0.001;  // transformers: "prevent singularity"
      for (std::int64_t i = 0; i < pairs; ++i) {
        const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double base = frequencies.inv_freq[i];
        frequencies.inv_freq[i] = (base / factor) * ramp + base * (1.0 - ramp);
      }
      if (scaling.attention_factor) {
        frequencies.attention_factor = *scaling.attention_factor;
      } else if (scaling.mscale.value_or(0.0) != 0.0 && scaling.mscale_all_dim.value_or(0.0) != 0.0) {
        frequencies.attention_factor =
            yarn_mscale(factor, *scaling.mscale) / yarn_mscale(factor, *scaling.mscale_all_dim);
      } else {
        frequencies.attention_factor = yarn_mscale(factor, 1.0);
      }
      break;
    }
    case RopeScalingType::longrope: {
      frequencies.long_factors = static_cast<double>(largest_position) + 1.0 > original;
      const std::vector<double>& chosen = frequencies.long_factors ? scaling.long_factor : scaling.short_factor;
      for (std::int64_t i = 0; i < pairs; ++i) frequencies.inv_freq[i] /= chosen[i];
      if (scaling.attention_factor) {
        frequencies.attention_factor = *scaling.attention_factor;
      } else if (factor > 1.0) {
        frequencies.attention_factor = std::sqrt(1.0 + std::log(factor) / std::log(original));
      }
      break;
    }
  }
  return frequencies;
}

RopeFrequencies call_rope_frequencies(const Geometry& geometry, std::span<const std::int64_t> positions) {
  return rope_frequencies(geometry, positions.empty() ? 0 : *std::max_element(positions.begin(), positions.end()));
}

namespace {

// The largest position of tokens [first, first + count) over every batch row.
std::int64_t largest_of(const Inputs& inputs, std::int64_t first, std::int64_t count) {
  std::int64_t largest = 0;
  for (std::int64_t b = 0; b < inputs.batch; ++b) {
    for (std::int64_t t = first; t < first + count; ++t)
      largest = std::max(largest, inputs.positions[b * inputs.seq + t]);
  }
  return largest;
}

std::vector<std::int64_t> decode_calls(const DecodeSchedule& schedule) {
  std::vector<std::int64_t> calls{schedule.prefill};
  calls.insert(calls.end(), schedule.steps.begin(), schedule.steps.end());
  return calls;
}

}  // namespace

std::int64_t decode_call_with_other_frequencies(const Case& test_case) {
  const Geometry& geometry = test_case.geometry();
  const Inputs& inputs = test_case.inputs;
  if (geometry.rope_scaling().type != RopeScalingType::longrope || inputs.decode.empty()) return -1;
  const bool full_long = rope_frequencies(geometry, largest_of(inputs, 0, inputs.seq)).long_factors;
  const std::vector<std::int64_t> calls = decode_calls(inputs.decode);
  std::int64_t start = 0;
  for (std::size_t call = 0; call < calls.size(); start += calls[call], ++call) {
    // A prefill of 0 tokens is no call: it rotates nothing, so it chooses nothing (SCHEMA.md).
    if (calls[call] == 0) continue;
    if (rope_frequencies(geometry, largest_of(inputs, start, calls[call])).long_factors != full_long) {
      return static_cast<std::int64_t>(call);
    }
  }
  return -1;
}

std::vector<std::int64_t> decode_call_largest_positions(const Case& test_case) {
  const Inputs& inputs = test_case.inputs;
  if (inputs.decode.empty()) return {};
  std::vector<std::int64_t> largest(static_cast<std::size_t>(inputs.batch * inputs.seq),
                                    largest_of(inputs, 0, inputs.seq));
  std::int64_t start = 0;
  for (const std::int64_t count : decode_calls(inputs.decode)) {
    const std::int64_t call_largest = largest_of(inputs, start, count);
    for (std::int64_t b = 0; b < inputs.batch; ++b) {
      std::fill_n(largest.begin() + b * inputs.seq + start, count, call_largest);
    }
    start += count;
  }
  return largest;
}

}  // namespace attncheck
