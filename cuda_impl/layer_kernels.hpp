// The layer's kernels around attention (cuda_impl/qk_norm_rope.cu, cuda_impl/elementwise.cu). Device
// pointers; layouts beside each. "Row" = one token; the fused QKV buffer of a rank is
//   qkv [tokens, qkv_width] T, qkv_width = query_width + 2 * kv_width, columns [Q | K | V] (GPT-NeoX's
//   per-rank stacked layout): query head h at h * head_dim, KV head g at query_width + g * head_dim (K)
//   and query_width + kv_width + g * head_dim (V).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/model/layer_kinds.hpp"
#include "cuda_impl/attention_params.hpp"

namespace attncheck::cuda_impl {

struct QkNormRopeParams {
  std::int32_t tokens = 0;
  std::int32_t num_heads = 0;     // local query heads
  std::int32_t num_kv_heads = 0;  // local KV heads
  std::int32_t head_dim = 0;
  std::int32_t rotary_dim = 0;  // even, <= head_dim; 0: no RoPE
  bool interleaved = false;     // pairs (2i, 2i+1) instead of (i, i + rotary_dim / 2)
  QkNorm norm = QkNorm::none;   // y = x / rms(x) * (w | 1 + w); rms over a head, or the whole width
  float norm_eps = 0.0f;
  // Per-head norms: [head_dim] each, one weight for every head. rms_full_width: the rank's channels,
  // q_norm_weight [num_heads * head_dim], k_norm_weight [num_kv_heads * head_dim] (column c scales
  // local channel c).
  const float* q_norm_weight = nullptr;
  const float* k_norm_weight = nullptr;
  const float* cos_sin = nullptr;  // [tokens, rotary_dim / 2, 2] float: cos, sin of position * inv_freq (fp64 on host)
  std::int64_t row_stride = 0;     // qkv_width
  std::int32_t k_column = 0;       // first K column (query_width)
  // Forward saves, for the backward: the normalised-before-weight values n [tokens, (heads + kv heads) *
  // head_dim] float and 1/rms [tokens, heads + kv heads] float (query heads first; rms_full_width: the
  // token's q or k value, repeated in each of its heads' slots).
  float* normalised = nullptr;
  float* inverse_rms = nullptr;
  // rms_full_width only (qk_norm_math.hpp). N: the layer's whole widths, num_heads * head_dim and
  // num_kv_heads * head_dim of the geometry, not the rank's. The forward reads each token's sums of
  // squares over those widths, all ranks' parts already all-reduced: [tokens] float each.
  std::int32_t q_norm_width = 0;
  std::int32_t k_norm_width = 0;
  const float* q_sum_squares = nullptr;
  const float* k_sum_squares = nullptr;
};

// In place on the Q and K columns of qkv: QK-norm (if any), then RoPE. rms_full_width needs
// params.q_sum_squares / k_sum_squares (the all-reduced sums).
void qk_norm_rope_forward(const QkNormRopeParams& params, Precision type, void* qkv, cudaStream_t stream);

// Per-head norms or none. d_q [tokens, q_row_stride] float (the attention backward's dQ, Q columns at 0)
// and the K columns of d_qkv (T) are rotated back and taken through the norm's backward; results land in
// d_qkv's Q and K columns (T). d_q_norm / d_k_norm [head_dim] float are accumulated into (zeroed by the
// caller).
void qk_norm_rope_backward(const QkNormRopeParams& params, Precision type, const float* d_q, std::int64_t d_q_stride,
                           void* d_qkv, float* d_q_norm, float* d_k_norm, cudaStream_t stream);

// rms_full_width, the three steps around the all-reduces (cuda_layer.cpp runs them between phases).
// 1. Before the norm: each token's sum of squares over the rank's Q columns and over its K columns of qkv
//    (T, projected and biased), one warp per token in channel order: q_sums, k_sums [tokens] float,
//    overwritten. count_keys false (a replica other than its group's first, qk_norm_math.hpp:
//    counts_key_sum_squares) writes zeros to k_sums, so a plain sum over every rank counts the head once.
void qk_norm_full_width_sum_squares(const QkNormRopeParams& params, Precision type, const void* qkv, bool count_keys,
                                    float* q_sums, float* k_sums, cudaStream_t stream);
// 2. After the attention backward: dQ (d_q, as qk_norm_rope_backward) and dK (d_qkv's K columns) rotated
//    back into unrotated [tokens, (heads + kv heads) * head_dim] float (normalised's layout); each token's
//    sum over the rank's channels of dn * n, dn = dy * w, into q_dots, k_dots [tokens] float
//    (overwritten; one warp per token, deterministic); and d_q_norm [num_heads * head_dim] /
//    d_k_norm [num_kv_heads * head_dim] float += dy * n (zeroed by the caller).
void qk_norm_full_width_dots(const QkNormRopeParams& params, Precision type, const float* d_q, std::int64_t d_q_stride,
                             const void* d_qkv, float* unrotated, float* q_dots, float* k_dots, float* d_q_norm,
                             float* d_k_norm, cudaStream_t stream);
// 3. Given the all-reduced dots: dx = inv * (dn - n * dot / N) into d_qkv's Q and K columns (T); for K
//    without the n * dot / N term when subtract_key_dot_term is false (a replica other than its group's
//    first: the first's partial carries it).
void qk_norm_full_width_backward(const QkNormRopeParams& params, Precision type, const float* unrotated,
                                 const float* q_dots, const float* k_dots, bool subtract_key_dot_term, void* d_qkv,
                                 cudaStream_t stream);

// matrix [rows, columns] T (row stride ld) += bias [columns] float, broadcast over rows.
void add_bias(Precision type, void* matrix, std::int64_t rows, std::int64_t columns, std::int64_t ld, const float* bias,
              cudaStream_t stream);
// sums [columns] float = column sums of matrix [rows, columns] T (row stride ld).
void column_sums(Precision type, const void* matrix, std::int64_t rows, std::int64_t columns, std::int64_t ld,
                 float* sums, cudaStream_t stream);
// output [count] T = input [count] float, rounded to nearest.
void round_to(Precision type, const float* input, void* output, std::int64_t count, cudaStream_t stream);

}  // namespace attncheck::cuda_impl
