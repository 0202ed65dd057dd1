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
  QkNorm norm = QkNorm::none;   // y = x / rms(x) * (w | 1 + w)
  float norm_eps = 0.0f;
  const float* q_norm_weight = nullptr;  // [head_dim]
  const float* k_norm_weight = nullptr;  // [head_dim]
  const float* cos_sin = nullptr;  // [tokens, rotary_dim / 2, 2] float: cos, sin of position * inv_freq (fp64 on host)
  std::int64_t row_stride = 0;     // qkv_width
  std::int32_t k_column = 0;       // first K column (query_width)
  // Forward saves, for the backward: the normalised-before-weight values n [tokens, (heads + kv heads) *
  // head_dim] float and 1/rms [tokens, heads + kv heads] float (query heads first).
  float* normalised = nullptr;
  float* inverse_rms = nullptr;
};

// In place on the Q and K columns of qkv: QK-norm (if any), then RoPE.
void qk_norm_rope_forward(const QkNormRopeParams& params, Precision type, void* qkv, cudaStream_t stream);

// d_q [tokens, q_row_stride] float (the attention backward's dQ, Q columns at 0) and the K columns of
// d_qkv (T) are rotated back and taken through the norm's backward; results land in d_qkv's Q and K
// columns (T). d_q_norm / d_k_norm [head_dim] float are accumulated into (zeroed by the caller).
void qk_norm_rope_backward(const QkNormRopeParams& params, Precision type, const float* d_q, std::int64_t d_q_stride,
                           void* d_qkv, float* d_q_norm, float* d_k_norm, cudaStream_t stream);

// matrix [rows, columns] T (row stride ld) += bias [columns] float, broadcast over rows.
void add_bias(Precision type, void* matrix, std::int64_t rows, std::int64_t columns, std::int64_t ld, const float* bias,
              cudaStream_t stream);
// sums [columns] float = column sums of matrix [rows, columns] T (row stride ld).
void column_sums(Precision type, const void* matrix, std::int64_t rows, std::int64_t columns, std::int64_t ld,
                 float* sums, cudaStream_t stream);
// output [count] T = input [count] float, rounded to nearest.
void round_to(Precision type, const float* input, void* output, std::int64_t count, cudaStream_t stream);

}  // namespace attncheck::cuda_impl
