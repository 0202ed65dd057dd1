// The whole-width QK-norm's arithmetic (rms-full-width, OLMo-2) as the kernels do it (qk_norm_rope.cu),
// shared with its CPU test (qk_norm_math_test.cpp). Under TP a rank holds only its heads' channels, so a
// token's sums over the whole width are all-reduced between ranks (cuda_layer.cpp):
//   forward   sum of x^2 over the width -> inv = 1 / sqrt(sum / N + eps), n = x * inv, y = n * w;
//   backward  dn = dy * w, S = sum of dn * n over the width -> dx = inv * (dn - n * S / N), dw = dy * n.
// N is the layer's whole q or k width, never a rank's.
#pragma once

#include <cmath>

#include "cuda_impl/host_device.hpp"

namespace attncheck::cuda_impl {

// 1 / rms from a sum of squares over `width` channels. The per-head norms use it too, with their warp's
// sum over head_dim, so both spell it the same way.
ATTNCHECK_HOST_DEVICE float inverse_rms_from_sum(float sum_squares, int width, float eps) {
  return 1.0f / sqrtf(sum_squares / float(width) + eps);
}

// Whether a rank adds its K channels' sum of squares to the forward all-reduce: a replicated KV head
// (tp_size > num_kv_heads) lives on every rank of its replica group and is counted once, by the group's
// first rank; counted per replica it would weigh kv_replicas times. Without replication every rank is
// the first (and only) rank of its group. Every rank adds its Q sum, and every rank its backward dots:
// replicas hold different shares of their KV head's gradient.
ATTNCHECK_HOST_DEVICE bool counts_key_sum_squares(int rank, int first_rank_of_replica_group) {
  return rank == first_rank_of_replica_group;
}

// One channel's dx given dn = dy * w, n, the token's inv and its all-reduced S. The n * S / N term
// belongs to a replicated KV head's gradient once: subtract_dot_term false (a replica other than the
// group's first) leaves it to the first, so that summing the group's partials (k_proj's replica sum)
// gives the true gradient. Q, and K without replication, always subtract it.
ATTNCHECK_HOST_DEVICE float full_width_input_gradient(float dn, float normalised, float inverse, float dot, int width,
                                                      bool subtract_dot_term) {
  return subtract_dot_term ? inverse * (dn - normalised * (dot / float(width))) : inverse * dn;
}

}  // namespace attncheck::cuda_impl
