// Flash-style attention forward (online softmax over key tiles, nothing seq_q x seq_k in memory).
// One block per (query tile, query head, batch row); GQA reads KV head h / group_size in place.
//
// Version 1 (this file): tiles staged in shared memory, Q K^T and P V through block_mma (tensor cores
// for bf16/fp16 via wmma, fp32 on CUDA cores), the output accumulator in shared memory so the online
// rescale needs no knowledge of fragment layouts. Simple enough to be written without a GPU to try it
// on; register-resident accumulators (mma.sync, FA2's layout) are the next version, once ci/gpu-check
// has run this one against the reference.
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

template <typename T, int Capacity, bool Exact>
__global__ void __launch_bounds__(kThreads) flash_forward_kernel(AttentionParams p) {
  constexpr ForwardTiles tiles = forward_tiles(sizeof(T), Capacity);
  constexpr int block_q = tiles.block_q, block_k = tiles.block_k;
  const int head_dim = Exact ? Capacity : p.head_dim;
  const int columns = Exact ? Capacity : padded_to_chunks(head_dim);  // columns the products cover
  const int query_tile = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = kv_head_of(head, p.group_size);
  const int query_begin = query_tile * block_q;
  const int query_end = min_of(query_begin + block_q, p.seq_q);

  // Shared memory (kernel_config.hpp: forward_shared_bytes):
  //   q_tile [block_q][Capacity] T, k_tile, v_tile [block_k][Capacity] T, scores [block_q][block_k] float,
  //   probabilities [block_q][block_k] T, accumulator [block_q][Capacity] float,
  //   row_max, row_sum, rescale [block_q] float
  extern __shared__ __align__(128) unsigned char shared[];
  T* q_tile = reinterpret_cast<T*>(shared);
  T* k_tile = q_tile + block_q * Capacity;
  T* v_tile = k_tile + block_k * Capacity;
  float* scores = reinterpret_cast<float*>(v_tile + block_k * Capacity);
  T* probabilities = reinterpret_cast<T*>(scores + block_q * block_k);
  float* accumulator = reinterpret_cast<float*>(probabilities + block_q * block_k);
  float* row_max = accumulator + block_q * Capacity;
  float* row_sum = row_max + block_q;
  float* rescale = row_sum + block_q;

  const T* q = static_cast<const T*>(p.q) + batch * p.q_batch_stride + head * head_dim;
  const T* k = static_cast<const T*>(p.k) + batch * p.kv_batch_stride + kv_head * head_dim;
  const T* v = static_cast<const T*>(p.v) + batch * p.kv_batch_stride + kv_head * head_dim;
  load_tile<T, Capacity>(q_tile, q, p.q_row_stride, query_begin, query_end, block_q, head_dim);
  for (int index = threadIdx.x; index < block_q * Capacity; index += blockDim.x) accumulator[index] = 0.0f;
  const RowStart start = row_start(p.sinks, head);  // the sink, if any, counted before any key
  for (int row = threadIdx.x; row < block_q; row += blockDim.x) {
    row_max[row] = start.max;
    row_sum[row] = start.sum;
  }
  __syncthreads();

  const MaskShape mask = mask_for_row(p, batch);
  const TileRange key_range = key_tiles(mask, query_begin, query_end, block_k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int key_tile = key_range.first; key_tile < key_range.last; ++key_tile) {
    const int key_begin = key_tile * block_k;
    const int key_end = min_of(key_begin + block_k, p.seq_k);
    if (classify_tile(mask, query_begin, query_end, key_begin, key_end) == TileKind::skip) continue;
    load_tile<T, Capacity>(k_tile, k, p.kv_row_stride, key_begin, key_end, block_k, head_dim);
    load_tile<T, Capacity>(v_tile, v, p.kv_row_stride, key_begin, key_end, block_k, head_dim);
    __syncthreads();
    // scores = Q K^T (K^T is k_tile read column-major).
    block_mma<T, Layout::row_major, Layout::col_major>(q_tile, Capacity, k_tile, Capacity, scores, block_k, block_q,
                                                       block_k, columns, false);
    // Online softmax, one warp per row: scale, softcap, mask, new running max, probabilities.
    for (int row = warp; row < block_q; row += warps) {
      const int query = query_begin + row;
      if (query >= query_end) {
        for (int column = lane; column < block_k; column += 32)
          probabilities[row * block_k + column] = from_float<T>(0.0f);
        if (lane == 0) rescale[row] = 1.0f;
        continue;
      }
      const KeyRange visible = visible_keys(mask, query);
      float tile_max = -INFINITY;
      for (int column = lane; column < block_k; column += 32) {
        const int key = key_begin + column;
        float score = scores[row * block_k + column] * p.scale;
        if (p.softcap > 0.0f) score = p.softcap * tanhf(score / p.softcap);
        score = key >= visible.begin && key < visible.end ? score : -INFINITY;
        scores[row * block_k + column] = score;
        tile_max = fmaxf(tile_max, score);
      }
      tile_max = warp_max(tile_max);
      const float old_max = row_max[row];
      const float new_max = fmaxf(old_max, tile_max);
      float tile_sum = 0.0f;
      for (int column = lane; column < block_k; column += 32) {
        const float score = scores[row * block_k + column];
        const T probability = from_float<T>(masked_exp(score, new_max));
        probabilities[row * block_k + column] = probability;
        tile_sum += to_float(probability);  // the P that multiplies V, so O / sum averages exactly it
      }
      tile_sum = warp_sum(tile_sum);
      __syncwarp();
      if (lane == 0) {
        rescale[row] = rescale_factor(old_max, new_max);
        row_sum[row] = row_sum[row] * rescale[row] + tile_sum;
        row_max[row] = new_max;
      }
    }
    __syncthreads();
    for (int index = threadIdx.x; index < block_q * Capacity; index += blockDim.x) {
      accumulator[index] *= rescale[index / Capacity];
    }
    __syncthreads();
    // accumulator += P V
    block_mma<T, Layout::row_major, Layout::row_major>(probabilities, block_k, v_tile, Capacity, accumulator, Capacity,
                                                       block_q, columns, block_k, true);
  }

  T* o = static_cast<T*>(p.o) + batch * p.o_batch_stride + head * head_dim;
  for (int index = threadIdx.x; index < block_q * Capacity; index += blockDim.x) {
    const int row = index / Capacity, column = index % Capacity;
    const int query = query_begin + row;
    if (query >= query_end || column >= head_dim) continue;
    const float sum = row_sum[row];
    o[query * p.o_row_stride + column] = from_float<T>(sum > 0.0f ? accumulator[index] / sum : 0.0f);
  }
  if (p.lse != nullptr) {
    for (int row = threadIdx.x; row < query_end - query_begin; row += blockDim.x) {
      const float sum = row_sum[row];
      p.lse[(std::int64_t(batch) * p.num_heads + head) * p.seq_q + query_begin + row] = log_sum_exp(row_max[row], sum);
    }
  }
}

template <typename T, int Capacity, bool Exact>
void launch_forward(const AttentionParams& p, cudaStream_t stream) {
  constexpr ForwardTiles tiles = forward_tiles(sizeof(T), Capacity);
  constexpr std::size_t shared_bytes = forward_shared_bytes(sizeof(T), Capacity);
  const auto kernel = flash_forward_kernel<T, Capacity, Exact>;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)),
             "flash_forward: shared memory attribute");
  const dim3 grid(ceil_div(p.seq_q, tiles.block_q), p.num_heads, p.batch);
  kernel<<<grid, kThreads, shared_bytes, stream>>>(p);
  check_cuda(cudaGetLastError(), "flash_forward: launch");
}

}  // namespace

void flash_forward(const AttentionParams& params, cudaStream_t stream) {
  validate_params(params);
  dispatch_element_and_head_dim(params, [&](auto element, auto tag) {
    using T = typename decltype(element)::type;
    launch_forward<T, decltype(tag)::capacity, decltype(tag)::exact>(params, stream);
  });
}

}  // namespace attncheck::cuda_impl
