// The tolerance model, in one place: how far an implementation's tensor may be from the expected one.
// compare() applies it to every tensor; the golden reader applies the fp64 rule to the one consistency it
// checks between stored tensors (decode/out against out). Why these numbers: docs/ARCHITECTURE.md,
// "Comparison" and "The low-precision yardstick".
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/model/precision.hpp"

namespace attncheck {

// 2^16 ulps of the tensor's scale (its largest |expected| value): fp64 implementations that only sum in
// another order stay below about 2^12 (measured: reference-tp against reference, 1e-12 relative at real
// model widths), while the bugs the suite hunts (a permuted head, a wrong scale, a misaligned mask) are
// O(1) relative.
inline constexpr double kFp64ToleranceUlps = 65536.0;

// fp64 where rounding cancels: a tensor of a correct layer can be a tiny difference of large terms (behind a
// saturated softmax, an upstream gradient whose terms sum to ~0: fuzzing the latent profile drew dout = [20,
// 21.5, 1.5] against outputs of alternating sign, so every gradient was ~1e-6 of terms ~15, and a correct
// fp64 layer's rounding was 8e5 ulps of it). The tensor's own scale, or the case's largest gradient, then
// says nothing about the rounding. So a tensor beyond 2^16 ulps of its scale is held once more, to this
// many times the largest error of naive fp64 implementations of the layer that round differently (the fp64
// yardstick, reference/yardstick.hpp: nearest, jittered and flash-style runs; computed only for a candidate
// that fails the first rule, so a passing one pays nothing, and only within a work bound, kFp64YardstickWorkBound
// in reference/yardstick.hpp, beyond which the first rule stands alone). That error is the rounding of the case's own
// terms, cancellation included. Measured (fuzzing torch-cpu-fp64, torch-cpu-fp64-sdpa and reference-tp, the
// short and latent profiles, docs/MEASUREMENTS.md): correct layers at most 0.6 of it; reference-cp's lost
// precision (a real defect) 60-150x. Bugs change a tensor by O(1) of its own size: far above rounding unless
// the tensor is itself rounding noise.
inline constexpr double kFp64YardstickFactor = 8.0;

// Below fp64: |actual - expected| <= k * (the yardstick's largest error on that tensor) + a floor of
// 4 ulps of the precision at the tensor's scale, k = 2 for outputs and 3 for gradients. The yardstick
// is a naive implementation of the layer in the candidate's precision (reference/emulated_layer.hpp).
// The floor: a tensor's largest error is a noisy statistic when it has few elements or when
// cancellation dominates (gradients behind a saturated softmax): fuzzing torch-cpu-fp32 measured 3.45
// ulps where the yardstick's was 0.46 on a 26-element gradient.
inline constexpr double kYardstickFactorOutputs = 2.0;
inline constexpr double kYardstickFactorGradients = 3.0;
inline constexpr double kYardstickFloorUlps = 4.0;

// Gradients can vanish by cancellation: k_bias's is exactly zero whenever scores are invariant to a
// shift of the keys (no RoPE, no QK-norm, no softcap), and behind a saturated or nearly uniform softmax
// the q/k gradients (and q_norm, k_norm, the biases) are tiny differences of terms as large as the
// other gradients: the usual softmax backward p * (dp - sum(p * dp)) cancels. Correct implementations
// then differ by the terms' rounding, not by their own values' (fuzzing measured up to ~5e3 ulps of
// the case's largest gradient, 4e-5 of the tiny gradient itself: torch autograd against the reference
// on a softmax saturated by outlier activations; and k_bias disagreeing completely between reference
// and reference-tp). So every gradient is held to 2^16 ulps of the case's largest gradient (sketches:
// of the largest sketch). Bugs change gradients by O(1) of their own size, far above that; what this
// gives up is detecting errors below ~1.5e-11 of the largest gradient in a tensor much smaller than it.
inline constexpr double kGradientScaleFloor = 1.0;

// Machine epsilon of a precision: the unit "ulps" are counted in.
inline double epsilon(Precision precision) {
  switch (precision) {
    case Precision::fp64:
      return std::ldexp(1.0, -52);
    case Precision::fp32:
      return std::ldexp(1.0, -23);
    case Precision::bf16:
      return std::ldexp(1.0, -7);
    case Precision::fp16:
      return std::ldexp(1.0, -10);
  }
  return std::ldexp(1.0, -52);
}

// One ulp of `precision` at `scale` (never 0, so that an all-zero tensor still has a unit).
inline double ulp_at(Precision precision, double scale) {
  return epsilon(precision) * std::max(scale, std::numeric_limits<double>::min());
}

enum class TensorRole { output, gradient };

// The absolute tolerance of a tensor of this scale. yardstick_error is the yardstick's largest error on the
// tensor (fp64: 0 unless the tensor failed 2^16 ulps of its scale and the fp64 yardstick was computed); a
// tensor the yardstick lacks is held to the floor alone.
inline double tolerance(Precision precision, TensorRole role, double scale, double yardstick_error = 0.0) {
  const double unit = ulp_at(precision, scale);
  if (precision == Precision::fp64) return std::max(kFp64ToleranceUlps * unit, kFp64YardstickFactor * yardstick_error);
  const double k = role == TensorRole::gradient ? kYardstickFactorGradients : kYardstickFactorOutputs;
  return k * yardstick_error + kYardstickFloorUlps * unit;
}

}  // namespace attncheck
