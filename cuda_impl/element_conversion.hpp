// Element conversions shared by kernels and host code (cuda_bf16.h / cuda_fp16.h define them for
// both): fp32 accumulation everywhere, results rounded to nearest even.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda_impl/host_device.hpp"

namespace attncheck::cuda_impl {

template <typename T>
ATTNCHECK_HOST_DEVICE float to_float(T value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half2float(value);
  } else {
    return __bfloat162float(value);
  }
}

template <typename T>
ATTNCHECK_HOST_DEVICE T from_float(float value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(value);
  } else {
    return __float2bfloat16_rn(value);
  }
}

}  // namespace attncheck::cuda_impl
