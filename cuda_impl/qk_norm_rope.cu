// QK-norm and RoPE, fused and in place: one warp per (token, head), the head's row staged in shared
// memory in float. Angles come from a cos/sin table the host computes in fp64 (cuda_layer.cpp): at
// positions near 2^20, a float angle would be off by ~0.03 rad.
// The whole-width norm (rms_full_width) takes each token's sums over the width from the caller, all
// ranks' parts all-reduced, so it adds two per-token reductions (one warp per token, channels in order:
// deterministic) and splits the backward in two around the second all-reduce; qk_norm_math.hpp holds
// its arithmetic.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda_impl/attention_kernels.hpp"
#include "cuda_impl/cuda_check.hpp"
#include "cuda_impl/device_math.cuh"
#include "cuda_impl/kernel_config.hpp"
#include "cuda_impl/layer_kernels.hpp"
#include "cuda_impl/qk_norm_math.hpp"
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

// A head's norm weights: per-head norms share one [head_dim] weight; a whole-width weight has an entry
// per local channel, so the head's run starts at its first local Q (or K) channel.
__device__ __forceinline__ const float* norm_weight(const QkNormRopeParams& p, const HeadTask& t) {
  const float* weight = t.is_key ? p.k_norm_weight : p.q_norm_weight;
  if (p.norm != QkNorm::rms_full_width) return weight;
  return weight + (t.is_key ? t.column - p.k_column : t.column);
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
    float inverse;
    if (p.norm == QkNorm::rms_full_width) {  // the token's all-reduced sum over the whole width
      inverse = is_key ? inverse_rms_from_sum(p.k_sum_squares[token], p.k_norm_width, p.norm_eps)
                       : inverse_rms_from_sum(p.q_sum_squares[token], p.q_norm_width, p.norm_eps);
    } else {  // per head: the warp's own sum
      float squares = 0.0f;
      for (int c = lane; c < p.head_dim; c += 32) squares += row[c] * row[c];
      squares = warp_sum(squares);
      inverse = inverse_rms_from_sum(squares, p.head_dim, p.norm_eps);
    }
    const float* weight = norm_weight(p, t);
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

// rms_full_width, step 1: one warp per token, its Q columns then (count_keys) its K columns in order.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    full_width_sum_squares_kernel(QkNormRopeParams p, const T* qkv, bool count_keys, float* q_sums, float* k_sums) {
  const int lane = threadIdx.x % 32;
  const std::int64_t token = std::int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (token >= p.tokens) return;  // whole warps only
  const T* row = qkv + token * p.row_stride;
  const int q_width = p.num_heads * p.head_dim, k_width = p.num_kv_heads * p.head_dim;
  float q_squares = 0.0f, k_squares = 0.0f;
  for (int c = lane; c < q_width; c += 32) {
    const float value = to_float(row[c]);
    q_squares += value * value;
  }
  if (count_keys) {
    for (int c = lane; c < k_width; c += 32) {
      const float value = to_float(row[p.k_column + c]);
      k_squares += value * value;
    }
  }
  q_squares = warp_sum(q_squares);
  k_squares = warp_sum(k_squares);
  if (lane == 0) {
    q_sums[token] = q_squares;
    k_sums[token] = k_squares;
  }
}

// rms_full_width, step 2: one warp per token, its heads in turn through the warp's shared row (rotated
// back there), so that its dots are summed in one order.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    full_width_dots_kernel(QkNormRopeParams p, const float* d_q, std::int64_t d_q_stride, const T* d_qkv,
                           float* unrotated, float* q_dots, float* k_dots, float* d_q_norm, float* d_k_norm) {
  __shared__ float rows[kWarps][kMaxHeadDimHere];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t token_index = std::int64_t(blockIdx.x) * kWarps + warp;
  if (token_index >= p.tokens) return;  // whole warps only
  const int token = int(token_index);
  const int heads = p.num_heads + p.num_kv_heads;
  float* row = rows[warp];
  float q_dot = 0.0f, k_dot = 0.0f;  // this lane's part of sum_c dn_c * n_c
  for (int head = 0; head < heads; ++head) {
    const bool is_key = head >= p.num_heads;
    // The head's first local channel of q (or k): its weights' index, and its column in d_q.
    const std::int64_t channel = std::int64_t(is_key ? head - p.num_heads : head) * p.head_dim;
    for (int c = lane; c < p.head_dim; c += 32) {
      row[c] = is_key ? to_float(d_qkv[token_index * p.row_stride + p.k_column + channel + c])
                      : d_q[token_index * d_q_stride + channel + c];
    }
    __syncwarp();
    if (p.rotary_dim > 0) rotate(p, row, token, -1.0f);
    const std::int64_t task = token_index * heads + head;
    const float* normalised = p.normalised + task * p.head_dim;
    const float* weight = (is_key ? p.k_norm_weight : p.q_norm_weight) + channel;
    float* d_weight = (is_key ? d_k_norm : d_q_norm) + channel;
    float dot = 0.0f;
    for (int c = lane; c < p.head_dim; c += 32) {
      unrotated[task * p.head_dim + c] = row[c];
      atomicAdd(d_weight + c, row[c] * normalised[c]);
      dot += row[c] * weight[c] * normalised[c];
    }
    (is_key ? k_dot : q_dot) += dot;
    __syncwarp();  // before the next head overwrites the row
  }
  q_dot = warp_sum(q_dot);
  k_dot = warp_sum(k_dot);
  if (lane == 0) {
    q_dots[token] = q_dot;
    k_dots[token] = k_dot;
  }
}

// rms_full_width, step 3: one warp per (token, head), elementwise given the token's all-reduced dot.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    full_width_backward_kernel(QkNormRopeParams p, const float* unrotated, const float* q_dots, const float* k_dots,
                               bool subtract_key_dot_term, T* d_qkv) {
  const int lane = threadIdx.x % 32;
  HeadTask t;
  if (!head_task(p, t)) return;
  const float* weight = norm_weight(p, t);
  const float* d_y = unrotated + t.task * p.head_dim;
  const float* normalised = p.normalised + t.task * p.head_dim;
  const float inverse = p.inverse_rms[t.task];
  const float dot = t.is_key ? k_dots[t.token] : q_dots[t.token];
  const int width = t.is_key ? p.k_norm_width : p.q_norm_width;
  const bool subtract = !t.is_key || subtract_key_dot_term;
  T* out = d_qkv + t.token * p.row_stride + t.column;
  for (int c = lane; c < p.head_dim; c += 32) {
    out[c] = from_float<T>(full_width_input_gradient(d_y[c] * weight[c], normalised[c], inverse, dot, width, subtract));
  }
}

int blocks_for(const QkNormRopeParams& p) {
  const std::int64_t tasks = std::int64_t(p.tokens) * (p.num_heads + p.num_kv_heads);
  return int((tasks + kWarps - 1) / kWarps);
}

int blocks_per_token(const QkNormRopeParams& p) {
  return int((std::int64_t(p.tokens) + kWarps - 1) / kWarps);
}

void check(const QkNormRopeParams& p) {
  if (p.head_dim > kMaxHeadDimHere || p.rotary_dim > p.head_dim || p.rotary_dim % 2 != 0) {
    throw std::invalid_argument("qk_norm_rope: head_dim must be <= 256 and rotary_dim even and <= head_dim");
  }
  if (p.norm == QkNorm::rms_full_width &&
      (p.q_norm_width <= 0 || p.k_norm_width <= 0 || p.q_norm_weight == nullptr || p.k_norm_weight == nullptr)) {
    throw std::invalid_argument("qk_norm_rope: rms_full_width needs the whole widths and the norm weights");
  }
}

void check_full_width(const QkNormRopeParams& p, const char* what) {
  check(p);
  if (p.norm != QkNorm::rms_full_width) {
    throw std::invalid_argument(std::string(what) + ": for the whole-width norm (rms_full_width) only");
  }
}

}  // namespace

void qk_norm_rope_forward(const QkNormRopeParams& params, Precision type, void* qkv, cudaStream_t stream) {
  check(params);
  if (params.norm == QkNorm::rms_full_width && (params.q_sum_squares == nullptr || params.k_sum_squares == nullptr)) {
    throw std::invalid_argument("qk_norm_rope_forward: rms_full_width needs the all-reduced sums of squares");
  }
  if (params.tokens == 0) return;
  dispatch_element(type, "qk_norm_rope_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    qk_norm_rope_forward_kernel<T><<<blocks_for(params), kThreads, 0, stream>>>(params, static_cast<T*>(qkv));
  });
  check_cuda(cudaGetLastError(), "qk_norm_rope_forward: launch");
}

void qk_norm_rope_backward(const QkNormRopeParams& params, Precision type, const float* d_q, std::int64_t d_q_stride,
                           void* d_qkv, float* d_q_norm, float* d_k_norm, cudaStream_t stream) {
  check(params);
  if (params.norm == QkNorm::rms_full_width) {
    throw std::invalid_argument(
        "qk_norm_rope_backward: the whole-width norm's backward is qk_norm_full_width_dots, "
        "an all-reduce, then qk_norm_full_width_backward");
  }
  if (params.tokens == 0) return;
  dispatch_element(type, "qk_norm_rope_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    qk_norm_rope_backward_kernel<T><<<blocks_for(params), kThreads, 0, stream>>>(
        params, d_q, d_q_stride, static_cast<T*>(d_qkv), d_q_norm, d_k_norm);
  });
  check_cuda(cudaGetLastError(), "qk_norm_rope_backward: launch");
}

void qk_norm_full_width_sum_squares(const QkNormRopeParams& params, Precision type, const void* qkv, bool count_keys,
                                    float* q_sums, float* k_sums, cudaStream_t stream) {
  check_full_width(params, "qk_norm_full_width_sum_squares");
  if (params.tokens == 0) return;
  dispatch_element(type, "qk_norm_full_width_sum_squares", [&](auto tag) {
    using T = typename decltype(tag)::type;
    full_width_sum_squares_kernel<T><<<blocks_per_token(params), kThreads, 0, stream>>>(
        params, static_cast<const T*>(qkv), count_keys, q_sums, k_sums);
  });
  check_cuda(cudaGetLastError(), "qk_norm_full_width_sum_squares: launch");
}

void qk_norm_full_width_dots(const QkNormRopeParams& params, Precision type, const float* d_q, std::int64_t d_q_stride,
                             const void* d_qkv, float* unrotated, float* q_dots, float* k_dots, float* d_q_norm,
                             float* d_k_norm, cudaStream_t stream) {
  check_full_width(params, "qk_norm_full_width_dots");
  if (params.tokens == 0) return;
  dispatch_element(type, "qk_norm_full_width_dots", [&](auto tag) {
    using T = typename decltype(tag)::type;
    full_width_dots_kernel<T><<<blocks_per_token(params), kThreads, 0, stream>>>(
        params, d_q, d_q_stride, static_cast<const T*>(d_qkv), unrotated, q_dots, k_dots, d_q_norm, d_k_norm);
  });
  check_cuda(cudaGetLastError(), "qk_norm_full_width_dots: launch");
}

void qk_norm_full_width_backward(const QkNormRopeParams& params, Precision type, const float* unrotated,
                                 const float* q_dots, const float* k_dots, bool subtract_key_dot_term, void* d_qkv,
                                 cudaStream_t stream) {
  check_full_width(params, "qk_norm_full_width_backward");
  if (params.tokens == 0) return;
  dispatch_element(type, "qk_norm_full_width_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    full_width_backward_kernel<T><<<blocks_for(params), kThreads, 0, stream>>>(
        params, unrotated, q_dots, k_dots, subtract_key_dot_term, static_cast<T*>(d_qkv));
  });
  check_cuda(cudaGetLastError(), "qk_norm_full_width_backward: launch");
}

}  // namespace attncheck::cuda_impl
