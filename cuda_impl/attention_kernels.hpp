// Host entry points of the attention kernels (cuda_impl/*.cu). Every buffer in AttentionParams is a
// device pointer with the layout written there; the calls are asynchronous on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_impl/attention_params.hpp"
#include "cuda_impl/device_buffer.hpp"
#include "cuda_impl/head_dim_dispatch.hpp"

namespace attncheck::cuda_impl {

// o and lse from q, k, v.
void flash_forward(const AttentionParams& params, cudaStream_t stream);
// The same output for a decode step (seq_q small, seq_k a long cache): split-KV partial softmaxes and
// a combining pass (flash_decode.cu). The workspace holds the partials; it grows as needed and may be
// reused by later calls on the same stream.
struct DecodeWorkspace {
  DeviceBuffer<float> partial_o;    // [batch, num_heads, seq_q, splits, head_dim]
  DeviceBuffer<float> partial_max;  // [batch, num_heads, seq_q, splits]
  DeviceBuffer<float> partial_sum;  // [batch, num_heads, seq_q, splits]
};
void flash_decode(const AttentionParams& params, DecodeWorkspace& workspace, cudaStream_t stream);
// d_row = rowsum(d_o * o), then d_q (accumulated into, float), d_k and d_v (overwritten) from q, k, v,
// o, d_o and the forward's lse. d_k / d_v hold each KV head's gradient summed over its group; with
// sinks, d_sinks (accumulated into) their gradient.
void flash_backward(const AttentionParams& params, cudaStream_t stream);

// Throws std::invalid_argument naming the first inconsistent field (dimensions, group size, strides,
// missing buffers); UnsupportedHeadDim for a head_dim the kernels do not handle.
void validate_params(const AttentionParams& params, bool backward = false);

template <typename T>
struct ElementTag {
  using type = T;
};

// Calls f(ElementTag<T>{}) for a kernel's element type; `what` names the caller in the error for fp64,
// which no kernel stores.
template <typename F>
void dispatch_element(Precision type, const char* what, F&& f) {
  switch (type) {
    case Precision::fp32:
      return f(ElementTag<float>{});
    case Precision::bf16:
      return f(ElementTag<__nv_bfloat16>{});
    case Precision::fp16:
      return f(ElementTag<__half>{});
    case Precision::fp64:
      break;
  }
  throw std::invalid_argument(std::string(what) + ": fp32, bf16 or fp16 only");
}

// Calls f(ElementTag<T>{}, HeadDimTag<...>{}) for the params' element type and head_dim. fp32 runs on
// CUDA cores, where a fixed width gains little: it always takes the generic tile, which keeps the
// number of instantiations (and nvcc's time on CI's two cores) down.
template <typename F>
void dispatch_element_and_head_dim(const AttentionParams& params, F&& f) {
  switch (params.precision) {
    case Precision::fp32:
      if (params.head_dim < 2 || params.head_dim > kMaxHeadDim || params.head_dim % 2 != 0) {
        throw UnsupportedHeadDim(params.head_dim);
      }
      return f(ElementTag<float>{}, HeadDimTag<kGenericCapacity, false>{});
    case Precision::bf16:
      return dispatch_head_dim(params.head_dim, [&](auto tag) { f(ElementTag<__nv_bfloat16>{}, tag); });
    case Precision::fp16:
      return dispatch_head_dim(params.head_dim, [&](auto tag) { f(ElementTag<__half>{}, tag); });
    case Precision::fp64:
      break;
  }
  throw std::invalid_argument("AttentionParams.precision: " + std::string(to_string(params.precision)) +
                              " is not fp32, bf16 or fp16");
}

}  // namespace attncheck::cuda_impl
