// Split-KV decoding: a few query rows (a decode step's tokens times the group's query heads) against a
// long KV cache. The cache's keys are cut into pieces (decode_splits: about two waves of blocks), each
// block computing a partial softmax over its piece for up to kRowsPerBlock rows; a second kernel
// combines the pieces (FlashDecoding). Memory-bound: every query head of a group is a row of the same
// block, so K and V are read once per KV head while group_size x seq_q <= kRowsPerBlock (16), and once
// per block of 16 rows beyond that.
//
// Version 1: keys staged in shared memory as float, one key per lane for the scores, head_dim spread
// over lanes for the output; per-row running max / sum / output in registers.
#include <cuda_runtime.h>

#include <stdexcept>

#include <cmath>

#include "cuda_impl/attention_kernels.hpp"
#include "cuda_impl/cuda_check.hpp"
#include "cuda_impl/device_buffer.hpp"
#include "cuda_impl/device_math.cuh"
#include "cuda_impl/kernel_config.hpp"
#include "cuda_impl/softmax_math.hpp"
#include "cuda_impl/tile_schedule.hpp"

namespace attncheck::cuda_impl {
namespace {

constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 4;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kKeysPerChunk = 32;                    // one per lane
constexpr int kColumnsPerLane = kMaxHeadDim / 32;    // output columns lane, lane + 32, ...
constexpr int kChunkStride = kMaxHeadDim + 1;        // floats per staged key: +1 against bank conflicts
constexpr int kDecodeBlockKeys = 4 * kKeysPerChunk;  // keys per split granule
constexpr std::size_t kDecodeSharedBytes =
    sizeof(float) * (kRowsPerBlock * kMaxHeadDim + 2 * kKeysPerChunk * kChunkStride);
static_assert(kDecodeSharedBytes <= kMaxSharedBytes);

// Rows of KV head g: row = head_in_group * seq_q + query, head = g * group_size + head_in_group.
// Partials: partial_o [batch, num_heads, seq_q, splits, head_dim], partial_max / partial_sum
// [batch, num_heads, seq_q, splits] float.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    decode_partial_kernel(AttentionParams p, int splits, float* partial_o, float* partial_max, float* partial_sum) {
  // Shared memory (kDecodeSharedBytes, over the 48 KB static limit): queries [kRowsPerBlock][kMaxHeadDim],
  // keys and values [kKeysPerChunk][kChunkStride], all float.
  extern __shared__ __align__(16) float shared[];
  auto queries = reinterpret_cast<float(*)[kMaxHeadDim]>(shared);
  auto keys = reinterpret_cast<float(*)[kChunkStride]>(shared + kRowsPerBlock * kMaxHeadDim);
  auto values =
      reinterpret_cast<float(*)[kChunkStride]>(shared + kRowsPerBlock * kMaxHeadDim + kKeysPerChunk * kChunkStride);
  const int split = blockIdx.x, batch = blockIdx.z;
  const int row_blocks = ceil_div(p.group_size * p.seq_q, kRowsPerBlock);
  const int kv_head = blockIdx.y / row_blocks, first_row = blockIdx.y % row_blocks * kRowsPerBlock;
  const int rows = min_of(kRowsPerBlock, p.group_size * p.seq_q - first_row);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, d = p.head_dim;
  const MaskShape mask = mask_for_row(p, batch);

  for (int index = threadIdx.x; index < kRowsPerBlock * kMaxHeadDim; index += blockDim.x) {
    const int row = index / kMaxHeadDim, column = index % kMaxHeadDim;
    float value = 0.0f;
    if (row < rows && column < d) {
      const int global_row = first_row + row;
      const int head = first_query_head_of(kv_head, p.group_size) + global_row / p.seq_q;
      const int query = global_row % p.seq_q;
      value = to_float(static_cast<const T*>(
          p.q)[batch * p.q_batch_stride + query * p.q_row_stride + std::int64_t(head) * d + column]);
    }
    queries[row][column] = value;
  }
  // The piece of keys this block covers: the split of the keys any of its rows may see.
  const KeyRange all_keys{0, min_of(mask.key_length, p.seq_k)};
  const KeyRange piece = split_keys(all_keys, splits, split, kDecodeBlockKeys);

  float running_max[kRowsPerWarp], running_sum[kRowsPerWarp], output[kRowsPerWarp][kColumnsPerLane];
  KeyRange visible[kRowsPerWarp];
  for (int r = 0; r < kRowsPerWarp; ++r) {
    running_max[r] = -INFINITY;
    running_sum[r] = 0.0f;
    for (int c = 0; c < kColumnsPerLane; ++c) output[r][c] = 0.0f;
    const int row = warp * kRowsPerWarp + r;
    visible[r] = row < rows ? visible_keys(mask, (first_row + row) % p.seq_q) : KeyRange{0, 0};
  }
  const T* k = static_cast<const T*>(p.k) + batch * p.kv_batch_stride + std::int64_t(kv_head) * d;
  const T* v = static_cast<const T*>(p.v) + batch * p.kv_batch_stride + std::int64_t(kv_head) * d;
  for (int chunk = piece.begin; chunk < piece.end; chunk += kKeysPerChunk) {
    __syncthreads();  // the previous chunk is consumed (and, the first time, queries are stored)
    for (int index = threadIdx.x; index < kKeysPerChunk * d; index += blockDim.x) {
      const int key = index / d, column = index % d;
      const bool valid = chunk + key < piece.end;
      keys[key][column] = valid ? to_float(k[(chunk + key) * p.kv_row_stride + column]) : 0.0f;
      values[key][column] = valid ? to_float(v[(chunk + key) * p.kv_row_stride + column]) : 0.0f;
    }
    __syncthreads();
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      if (row >= rows) break;  // warp-uniform
      const int key = chunk + lane;
      float score = -INFINITY;
      if (key < piece.end && key >= visible[r].begin && key < visible[r].end) {
        float dot = 0.0f;
        for (int column = 0; column < d; ++column) dot = fmaf(queries[row][column], keys[lane][column], dot);
        score = dot * p.scale;
        if (p.softcap > 0.0f) score = p.softcap * tanhf(score / p.softcap);
      }
      const float new_max = fmaxf(running_max[r], warp_max(score));
      if (new_max == -INFINITY) continue;  // nothing visible yet for this row
      const float probability = masked_exp(score, new_max);
      const float factor = rescale_factor(running_max[r], new_max);
      running_sum[r] = running_sum[r] * factor + warp_sum(probability);
      running_max[r] = new_max;
      for (int c = 0; c < kColumnsPerLane; ++c) output[r][c] *= factor;
      for (int j = 0; j < kKeysPerChunk; ++j) {
        const float p_j = __shfl_sync(0xffffffffu, probability, j);
        if (p_j == 0.0f) continue;  // warp-uniform
        for (int c = 0; c < kColumnsPerLane; ++c) {
          const int column = lane + 32 * c;
          if (column < d) output[r][c] = fmaf(p_j, values[j][column], output[r][c]);
        }
      }
    }
  }
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int row = warp * kRowsPerWarp + r;
    if (row >= rows) break;
    const int global_row = first_row + row;
    const int head = first_query_head_of(kv_head, p.group_size) + global_row / p.seq_q;
    const int query = global_row % p.seq_q;
    const std::int64_t slot = ((std::int64_t(batch) * p.num_heads + head) * p.seq_q + query) * splits + split;
    for (int c = 0; c < kColumnsPerLane; ++c) {
      const int column = lane + 32 * c;
      if (column < d) partial_o[slot * d + column] = output[r][c];
    }
    if (lane == 0) {
      partial_max[slot] = running_max[r];
      partial_sum[slot] = running_sum[r];
    }
  }
}

// One warp per (batch, head, query): o = sum_s e^(m_s - M) o_s / (e^(sink - M) + sum_s e^(m_s - M) l_s);
// lse = M + log L (M over the pieces and the sink).
template <typename T>
__global__ void __launch_bounds__(kThreads) decode_combine_kernel(AttentionParams p, int splits, const float* partial_o,
                                                                  const float* partial_max, const float* partial_sum) {
  const std::int64_t row = std::int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32, d = p.head_dim;
  if (row >= std::int64_t(p.batch) * p.num_heads * p.seq_q) return;
  const int query = int(row % p.seq_q), head = int(row / p.seq_q % p.num_heads);
  const int batch = int(row / p.seq_q / p.num_heads);
  // The sink, if any, joins once here as one more piece (max s_h, sum 1, output 0), not once per split.
  const RowStart start = row_start(p.sinks, head);
  float maximum = start.max;
  for (int s = 0; s < splits; ++s) maximum = fmaxf(maximum, partial_max[row * splits + s]);
  float sum = masked_exp(start.max, maximum) * start.sum;
  for (int s = 0; s < splits; ++s) {
    sum += masked_exp(partial_max[row * splits + s], maximum) * partial_sum[row * splits + s];
  }
  T* o = static_cast<T*>(p.o) + batch * p.o_batch_stride + query * p.o_row_stride + std::int64_t(head) * d;
  for (int column = lane; column < d; column += 32) {
    float value = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float m = partial_max[row * splits + s];
      value += masked_exp(m, maximum) * partial_o[(row * splits + s) * d + column];
    }
    o[column] = from_float<T>(sum > 0.0f ? value / sum : 0.0f);
  }
  if (lane == 0 && p.lse != nullptr) p.lse[row] = log_sum_exp(maximum, sum);
}

void ensure_size(DeviceBuffer<float>& buffer, std::int64_t count) {
  if (buffer.size() < std::size_t(count)) buffer = DeviceBuffer<float>(std::size_t(count));
}

template <typename T>
void launch_decode(const AttentionParams& p, DecodeWorkspace& workspace, cudaStream_t stream) {
  int device = 0, multiprocessors = 0;
  check_cuda(cudaGetDevice(&device), "flash_decode: device");
  check_cuda(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device), "flash_decode: SMs");
  const int row_blocks = ceil_div(p.group_size * p.seq_q, kRowsPerBlock);
  const int splits = decode_splits(p.batch * p.num_kv_heads * row_blocks, p.seq_k, kDecodeBlockKeys, multiprocessors);
  const std::int64_t slots = std::int64_t(p.batch) * p.num_heads * p.seq_q * splits;
  ensure_size(workspace.partial_o, slots * p.head_dim);
  ensure_size(workspace.partial_max, slots);
  ensure_size(workspace.partial_sum, slots);
  float* partial_o = workspace.partial_o.data();
  float* partial_max = workspace.partial_max.data();
  float* partial_sum = workspace.partial_sum.data();
  const dim3 grid(splits, p.num_kv_heads * row_blocks, p.batch);
  check_cuda(cudaFuncSetAttribute(decode_partial_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(kDecodeSharedBytes)),
             "flash_decode: shared memory attribute");
  decode_partial_kernel<T>
      <<<grid, kThreads, kDecodeSharedBytes, stream>>>(p, splits, partial_o, partial_max, partial_sum);
  check_cuda(cudaGetLastError(), "flash_decode: partial launch");
  const std::int64_t rows = std::int64_t(p.batch) * p.num_heads * p.seq_q;
  decode_combine_kernel<T>
      <<<int((rows + kWarps - 1) / kWarps), kThreads, 0, stream>>>(p, splits, partial_o, partial_max, partial_sum);
  check_cuda(cudaGetLastError(), "flash_decode: combine launch");
}

}  // namespace

void flash_decode(const AttentionParams& params, DecodeWorkspace& workspace, cudaStream_t stream) {
  validate_params(params);
  switch (params.precision) {
    case Precision::fp32:
      return launch_decode<float>(params, workspace, stream);
    case Precision::bf16:
      return launch_decode<__nv_bfloat16>(params, workspace, stream);
    case Precision::fp16:
      return launch_decode<__half>(params, workspace, stream);
    case Precision::fp64:
      break;
  }
  throw std::invalid_argument("flash_decode: fp32, bf16 or fp16 only");
}

}  // namespace attncheck::cuda_impl
