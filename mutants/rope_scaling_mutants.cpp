// The mutants of scaled RoPE (core/model/rope_frequencies.hpp): the naive layer with its call's
// frequencies computed the way a framework got them wrong.
#include <cmath>
#include <numbers>

#include "mutants/mutant_functions.hpp"
#include "mutants/naive_layer.hpp"

namespace attncheck::mutants {

namespace {

// yarn's and longrope's attention factor never multiplied into cos and sin (the frequencies right).
class AttentionFactorDropped : public NaiveLayer {
  RopeFrequencies call_frequencies(const Geometry& geometry, std::span<const std::int64_t> positions) const override {
    RopeFrequencies frequencies = NaiveLayer::call_frequencies(geometry, positions);
    frequencies.attention_factor = 1.0;
    return frequencies;
  }
};

// llama3 with the band's edges exchanged: original / low_freq_factor taken as the short-wavelength
// edge and original / high_freq_factor as the long one. Every wavelength below the (long) edge is kept
// unscaled, every one above the (short) edge divided: the smooth band is never formed.
class Llama3BandReversed : public NaiveLayer {
  RopeFrequencies call_frequencies(const Geometry& geometry, std::span<const std::int64_t> positions) const override {
    const RopeScaling& scaling = geometry.rope_scaling();
    if (scaling.type != RopeScalingType::llama3) return NaiveLayer::call_frequencies(geometry, positions);
    GeometrySpec unscaled = geometry.spec();
    unscaled.rope_scaling = {};
    RopeFrequencies frequencies = NaiveLayer::call_frequencies(resolve_geometry(unscaled), positions);
    const double original = static_cast<double>(*scaling.original_max_position_embeddings);
    const double short_edge = original / *scaling.low_freq_factor, long_edge = original / *scaling.high_freq_factor;
    for (double& value : frequencies.inv_freq) {
      const double wavelength = 2.0 * std::numbers::pi / value;
      if (wavelength < short_edge) continue;
      if (wavelength > long_edge) {
        value /= *scaling.factor;
        continue;
      }
      const double smooth =
          (original / wavelength - *scaling.low_freq_factor) / (*scaling.high_freq_factor - *scaling.low_freq_factor);
      value = (1.0 - smooth) * value / *scaling.factor + smooth * value;
    }
    return frequencies;
  }
};

// How a framework misread a yarn config that states attention_factor (transformers: the stated value is
// the final factor, used as it is). Configs that state none are read right.
enum class StatedFactorMisread {
  times_derived,  // the stated factor multiplied by the derived m(factor, 1): the scale applied twice
  through_log,    // the stated factor taken as mscale: m(factor, attention_factor)
  ignored,        // the stated factor dropped: the derived one used
};

class YarnStatedFactorMisread : public NaiveLayer {
 public:
  explicit YarnStatedFactorMisread(StatedFactorMisread misread) : misread_(misread) {}

 private:
  RopeFrequencies call_frequencies(const Geometry& geometry, std::span<const std::int64_t> positions) const override {
    RopeFrequencies frequencies = NaiveLayer::call_frequencies(geometry, positions);
    const RopeScaling& scaling = geometry.rope_scaling();
    if (scaling.type != RopeScalingType::yarn || !scaling.attention_factor) return frequencies;
    const double factor = *scaling.factor;
    switch (misread_) {
      case StatedFactorMisread::times_derived:
        frequencies.attention_factor = *scaling.attention_factor * yarn_mscale(factor, 1.0);
        break;
      case StatedFactorMisread::through_log:
        frequencies.attention_factor = yarn_mscale(factor, *scaling.attention_factor);
        break;
      case StatedFactorMisread::ignored: {
        GeometrySpec derived = geometry.spec();
        derived.rope_scaling.attention_factor.reset();
        frequencies.attention_factor = NaiveLayer::call_frequencies(resolve_geometry(derived), positions).attention_factor;
        break;
      }
    }
    return frequencies;
  }
  StatedFactorMisread misread_;
};

// longrope choosing its factors from the number of tokens in the call instead of its largest position
// (transformers before it read position_ids): a short call at large positions keeps the short factors.
class LongropeFactorsByTokenCount : public NaiveLayer {
  RopeFrequencies call_frequencies(const Geometry& geometry, std::span<const std::int64_t> positions) const override {
    return rope_frequencies(geometry, static_cast<std::int64_t>(positions.size()) - 1);
  }
};

}  // namespace

Result rope_attention_factor_dropped(const Case& test_case) {
  return AttentionFactorDropped().run(test_case);
}

Result llama3_band_reversed(const Case& test_case) {
  return Llama3BandReversed().run(test_case);
}

Result yarn_stated_factor_times_derived(const Case& test_case) {
  return YarnStatedFactorMisread(StatedFactorMisread::times_derived).run(test_case);
}

Result yarn_stated_factor_through_log(const Case& test_case) {
  return YarnStatedFactorMisread(StatedFactorMisread::through_log).run(test_case);
}

Result yarn_stated_factor_ignored(const Case& test_case) {
  return YarnStatedFactorMisread(StatedFactorMisread::ignored).run(test_case);
}

Result longrope_factors_by_token_count(const Case& test_case) {
  return LongropeFactorsByTokenCount().run(test_case);
}

}  // namespace attncheck::mutants
