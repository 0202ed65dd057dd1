// Flash-style attention backward (FA2's order): one block per (key tile, KV head, batch row) walks the
// query tiles of every query head in the KV head's group, recomputing the probabilities from the
// forward's log-sum-exp, so dK and dV are summed over the group in shared memory with no atomics and
// no repeated KV in memory; dQ is accumulated into a float buffer with atomicAdd.
//
// Version 1, like flash_forward.cu: tiles and accumulators in shared memory, products via block_mma.
// Per (query tile, key tile): S = Q K^T, dP = dO V^T, then elementwise P = exp(capped(S) - lse) and
// dS = P (dP - D) (1 - tanh^2 when softcapped) scale; dV += P^T dO, dK += dS^T Q, dQ += dS K.
// With sinks the forward's lse includes them, so P is already right; d sink_h = -sum exp(s_h - lse) D is
// summed over rows while D is computed (backward_row_dot_kernel).
#include <cuda_runtime.h>

#include <cmath>

#include "cuda_impl/attention_kernels.hpp"
#include "cuda_impl/cuda_check.hpp"
#include "cuda_impl/device_math.cuh"
#include "cuda_impl/head_dim_dispatch.hpp"
#include "cuda_impl/kernel_config.hpp"
#include "cuda_impl/softmax_math.hpp"
#include "cuda_impl/tile_schedule.hpp"

namespace attncheck::cuda_impl {
namespace {

// d_row[b, h, i] = sum_c d_o[b, i, h, c] * o[b, i, h, c]; one warp per row; and the sinks' gradient.
template <typename T>
__global__ void __launch_bounds__(kThreads) backward_row_dot_kernel(AttentionParams p) {
  const int warps = blockDim.x / 32, lane = threadIdx.x % 32;
  const std::int64_t rows = std::int64_t(p.batch) * p.num_heads * p.seq_q;
  for (std::int64_t row = std::int64_t(blockIdx.x) * warps + threadIdx.x / 32; row < rows;
       row += std::int64_t(gridDim.x) * warps) {
    const int query = int(row % p.seq_q);
    const int head = int(row / p.seq_q % p.num_heads);
    const int batch = int(row / p.seq_q / p.num_heads);
    const std::int64_t offset = batch * p.o_batch_stride + query * p.o_row_stride + std::int64_t(head) * p.head_dim;
    const T* o = static_cast<const T*>(p.o) + offset;
    const T* d_o = static_cast<const T*>(p.d_o) + offset;
    float sum = 0.0f;
    for (int column = lane; column < p.head_dim; column += 32) sum += to_float(o[column]) * to_float(d_o[column]);
    sum = warp_sum(sum);
    if (lane == 0) {
      p.d_row[row] = sum;
      // The sink's gradient needs only the row's lse and D (softmax_math.hpp: sink_gradient_term).
      if (p.sinks != nullptr) atomicAdd(p.d_sinks + head, sink_gradient_term(p.sinks[head], p.lse[row], sum));
    }
  }
}

template <typename T, int Capacity, bool Exact>
__global__ void __launch_bounds__(kThreads) flash_backward_kernel(AttentionParams p) {
  constexpr BackwardTiles tiles = backward_tiles(sizeof(T), Capacity);
  constexpr int block_q = tiles.block_q, block_k = tiles.block_k;
  const int head_dim = Exact ? Capacity : p.head_dim;
  const int columns = Exact ? Capacity : padded_to_chunks(head_dim);
  const int key_tile = blockIdx.x, kv_head = blockIdx.y, batch = blockIdx.z;
  const int key_begin = key_tile * block_k;
  const int key_end = min_of(key_begin + block_k, p.seq_k);

  // Shared memory (kernel_config.hpp: backward_shared_bytes):
  //   k_tile, v_tile [block_k][Capacity] T; d_k_acc, d_v_acc [block_k][Capacity] float;
  //   q_tile, d_o_tile [block_q][Capacity] T; scores, d_p [block_q][block_k] float;
  //   probabilities, d_s [block_q][block_k] T; d_q_tile [block_q][Capacity] float; lse, d_row [block_q]
  extern __shared__ __align__(128) unsigned char shared[];
  T* k_tile = reinterpret_cast<T*>(shared);
  T* v_tile = k_tile + block_k * Capacity;
  float* d_k_acc = reinterpret_cast<float*>(v_tile + block_k * Capacity);
  float* d_v_acc = d_k_acc + block_k * Capacity;
  T* q_tile = reinterpret_cast<T*>(d_v_acc + block_k * Capacity);
  T* d_o_tile = q_tile + block_q * Capacity;
  float* scores = reinterpret_cast<float*>(d_o_tile + block_q * Capacity);
  float* d_p = scores + block_q * block_k;
  T* probabilities = reinterpret_cast<T*>(d_p + block_q * block_k);
  T* d_s = probabilities + block_q * block_k;
  float* d_q_tile = reinterpret_cast<float*>(d_s + block_q * block_k);
  float* lse_rows = d_q_tile + block_q * Capacity;
  float* d_row_rows = lse_rows + block_q;

  const std::int64_t kv_offset = batch * p.kv_batch_stride + std::int64_t(kv_head) * head_dim;
  load_tile<T, Capacity>(k_tile, static_cast<const T*>(p.k) + kv_offset, p.kv_row_stride, key_begin, key_end, block_k,
                         head_dim);
  load_tile<T, Capacity>(v_tile, static_cast<const T*>(p.v) + kv_offset, p.kv_row_stride, key_begin, key_end, block_k,
                         head_dim);
  for (int index = threadIdx.x; index < block_k * Capacity; index += blockDim.x) {
    d_k_acc[index] = 0.0f;
    d_v_acc[index] = 0.0f;
  }
  __syncthreads();

  const MaskShape mask = mask_for_row(p, batch);
  const int first_head = first_query_head_of(kv_head, p.group_size);
  for (int head = first_head; head < first_head + p.group_size; ++head) {
    const std::int64_t q_offset = batch * p.q_batch_stride + std::int64_t(head) * head_dim;
    const std::int64_t o_offset = batch * p.o_batch_stride + std::int64_t(head) * head_dim;
    const std::int64_t row_offset = (std::int64_t(batch) * p.num_heads + head) * p.seq_q;
    for (int query_begin = 0; query_begin < p.seq_q; query_begin += block_q) {
      const int query_end = min_of(query_begin + block_q, p.seq_q);
      if (classify_tile(mask, query_begin, query_end, key_begin, key_end) == TileKind::skip) continue;
      load_tile<T, Capacity>(q_tile, static_cast<const T*>(p.q) + q_offset, p.q_row_stride, query_begin, query_end,
                             block_q, head_dim);
      load_tile<T, Capacity>(d_o_tile, static_cast<const T*>(p.d_o) + o_offset, p.o_row_stride, query_begin, query_end,
                             block_q, head_dim);
      for (int row = threadIdx.x; row < block_q; row += blockDim.x) {
        const bool valid = query_begin + row < query_end;
        lse_rows[row] = valid ? p.lse[row_offset + query_begin + row] : -INFINITY;
        d_row_rows[row] = valid ? p.d_row[row_offset + query_begin + row] : 0.0f;
      }
      __syncthreads();
      block_mma<T, Layout::row_major, Layout::col_major>(q_tile, Capacity, k_tile, Capacity, scores, block_k, block_q,
                                                         block_k, columns, false);
      block_mma<T, Layout::row_major, Layout::col_major>(d_o_tile, Capacity, v_tile, Capacity, d_p, block_k, block_q,
                                                         block_k, columns, false);
      for (int index = threadIdx.x; index < block_q * block_k; index += blockDim.x) {
        const int row = index / block_k, column = index % block_k;
        const int query = query_begin + row, key = key_begin + column;
        float probability = 0.0f, d_score = 0.0f;
        if (query < query_end && lse_rows[row] != -INFINITY) {
          const KeyRange visible = visible_keys(mask, query);
          if (key >= visible.begin && key < visible.end) {
            float score = scores[index] * p.scale;
            float softcap_slope = 1.0f;
            if (p.softcap > 0.0f) {
              const float t = tanhf(score / p.softcap);
              score = p.softcap * t;
              softcap_slope = 1.0f - t * t;
            }
            probability = masked_exp(score, lse_rows[row]);  // lse is finite here
            d_score = probability * (d_p[index] - d_row_rows[row]) * softcap_slope * p.scale;
          }
        }
        probabilities[index] = from_float<T>(probability);
        d_s[index] = from_float<T>(d_score);
      }
      __syncthreads();
      // dV += P^T dO, dK += dS^T Q (P and dS read column-major as their transposes), dQ_tile = dS K.
      block_mma<T, Layout::col_major, Layout::row_major>(probabilities, block_k, d_o_tile, Capacity, d_v_acc, Capacity,
                                                         block_k, columns, block_q, true);
      block_mma<T, Layout::col_major, Layout::row_major>(d_s, block_k, q_tile, Capacity, d_k_acc, Capacity, block_k,
                                                         columns, block_q, true);
      block_mma<T, Layout::row_major, Layout::row_major>(d_s, block_k, k_tile, Capacity, d_q_tile, Capacity, block_q,
                                                         columns, block_k, false);
      for (int index = threadIdx.x; index < block_q * Capacity; index += blockDim.x) {
        const int row = index / Capacity, column = index % Capacity;
        const int query = query_begin + row;
        if (query < query_end && column < head_dim) {
          atomicAdd(p.d_q + o_offset + query * p.o_row_stride + column, d_q_tile[index]);
        }
      }
      __syncthreads();
    }
  }

  T* d_k = static_cast<T*>(p.d_k) + kv_offset;
  T* d_v = static_cast<T*>(p.d_v) + kv_offset;
  for (int index = threadIdx.x; index < block_k * Capacity; index += blockDim.x) {
    const int row = index / Capacity, column = index % Capacity;
    const int key = key_begin + row;
    if (key >= key_end || column >= head_dim) continue;
    d_k[key * p.kv_row_stride + column] = from_float<T>(d_k_acc[index]);
    d_v[key * p.kv_row_stride + column] = from_float<T>(d_v_acc[index]);
  }
}

template <typename T, int Capacity, bool Exact>
void launch_backward(const AttentionParams& p, cudaStream_t stream) {
  constexpr BackwardTiles tiles = backward_tiles(sizeof(T), Capacity);
  constexpr std::size_t shared_bytes = backward_shared_bytes(sizeof(T), Capacity);
  const std::int64_t rows = std::int64_t(p.batch) * p.num_heads * p.seq_q;
  const int row_blocks = int(std::min<std::int64_t>((rows + kThreads / 32 - 1) / (kThreads / 32), 65535));
  backward_row_dot_kernel<T><<<row_blocks, kThreads, 0, stream>>>(p);
  check_cuda(cudaGetLastError(), "flash_backward: row dot launch");
  const auto kernel = flash_backward_kernel<T, Capacity, Exact>;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)),
             "flash_backward: shared memory attribute");
  const dim3 grid(ceil_div(p.seq_k, tiles.block_k), p.num_kv_heads, p.batch);
  kernel<<<grid, kThreads, shared_bytes, stream>>>(p);
  check_cuda(cudaGetLastError(), "flash_backward: launch");
}

}  // namespace

void flash_backward(const AttentionParams& params, cudaStream_t stream) {
  validate_params(params, true);
  dispatch_element_and_head_dim(params, [&](auto element, auto tag) {
    using T = typename decltype(element)::type;
    launch_backward<T, decltype(tag)::capacity, decltype(tag)::exact>(params, stream);
  });
}

}  // namespace attncheck::cuda_impl
