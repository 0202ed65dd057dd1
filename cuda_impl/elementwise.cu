// Small elementwise kernels of the layer: bias broadcast, column sums (bias gradients), rounding.
#include <cuda_runtime.h>

#include <stdexcept>

#include "cuda_impl/attention_kernels.hpp"
#include "cuda_impl/cuda_check.hpp"
#include "cuda_impl/device_math.cuh"
#include "cuda_impl/kernel_config.hpp"
#include "cuda_impl/layer_kernels.hpp"

namespace attncheck::cuda_impl {
namespace {

int grid_for(std::int64_t count) {
  return int(std::min<std::int64_t>((count + kThreads - 1) / kThreads, 65535));
}

template <typename T>
__global__ void add_bias_kernel(T* matrix, std::int64_t rows, std::int64_t columns, std::int64_t ld,
                                const float* bias) {
  for (std::int64_t index = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; index < rows * columns;
       index += std::int64_t(gridDim.x) * blockDim.x) {
    T& value = matrix[index / columns * ld + index % columns];
    value = from_float<T>(to_float(value) + bias[index % columns]);
  }
}

// One thread per column, rows summed in order (deterministic).
template <typename T>
__global__ void column_sums_kernel(const T* matrix, std::int64_t rows, std::int64_t columns, std::int64_t ld,
                                   float* sums) {
  for (std::int64_t column = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; column < columns;
       column += std::int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (std::int64_t row = 0; row < rows; ++row) sum += to_float(matrix[row * ld + column]);
    sums[column] = sum;
  }
}

template <typename T>
__global__ void round_kernel(const float* input, T* output, std::int64_t count) {
  for (std::int64_t index = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; index < count;
       index += std::int64_t(gridDim.x) * blockDim.x) {
    output[index] = from_float<T>(input[index]);
  }
}

}  // namespace

void add_bias(Precision type, void* matrix, std::int64_t rows, std::int64_t columns, std::int64_t ld, const float* bias,
              cudaStream_t stream) {
  if (rows * columns == 0) return;
  dispatch_element(type, "elementwise kernels", [&](auto tag) {
    using T = typename decltype(tag)::type;
    add_bias_kernel<T>
        <<<grid_for(rows * columns), kThreads, 0, stream>>>(static_cast<T*>(matrix), rows, columns, ld, bias);
  });
  check_cuda(cudaGetLastError(), "add_bias: launch");
}

void column_sums(Precision type, const void* matrix, std::int64_t rows, std::int64_t columns, std::int64_t ld,
                 float* sums, cudaStream_t stream) {
  if (columns == 0) return;
  dispatch_element(type, "elementwise kernels", [&](auto tag) {
    using T = typename decltype(tag)::type;
    column_sums_kernel<T>
        <<<grid_for(columns), kThreads, 0, stream>>>(static_cast<const T*>(matrix), rows, columns, ld, sums);
  });
  check_cuda(cudaGetLastError(), "column_sums: launch");
}

void round_to(Precision type, const float* input, void* output, std::int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  dispatch_element(type, "elementwise kernels", [&](auto tag) {
    using T = typename decltype(tag)::type;
    round_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(input, static_cast<T*>(output), count);
  });
  check_cuda(cudaGetLastError(), "round_to: launch");
}

}  // namespace attncheck::cuda_impl
