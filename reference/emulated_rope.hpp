// RoPE in the emulated layers' working type S (emulated_layer.hpp): the angle rounded as the candidate's
// contract says (RopeAngles), cos and sin stored, each rotated pair stored. One object per layer run: it
// holds a scaled layer's frequencies, those of the forward call each token belongs to.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "core/model/case.hpp"
#include "core/model/rope_frequencies.hpp"
#include "reference/emulated_arithmetic.hpp"

namespace attncheck::reference::emulation {

template <typename S>
class EmulatedRope {
 public:
  // token_largest_positions: per token (b * seq + s), the largest position of the forward call it belongs
  // to, from which a scaled layer's frequencies are chosen (longrope); empty: the whole case is one call.
  EmulatedRope(const Case& test_case, const Storage& store, RopeAngles angles,
               std::span<const std::int64_t> token_largest_positions)
      : g_(test_case.geometry()), positions_(test_case.inputs.positions), store_(store), angles_(angles) {
    if (g_.rope_scaling().type == RopeScalingType::none) return;
    // One set of frequencies per distinct call (two at most: longrope's short and long factors), each
    // computed once per distinct call, not per token.
    const std::int64_t tokens = test_case.inputs.batch * test_case.inputs.seq;
    token_frequencies_.assign(static_cast<std::size_t>(tokens), 0);
    if (token_largest_positions.empty()) {
      frequency_sets_ = {call_rope_frequencies(g_, positions_)};
      return;
    }
    std::map<std::int64_t, std::size_t> set_of_call;  // a call's largest position -> frequency_sets_ index
    std::map<bool, std::size_t> set_of;               // long_factors -> frequency_sets_ index
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t largest = token_largest_positions[t];
      auto call = set_of_call.find(largest);
      if (call == set_of_call.end()) {
        const RopeFrequencies frequencies = rope_frequencies(g_, largest);
        const auto [entry, added] = set_of.try_emplace(frequencies.long_factors, frequency_sets_.size());
        if (added) frequency_sets_.push_back(frequencies);
        call = set_of_call.emplace(largest, entry->second).first;
      }
      token_frequencies_[t] = call->second;
    }
  }

  // Rotates, in every row t of `rows` and each of `heads` heads `head_stride` channels apart, the
  // rotary_dim channels from `offset` on (a plain layer: its first rotary_dim; a latent one: the RoPE part
  // after the no-RoPE part, or k_pe). sign -1 rotates back (the transpose), for the backward.
  void rotate(Mat<S>& rows, std::int64_t heads, std::int64_t head_stride, std::int64_t offset, S sign) const {
    const std::int64_t pairs = g_.rotary_dim() / 2;
    // A scaled layer's frequencies (core/model/rope_frequencies.hpp), those of the call each token belongs
    // to. An unscaled layer keeps the plain formulas below, so that its yardstick is the one goldens store.
    const bool scaled = g_.rope_scaling().type != RopeScalingType::none;
    for (Eigen::Index t = 0; t < rows.rows(); ++t) {
      const S position = static_cast<S>(positions_[t]);
      const RopeFrequencies* scaled_pointer = scaled ? &frequency_sets_[token_frequencies_[t]] : nullptr;
      for (std::int64_t i = 0; i < pairs; ++i) {
        S cos, sin;
        if (scaled) {
          // Angles as the contract says (float64: SCHEMA.md's; float32: the frequency rounded to S, then
          // the angle in S), and the attention factor applied to cos and sin in S.
          const RopeFrequencies& scaled_frequencies = *scaled_pointer;
          const S factor = static_cast<S>(scaled_frequencies.attention_factor);
          if (angles_ == RopeAngles::float64) {
            const double angle = static_cast<double>(positions_[t]) * scaled_frequencies.inv_freq[i];
            cos = store_.round(static_cast<S>(std::cos(angle)) * factor);
            sin = sign * store_.round(static_cast<S>(std::sin(angle)) * factor);
          } else {
            const S angle = position * static_cast<S>(scaled_frequencies.inv_freq[i]);
            cos = store_.round(std::cos(angle) * factor);
            sin = sign * store_.round(std::sin(angle) * factor);
          }
        } else if (angles_ == RopeAngles::float64) {  // SCHEMA.md's frequencies and angle, then rounded to S
          const double angle = static_cast<double>(positions_[t]) *
                               std::pow(g_.rope_theta(), -2.0 * static_cast<double>(i) / g_.rotary_dim());
          cos = store_.round(static_cast<S>(std::cos(angle)));
          sin = sign * store_.round(static_cast<S>(std::sin(angle)));
        } else {
          const S frequency =
              static_cast<S>(std::pow(static_cast<S>(g_.rope_theta()), S(-2) * S(i) / S(g_.rotary_dim())));
          const S angle = position * frequency;
          cos = store_.round(std::cos(angle));
          sin = sign * store_.round(std::sin(angle));
        }
        for (std::int64_t h = 0; h < heads; ++h) {
          S* channels = rows.row(t).data() + h * head_stride + offset;
          S& a = channels[g_.rope_style() == RopeStyle::interleaved ? 2 * i : i];
          S& b = channels[g_.rope_style() == RopeStyle::interleaved ? 2 * i + 1 : i + pairs];
          const S rotated_a = store_.round(a * cos - b * sin);
          const S rotated_b = store_.round(b * cos + a * sin);
          a = rotated_a;
          b = rotated_b;
        }
      }
    }
  }

 private:
  const Geometry& g_;
  const std::vector<std::int64_t>& positions_;
  const Storage& store_;
  RopeAngles angles_;
  std::vector<RopeFrequencies> frequency_sets_;  // scaled layers: each distinct call's frequencies
  std::vector<std::size_t> token_frequencies_;   // scaled layers: per token, its index into frequency_sets_
};

}  // namespace attncheck::reference::emulation
