// Device helpers shared by the kernels: warp reductions, and block_mma, the one place attncheck's own
// kernels use tensor cores.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <type_traits>

#include "cuda_impl/attention_params.hpp"
#include "cuda_impl/element_conversion.hpp"
#include "cuda_impl/tile_schedule.hpp"

namespace attncheck::cuda_impl {

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Rows [row_begin, row_begin + rows) of a [tokens, ...] buffer into a [rows][Capacity] tile; columns
// >= head_dim and rows past row_end are zero (they then add nothing to any product).
template <typename T, int Capacity>
__device__ void load_tile(T* tile, const T* source, std::int64_t row_stride, int row_begin, int row_end, int rows,
                          int head_dim) {
  for (int index = threadIdx.x; index < rows * Capacity; index += blockDim.x) {
    const int row = index / Capacity, column = index % Capacity;
    const int token = row_begin + row;
    tile[index] = token < row_end && column < head_dim ? source[token * row_stride + column] : from_float<T>(0.0f);
  }
}

// Batch row b's mask (reads key_lengths on the device).
__device__ __forceinline__ MaskShape mask_for_row(const AttentionParams& p, int batch) {
  return {.seq_q = p.seq_q,
          .seq_k = p.seq_k,
          .key_length = p.key_lengths != nullptr ? p.key_lengths[batch] : p.seq_k,
          .causal = p.causal,
          .window = p.window};
}

enum class Layout { row_major, col_major };

// C (+)= A B on shared memory, by the whole block (every thread calls it; it ends with a barrier).
//   A: m x k, A(i, j) = a[i * lda + j] (row_major) or a[j * lda + i] (col_major)
//   B: k x n, B(i, j) = b[i * ldb + j] (row_major) or b[j * ldb + i] (col_major)
//   C: m x n float, row-major, C(i, j) = c[i * ldc + j]
// m, n, k are multiples of 16; leading dimensions multiples of 16 elements and every operand 32-byte
// aligned (wmma's requirements). bf16 / fp16 run on tensor cores (wmma 16x16x16, fp32 accumulation);
// fp32 runs on CUDA cores in fp32 (tensor cores would round the inputs to TF32).
template <typename T, Layout LayoutA, Layout LayoutB>
__device__ void block_mma(const T* a, int lda, const T* b, int ldb, float* c, int ldc, int m, int n, int k,
                          bool accumulate) {
  if constexpr (std::is_same_v<T, float>) {
    for (int index = threadIdx.x; index < m * n; index += blockDim.x) {
      const int row = index / n, column = index % n;
      float sum = accumulate ? c[row * ldc + column] : 0.0f;
      for (int inner = 0; inner < k; ++inner) {
        const float a_value = LayoutA == Layout::row_major ? a[row * lda + inner] : a[inner * lda + row];
        const float b_value = LayoutB == Layout::row_major ? b[inner * ldb + column] : b[column * ldb + inner];
        sum = fmaf(a_value, b_value, sum);
      }
      c[row * ldc + column] = sum;
    }
  } else {
    namespace wmma = nvcuda::wmma;
    using LayoutTagA = std::conditional_t<LayoutA == Layout::row_major, wmma::row_major, wmma::col_major>;
    using LayoutTagB = std::conditional_t<LayoutB == Layout::row_major, wmma::row_major, wmma::col_major>;
    const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const int tiles_n = n / 16;
    for (int tile = warp; tile < (m / 16) * tiles_n; tile += warps) {
      const int tile_m = tile / tiles_n, tile_n = tile % tiles_n;
      float* c_tile = c + tile_m * 16 * ldc + tile_n * 16;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> accumulator;
      if (accumulate) {
        wmma::load_matrix_sync(accumulator, c_tile, ldc, wmma::mem_row_major);
      } else {
        wmma::fill_fragment(accumulator, 0.0f);
      }
      for (int inner = 0; inner < k; inner += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutTagA> a_fragment;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutTagB> b_fragment;
        const T* a_tile = LayoutA == Layout::row_major ? a + tile_m * 16 * lda + inner : a + inner * lda + tile_m * 16;
        const T* b_tile = LayoutB == Layout::row_major ? b + inner * ldb + tile_n * 16 : b + tile_n * 16 * ldb + inner;
        wmma::load_matrix_sync(a_fragment, a_tile, lda);
        wmma::load_matrix_sync(b_fragment, b_tile, ldb);
        wmma::mma_sync(accumulator, a_fragment, b_fragment, accumulator);
      }
      wmma::store_matrix_sync(c_tile, accumulator, ldc, wmma::mem_row_major);
    }
  }
  __syncthreads();
}

}  // namespace attncheck::cuda_impl
