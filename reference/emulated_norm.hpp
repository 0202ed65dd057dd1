// RMSNorm in the emulated layers' working type S (emulated_layer.hpp), forward and backward: a plain
// layer's QK-norm (per head, or the whole row: units 1) and a latent layer's q_a / kv_a layernorms (the
// whole row). factor: the weight as applied (QkNorm::rms_one_plus: 1 + weight).
//
// Layouts: rows, input, gradient [tokens, units * width]; inverse_rms [tokens, units]; factor and
// weight_gradient [width].
#pragma once

#include <cmath>
#include <cstdint>

#include "reference/emulated_arithmetic.hpp"

namespace attncheck::reference::emulation {

// rows = rows / sqrt(mean(rows^2) + eps) * factor per unit, stored; inverse_rms receives the 1 / rms.
// nudge_inverse_rms: the jittered runs also nudge each 1 / rms (Storage::nudge). A norm over one channel
// needs it: its output is +-factor up to eps / x^2, so its whole gradient is the cancellation
// 1 - (x / rms)^2, which one ulp of 1 / rms moves by 2 ulps x x^2 / eps relative; an implementation forming
// rsqrt another way (LibTorch's autograd: dn r - dn x^2 r^3) lands that far away, and a yardstick whose runs
// all share one 1 / rms did not reach it (measured: torch-cpu-fp32 7.6x the yardstick on grads/kv_a_proj at
// kv_lora_rank 1). Wider norms cancel only along x, where the rest of the row's rounding already reaches.
template <typename S>
void rms_normalise(const Storage& store, Mat<S>& rows, const Row<S>& factor, std::int64_t units, double eps,
                   Mat<S>& inverse_rms, bool nudge_inverse_rms = false) {
  const std::int64_t width = rows.cols() / units;
  inverse_rms.resize(rows.rows(), units);
  for (Eigen::Index t = 0; t < rows.rows(); ++t) {
    for (std::int64_t h = 0; h < units; ++h) {
      auto channels = rows.row(t).segment(h * width, width);
      S inv = S(1) / std::sqrt(channels.squaredNorm() / S(width) + S(eps));
      if (nudge_inverse_rms) inv = store.nudge(inv);
      inverse_rms(t, h) = inv;
      channels = (channels.array() * inv * factor.array()).matrix();
    }
  }
  rows = store(std::move(rows));
}

// Replaces d(y) in `gradient` by d(x), stored, and adds d(weight) to weight_gradient (unstored: the
// caller stores it once summed). input: the norm's input, as rms_normalise saw it.
template <typename S>
void rms_normalise_backward(const Storage& store, Mat<S>& gradient, const Mat<S>& input, const Mat<S>& inverse_rms,
                            const Row<S>& factor, std::int64_t units, Row<S>& weight_gradient) {
  const std::int64_t width = gradient.cols() / units;
  for (Eigen::Index t = 0; t < gradient.rows(); ++t) {
    for (std::int64_t h = 0; h < units; ++h) {
      const Row<S> n = input.row(t).segment(h * width, width) * inverse_rms(t, h);
      auto dy = gradient.row(t).segment(h * width, width);
      weight_gradient.array() += dy.array() * n.array();
      const Row<S> dn = (dy.array() * factor.array()).matrix();
      const S mean = dn.dot(n) / S(width);
      dy = inverse_rms(t, h) * (dn - mean * n);
    }
  }
  gradient = store(std::move(gradient));
}

}  // namespace attncheck::reference::emulation
