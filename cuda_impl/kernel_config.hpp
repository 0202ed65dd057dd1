// Tile sizes per element size and tile width, chosen so that a block's shared memory fits the 163 KB an
// sm_80 block may opt into (sm_90 allows 227 KB). Only sm_80 (A100) and sm_90 (H100, H200) are supported:
// sm_86 / sm_89 allow 99 KB, which fp32 (always the 256-wide generic tile) and bf16/fp16 at head_dim 128,
// 192, 256 or the generic tile exceed, so cudaFuncSetAttribute fails there with a CudaError naming the
// kernel (bf16/fp16 at 64/80/96 happen to fit; smaller tiles are not built). The byte counts are written
// beside each kernel's layout and checked against that limit at compile time (the static_asserts below).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_impl/host_device.hpp"

namespace attncheck::cuda_impl {

inline constexpr std::size_t kMaxSharedBytes = 163 * 1024;  // sm_80's opt-in limit per block
inline constexpr int kThreads = 128;                        // four warps per block, every kernel

struct ForwardTiles {
  int block_q;
  int block_k;
};
// element_bytes: 2 (bf16, fp16) or 4 (fp32); capacity: the tile width in columns.
constexpr ForwardTiles forward_tiles(int element_bytes, int capacity) {
  if (element_bytes == 2) return capacity <= 128 ? ForwardTiles{64, 64} : ForwardTiles{32, 64};
  return capacity <= 128 ? ForwardTiles{32, 32} : ForwardTiles{16, 32};
}
// Forward shared memory: Q [bq][cap] T, K and V [bk][cap] T, S [bq][bk] float, P [bq][bk] T,
// O [bq][cap] float, row max / row sum / rescale [bq] float each.
constexpr std::size_t forward_shared_bytes(int element_bytes, int capacity) {
  const ForwardTiles t = forward_tiles(element_bytes, capacity);
  return std::size_t(element_bytes) * (t.block_q + 2 * t.block_k) * capacity + 4u * t.block_q * t.block_k +
         std::size_t(element_bytes) * t.block_q * t.block_k + 4u * t.block_q * capacity + 3 * 4u * t.block_q;
}

struct BackwardTiles {
  int block_q;
  int block_k;
};
constexpr BackwardTiles backward_tiles(int element_bytes, int capacity) {
  if (element_bytes == 2) return capacity <= 128 ? BackwardTiles{32, 32} : BackwardTiles{16, 32};
  return capacity <= 128 ? BackwardTiles{16, 32} : BackwardTiles{16, 16};
}
// Backward shared memory: K, V [bk][cap] T; dK, dV [bk][cap] float; Q, dO [bq][cap] T; S, dP [bq][bk]
// float; P, dS [bq][bk] T; dQ [bq][cap] float; lse, D [bq] float.
constexpr std::size_t backward_shared_bytes(int element_bytes, int capacity) {
  const BackwardTiles t = backward_tiles(element_bytes, capacity);
  return std::size_t(element_bytes) * 2 * (t.block_k + t.block_q) * capacity + 4u * 2 * t.block_k * capacity +
         4u * 2 * t.block_q * t.block_k + std::size_t(element_bytes) * 2 * t.block_q * t.block_k +
         4u * t.block_q * capacity + 2 * 4u * t.block_q;
}

static_assert(forward_shared_bytes(2, 256) <= kMaxSharedBytes && forward_shared_bytes(4, 256) <= kMaxSharedBytes &&
              forward_shared_bytes(2, 128) <= kMaxSharedBytes && forward_shared_bytes(4, 128) <= kMaxSharedBytes);
static_assert(backward_shared_bytes(2, 256) <= kMaxSharedBytes && backward_shared_bytes(4, 256) <= kMaxSharedBytes &&
              backward_shared_bytes(2, 128) <= kMaxSharedBytes && backward_shared_bytes(4, 128) <= kMaxSharedBytes);

}  // namespace attncheck::cuda_impl
