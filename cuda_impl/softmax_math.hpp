// The online-softmax arithmetic every attention kernel shares (flash_forward, flash_backward,
// flash_decode), with the -inf conventions in one place, so the CPU test (softmax_math_test.cpp) checks
// what the kernels compute: a masked score is -inf; a running max of -inf means nothing seen yet; a
// row that saw no key has sum 0 and log-sum-exp -inf (its output is 0).
#pragma once

#include <cmath>

#include "cuda_impl/host_device.hpp"

namespace attncheck::cuda_impl {

// exp(score - max), 0 for a masked score.
ATTNCHECK_HOST_DEVICE float masked_exp(float score, float max) {
  return score == -INFINITY ? 0.0f : expf(score - max);
}

// What the accumulators of a row (sum and output) are multiplied by when its running max moves from
// old_max to new_max: 0 when nothing was seen before, 1 while nothing is seen at all.
ATTNCHECK_HOST_DEVICE float rescale_factor(float old_max, float new_max) {
  if (new_max == -INFINITY) return 1.0f;
  return old_max == -INFINITY ? 0.0f : expf(old_max - new_max);
}

// log(sum of exp(score)) from a row's running max and sum; -inf for a row that saw no key.
ATTNCHECK_HOST_DEVICE float log_sum_exp(float max, float sum) {
  return sum > 0.0f ? max + logf(sum) : -INFINITY;
}

}  // namespace attncheck::cuda_impl
