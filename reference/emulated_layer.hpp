// The yardstick for low-precision implementations (core/compare/tolerance.hpp): a naive implementation of the whole
// layer in that precision, emulated on the CPU. fp32: every operation in float (Eigen's float GEMMs accumulate in
// float). bf16 and fp16: operations in float and every operation's result rounded to bf16 / fp16, as GPU kernels that
// store in half precision and accumulate in fp32 do. "Naive" also in RoPE: the angle is position x frequency in float,
// as transformers computes it (or in float64, for a candidate that declares float64 angles: EmulationVariant::angles).
// fp64 runs the same code in double, which is how it is tested against the reference. A latent-attention
// layer (multi-head latent attention) is emulated by emulated_latent_layer.hpp, from the same arithmetic
// (emulated_arithmetic.hpp, emulated_rope.hpp, emulated_norm.hpp, emulated_attention.hpp).
//
// Unsharded: per-rank gradients are the slices of the full ones (their error is the same), and the
// decode output is the full forward's first rows (the same arithmetic per query), or, where a longrope
// decode call chooses other factors than the full forward, a forward pass rotating each token with its
// own call's frequencies.
#pragma once

#include <cstdint>

#include "core/model/case.hpp"
#include "core/model/precision.hpp"
#include "core/model/result.hpp"

namespace attncheck::reference {

// How one run of the yardstick rounds. Round-to-nearest is one correct rounding among many: behind a
// saturated softmax, 1 - p_max keeps only a few bits in fp32, so which way p_max rounds moves the q/k
// gradients by ~10x the nearest-rounded yardstick's own error (torch-cpu-fp32 showed it, with its own
// operation order rounding the other way). The yardstick is therefore the worst of several runs
// (yardstick_errors, reference/yardstick.hpp) that round differently:
// - rounding (fp32 only): the IEEE rounding mode of the softmax chain — softcap, exp, the row sum, the
//   normalisation, and their backward up to dS — where cancellation (1 - p_max, 1 - tanh^2) makes the
//   direction matter. GEMMs and the rest round to nearest: directed rounding there biases every term
//   of a long sum the same way, which no nearest-rounding implementation does (measured: 5-10x the
//   nearest error on out). bf16/fp16 runs ignore it: their probabilities are stored rounded to nearest
//   in half precision, and the jittered runs stand for other roundings there.
// - jitter_seed != 0: every operation's result is additionally moved by one ulp of the precision, in a
//   random direction, half of the time (seeded).
// - d_from_output: the backward's D = sum_j p_ij dp_ij formed as flash-style kernels form it, as
//   rowsum(dO o O) from the stored output (FlashAttention-2, PyTorch's memory-efficient and cuDNN
//   kernels, attncheck's cuda_impl), and stored. Equal in exact arithmetic, but its rounding no longer
//   cancels against dP's in dS = P (dP - D): behind a saturated softmax with large q and k (outlier
//   activations) that costs up to ~4x the naive form's error on the q/k gradients (measured on the
//   first H200 run: cuda-fp32 761 ulps of grads/k_proj where the naive yardstick allowed 625).
enum class Rounding { nearest, upward, downward, toward_zero };
inline constexpr Rounding kRoundings[] = {Rounding::nearest, Rounding::upward, Rounding::downward,
                                          Rounding::toward_zero};

struct EmulationVariant {
  Rounding rounding = Rounding::nearest;
  std::uint64_t jitter_seed = 0;
  // RoPE angles as the candidate forms them (core/model/precision.hpp): position x frequency in the
  // layer's float arithmetic, or in float64 by SCHEMA.md's frequencies, cos/sin then rounded.
  RopeAngles angles = RopeAngles::float32;
  bool d_from_output = false;
  // p_from_lse: the backward's probabilities recomputed as exp(score - lse) from each row's stored log-sum-exp,
  // as flash-style backwards recompute them. lse is as large as the scores, so where p is near 1 its
  // rounding is an ulp of the score, not of p: behind a saturated softmax with large scores, PyTorch's CPU
  // flash SDPA in double measured 7x the other runs' error on grads/v_proj. Used by the fp64 yardstick's
  // flash-style runs (reference/yardstick.hpp); the fp32 one predates it and leaves it out (its stored
  // copies in the committed goldens would all change, and the GPU kernels passed within it).
  bool p_from_lse = false;
};

// The part of a variant an fp64 run honours (the fp64 yardstick, reference/yardstick.hpp): its jitter, a nudge of
// one double ulp on half of the results, and the flash-style backward's D and P. Otherwise it rounds to
// nearest, as the reference does, and forms RoPE angles in double.
inline EmulationVariant fp64_variant(EmulationVariant variant) {
  return {.jitter_seed = variant.jitter_seed, .d_from_output = variant.d_from_output, .p_from_lse = variant.p_from_lse};
}

Result run_emulated(const Case& test_case, Precision precision, EmulationVariant variant = {});

}  // namespace attncheck::reference
