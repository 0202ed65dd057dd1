// The online-softmax arithmetic every attention kernel shares (flash_forward, flash_backward,
// flash_decode), with the -inf conventions in one place, so the CPU test (softmax_math_test.cpp) checks
// what the kernels compute: a masked score is -inf; a running max of -inf means nothing seen yet; a
// row that saw no key has sum 0 and log-sum-exp -inf (its output is 0). An attention sink (gpt-oss) is
// counted before any key, as a key with logit s_h and a zero value would be (row_start), so a row with a
// sink never has sum 0: it sees at least its sink, and its output is then 0.
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

// The running (max, sum) a row of query head `head` starts from: nothing seen, (-inf, 0), or, with sinks
// ([num_heads] logits), the sink already counted, (s_h, exp(s_h - s_h) = 1). The rescaling then carries
// the sink like any key, and o = accumulator / sum and lse = max + log(sum) include it in the denominator
// and never in the numerator.
struct RowStart {
  float max;
  float sum;
};
ATTNCHECK_HOST_DEVICE RowStart row_start(const float* sinks, int head) {
  if (sinks == nullptr) return {-INFINITY, 0.0f};
  return {sinks[head], 1.0f};
}

// One query row's share of dL/ds_h: the sink's probability is p_sink = exp(s_h - lse), and
// dL/ds_h = sum over rows of -p_sink * sum_j p_j dp_j = -p_sink * D, D = rowsum(dO * O) (the backward's
// d_row), because O = sum_j p_j v_j and dp_j = dO . v_j.
ATTNCHECK_HOST_DEVICE float sink_gradient_term(float sink, float lse, float d_row) {
  return lse == -INFINITY ? 0.0f : -expf(sink - lse) * d_row;
}

}  // namespace attncheck::cuda_impl
