// QK-norm and RoPE, fused and in place: one warp per (token, head), the head's row staged in shared
// memory in float. Angles come from a cos/sin table the host computes in fp64 (cuda_layer.cpp): at
// positions near 2^20, a float angle would be off by ~0.03 rad.
#include <cuda_runtime.h>

#include <stdexcept>

#include "cuda_impl/cuda_check.hpp"
#include "cuda_impl/device_math.cuh"
#include "cuda_impl/kernel_config.hpp"
#include "cuda_impl/layer_kernels.hpp"
#include "cuda_impl/rope_math.hpp"

namespace attncheck::cuda_impl {
namespace {

constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDimHere = 256;

// sign +1 rotates forward, -1 back (the transpose); rope_math.hpp holds the arithmetic.
__device__ void rotate(const QkNormRopeParams& p, float* row, int token, float sign) {
  rotate_pairs(row, p.cos_sin + std::int64_t(token) * p.rotary_dim, p.rotary_dim, p.interleaved, sign, threadIdx.x % 32,
               32);
  __syncwarp();
}

__device__ __forceinline__ float norm_factor(const QkNormRopeParams& p, const float* weight, int column) {
  return p.norm == QkNorm::rms_one_plus ? 1.0f + weight[column] : weight[column];
}

// The (token, head) a warp works on, and that head's columns in a [tokens, row_stride] buffer.
struct HeadTask {
  std::int64_t task;  // token * (num_heads + num_kv_heads) + head: the index of normalised / inverse_rms
  int token, head;
  bool is_key;          // head >= num_heads: KV head head - num_heads
  std::int64_t column;  // first column of the head
};

// False for a warp past the last task (it returns; whole warps only, so no shuffle is left waiting).
__device__ __forceinline__ bool head_task(const QkNormRopeParams& p, HeadTask& out) {
  const int heads = p.num_heads + p.num_kv_heads;
  out.task = std::int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (out.task >= std::int64_t(p.tokens) * heads) return false;
  out.token = int(out.task / heads);
  out.head = int(out.task % heads);
  out.is_key = out.head >= p.num_heads;
  out.column =
      out.is_key ? p.k_column + std::int64_t(out.head - p.num_heads) * p.head_dim : std::int64_t(out.head) * p.head_dim;
  return true;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) qk_norm_rope_forward_kernel(QkNormRopeParams p, T* qkv) {
  __shared__ float rows[kWarps][kMaxHeadDimHere];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  HeadTask t;
  if (!head_task(p, t)) return;
  const std::int64_t task = t.task;
  const int token = t.token;
  const bool is_key = t.is_key;
  T* data = qkv + token * p.row_stride + t.column;
  float* row = rows[warp];
  for (int c = lane; c < p.head_dim; c += 32) row[c] = to_float(data[c]);
  __syncwarp();
  if (p.norm != QkNorm::none) {
    float squares = 0.0f;
    for (int c = lane; c < p.head_dim; c += 32) squares += row[c] * row[c];
    squares = warp_sum(squares);
    const float inverse = 1.0f / sqrtf(squares / float(p.head_dim) + p.norm_eps);
    const float* weight = is_key ? p.k_norm_weight : p.q_norm_weight;
    for (int c = lane; c < p.head_dim; c += 32) {
      const float normalised = row[c] * inverse;
      p.normalised[task * p.head_dim + c] = normalised;
      row[c] = normalised * norm_factor(p, weight, c);
    }
    if (lane == 0) p.inverse_rms[task] = inverse;
    __syncwarp();
  }
  if (p.rotary_dim > 0) rotate(p, row, token, 1.0f);
  for (int c = lane; c < p.head_dim; c += 32) data[c] = from_float<T>(row[c]);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    qk_norm_rope_backward_kernel(QkNormRopeParams p, const float* d_q, std::int64_t d_q_stride, T* d_qkv,
                                 float* d_q_norm, float* d_k_norm) {
  __shared__ float rows[kWarps][kMaxHeadDimHere];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  HeadTask t;
  if (!head_task(p, t)) return;
  const std::int64_t task = t.task;
  const int token = t.token, head = t.head;
  const bool is_key = t.is_key;
  T* out = d_qkv + token * p.row_stride + t.column;
  float* row = rows[warp];
  for (int c = lane; c < p.head_dim; c += 32) {
    row[c] = is_key ? to_float(out[c]) : d_q[token * d_q_stride + head * p.head_dim + c];
  }
  __syncwarp();
  if (p.rotary_dim > 0) rotate(p, row, token, -1.0f);
  if (p.norm != QkNorm::none) {
    const float* weight = is_key ? p.k_norm_weight : p.q_norm_weight;
    float* d_weight = is_key ? d_k_norm : d_q_norm;
    const float* normalised = p.normalised + task * p.head_dim;
    float dot = 0.0f;  // sum_c (dy_c * factor_c) * n_c
    for (int c = lane; c < p.head_dim; c += 32) {
      atomicAdd(d_weight + c, row[c] * normalised[c]);
      row[c] *= norm_factor(p, weight, c);
      dot += row[c] * normalised[c];
    }
    const float mean = warp_sum(dot) / float(p.head_dim);
    const float inverse = p.inverse_rms[task];
    for (int c = lane; c < p.head_dim; c += 32) row[c] = inverse * (row[c] - mean * normalised[c]);
    __syncwarp();
  }
  for (int c = lane; c < p.head_dim; c += 32) out[c] = from_float<T>(row[c]);
}

int blocks_for(const QkNormRopeParams& p) {
  const std::int64_t tasks = std::int64_t(p.tokens) * (p.num_heads + p.num_kv_heads);
  return int((tasks + kWarps - 1) / kWarps);
}

void check(const QkNormRopeParams& p) {
  if (p.head_dim > kMaxHeadDimHere || p.rotary_dim > p.head_dim || p.rotary_dim % 2 != 0) {
    throw std::invalid_argument("qk_norm_rope: head_dim must be <= 256 and rotary_dim even and <= head_dim");
  }
}

}  // namespace

void qk_norm_rope_forward(const QkNormRopeParams& params, Precision type, void* qkv, cudaStream_t stream) {
  check(params);
  if (params.tokens == 0) return;
  switch (type) {
    case Precision::fp32:
      qk_norm_rope_forward_kernel<float><<<blocks_for(params), kThreads, 0, stream>>>(params, static_cast<float*>(qkv));
      break;
    case Precision::bf16:
      qk_norm_rope_forward_kernel<__nv_bfloat16>
          <<<blocks_for(params), kThreads, 0, stream>>>(params, static_cast<__nv_bfloat16*>(qkv));
      break;
    case Precision::fp16:
      qk_norm_rope_forward_kernel<__half>
          <<<blocks_for(params), kThreads, 0, stream>>>(params, static_cast<__half*>(qkv));
      break;
    case Precision::fp64:
      throw std::invalid_argument("qk_norm_rope_forward: fp32, bf16 or fp16 only");
  }
  check_cuda(cudaGetLastError(), "qk_norm_rope_forward: launch");
}

void qk_norm_rope_backward(const QkNormRopeParams& params, Precision type, const float* d_q, std::int64_t d_q_stride,
                           void* d_qkv, float* d_q_norm, float* d_k_norm, cudaStream_t stream) {
  check(params);
  if (params.tokens == 0) return;
  switch (type) {
    case Precision::fp32:
      qk_norm_rope_backward_kernel<float><<<blocks_for(params), kThreads, 0, stream>>>(
          params, d_q, d_q_stride, static_cast<float*>(d_qkv), d_q_norm, d_k_norm);
      break;
    case Precision::bf16:
      qk_norm_rope_backward_kernel<__nv_bfloat16><<<blocks_for(params), kThreads, 0, stream>>>(
          params, d_q, d_q_stride, static_cast<__nv_bfloat16*>(d_qkv), d_q_norm, d_k_norm);
      break;
    case Precision::fp16:
      qk_norm_rope_backward_kernel<__half><<<blocks_for(params), kThreads, 0, stream>>>(
          params, d_q, d_q_stride, static_cast<__half*>(d_qkv), d_q_norm, d_k_norm);
      break;
    case Precision::fp64:
      throw std::invalid_argument("qk_norm_rope_backward: fp32, bf16 or fp16 only");
  }
  check_cuda(cudaGetLastError(), "qk_norm_rope_backward: launch");
}

}  // namespace attncheck::cuda_impl
